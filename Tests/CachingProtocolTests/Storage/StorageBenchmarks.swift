import XCTest
@testable import CachingProtocol

/// Timings, not assertions: run with `CACHING_BENCHMARKS=1` (ideally in release:
/// `CACHING_BENCHMARKS=1 swift test -c release -Xswiftc -enable-testing --filter StorageBenchmarks`).
final class StorageBenchmarks: TemporaryDirectoryTestCase {
    override func setUpWithError() throws {
        guard ProcessInfo.processInfo.environment["CACHING_BENCHMARKS"] == "1" else {
            throw XCTSkip("benchmarks run only with CACHING_BENCHMARKS=1")
        }
        try super.setUpWithError()
    }

    private func seconds(_ body: () -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    private func median(_ values: [Double]) -> Double {
        values.sorted()[values.count / 2]
    }

    func testOpeningAHundredThousandEntries() {
        let count = 100_000
        let directory = cacheDirectory()
        let records = (0..<count).map { Fixtures.record(key: "GET https://example.com/items/\($0)?page=\($0 % 7)", bodySize: 64) }

        let store = DiskStore(configuration: .init(directory: directory, capacity: 1 << 30))
        let staging = seconds { records.forEach(store.store) }
        let writing = seconds { store.flush() }
        print(String(format: "[bench] store() x %d: %.3f s (%.1f µs each, caller side)", count, staging, staging / Double(count) * 1e6))
        print(String(format: "[bench] worker settles %d writes in a further %.3f s after the last store()", count, writing))
        XCTAssertEqual(store.statistics.entryCount, count)

        var opens: [Double] = []
        var reconciles: [Double] = []
        for _ in 0..<5 {
            var reopened: DiskStore?
            opens.append(seconds { reopened = DiskStore(configuration: .init(directory: directory, capacity: 1 << 30)) })
            reconciles.append(seconds { reopened?.flush() })
            XCTAssertEqual(reopened?.statistics.entryCount, count)
            XCTAssertEqual(reopened?.diagnostics.entryFileReads, 0)
        }
        print(String(format: "[bench] open with %d entries: median %.1f ms (min %.1f, max %.1f)",
                     count, median(opens) * 1000, opens.min()! * 1000, opens.max()! * 1000))
        print(String(format: "[bench] background reconcile (directory listing) after open: median %.1f ms", median(reconciles) * 1000))

        let reader = track(DiskStore(configuration: .init(directory: directory, capacity: 1 << 30)))
        reader.flush()
        let lookups = 20_000
        let hits = seconds {
            for index in 0..<lookups { _ = reader.record(forKey: records[(index * 7919) % count].key) }
        }
        let misses = seconds {
            for index in 0..<lookups { _ = reader.record(forKey: "GET https://example.com/absent/\(index)") }
        }
        print(String(format: "[bench] disk hit (read + decode, 1 thread): %.1f µs; miss: %.2f µs",
                     hits / Double(lookups) * 1e6, misses / Double(lookups) * 1e6))

        let memory = MemoryStore(capacity: 1 << 30)
        records.prefix(10_000).forEach(memory.store)
        let memoryHits = seconds {
            for index in 0..<1_000_000 { _ = memory.record(forKey: records[index % 10_000].key) }
        }
        print(String(format: "[bench] memory hit: %.3f µs", memoryHits / 1_000_000 * 1e6))
        print("[bench] directory: \(sizeOfFiles(in: directory)) bytes for \(count) entries")
    }
}
