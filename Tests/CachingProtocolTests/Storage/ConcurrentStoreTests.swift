import XCTest
@testable import CachingProtocol

/// Many threads storing, reading and removing the same keys at once: every body read back must
/// be exactly a body that was stored for that key (none lost, torn, or another key's).
final class ConcurrentStoreTests: TemporaryDirectoryTestCase {
    private let threads = 8
    private let operationsPerThread = 10_000

    private struct Outcome {
        var hits = 0
        var misses = 0
        var wrongRecords: [String] = []
    }

    /// Runs the mixed workload on `store` and returns what the readers saw.
    /// `settle` runs every 1,000 operations of each thread (the disk test flushes there, so
    /// lookups also read files while other threads' writes land, not only staged records).
    private func hammer(
        _ store: some HammeredStore,
        keyCount: Int,
        maximumBodySize: Int,
        settle: @escaping @Sendable () -> Void = {}
    ) -> Outcome {
        let outcome = Locked(Outcome())
        let operationsPerThread = self.operationsPerThread
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var local = Outcome()
            var generator = SystemRandomNumberGenerator()
            for step in 0..<operationsPerThread {
                if step % 1000 == 999 { settle() }
                let key = "GET https://example.com/item/\(Int.random(in: 0..<keyCount, using: &generator))"
                let dice = Int.random(in: 0..<100, using: &generator)
                if dice < 55 {
                    if let record = store.record(forKey: key, countingLookup: true) {
                        local.hits += 1
                        if !Fixtures.isIntact(record, key: key) { local.wrongRecords.append(key) }
                    } else {
                        local.misses += 1
                    }
                } else if dice < 90 {
                    let size = Int.random(in: 16...maximumBodySize, using: &generator)
                    store.store(Fixtures.record(key: key, version: thread * 1_000_000 + step, bodySize: size))
                } else {
                    store.removeRecord(forKey: key)
                }
            }
            outcome.withLock { total in
                total.hits += local.hits
                total.misses += local.misses
                total.wrongRecords += local.wrongRecords
            }
        }
        return outcome.withLock { $0 }
    }

    func testMemoryStoreUnderConcurrentMixedOperations() {
        // Given a memory tier small enough to evict
        let store = MemoryStore(capacity: 200_000)
        // When 8 threads run 10,000 mixed operations each
        let outcome = hammer(store, keyCount: 200, maximumBodySize: 2000)
        // Then every hit was an intact record of its key, and the capacity held
        XCTAssertEqual(outcome.wrongRecords, [])
        XCTAssertGreaterThan(outcome.hits, 1000)
        XCTAssertEqual(outcome.hits + outcome.misses, store.statistics.hits + store.statistics.misses)
        XCTAssertLessThanOrEqual(store.statistics.byteCount, 200_000)
        for record in store.allRecords() {
            XCTAssertTrue(Fixtures.isIntact(record, key: record.key))
        }
    }

    func testDiskStoreUnderConcurrentMixedOperations() {
        // Given a disk tier small enough to evict
        let capacity = 128 * 1024
        let directory = cacheDirectory()
        let store = track(DiskStore(configuration: .init(directory: directory, capacity: capacity)))
        // When 8 threads run 10,000 mixed operations each
        let outcome = hammer(store, keyCount: 128, maximumBodySize: 2000, settle: { store.flush() })
        store.flush()
        // Then every hit was an intact record of its key
        XCTAssertEqual(outcome.wrongRecords, [])
        XCTAssertGreaterThan(outcome.hits, 1000)
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 0)
        XCTAssertEqual(store.diagnostics.writeFailures, 0)
        XCTAssertGreaterThan(store.diagnostics.entryFileReads, 3000, "lookups should also have read files")
        // And the files fit the capacity and match the statistics
        let onDisk = sizeOfFiles(in: directory)
        XCTAssertLessThanOrEqual(onDisk, capacity)
        XCTAssertEqual(store.statistics.byteCount, onDisk)

        // And the last write of each key wins: store final versions, reopen, read them back
        let finals = (0..<20).map { Fixtures.record(key: "GET https://example.com/item/\($0)", version: 7_777_777, bodySize: 1500) }
        finals.forEach(store.store)
        store.flush()
        let reopened = track(DiskStore(configuration: .init(directory: directory, capacity: capacity)))
        reopened.flush()
        for record in finals {
            XCTAssertEqual(reopened.record(forKey: record.key), record)
        }
        for index in 20..<128 {
            let key = "GET https://example.com/item/\(index)"
            if let record = reopened.record(forKey: key) {
                XCTAssertTrue(Fixtures.isIntact(record, key: key), key)
            }
        }
        XCTAssertEqual(reopened.diagnostics.corruptEntriesRemoved, 0)
    }
}

/// What the workload needs of a tier: the memory tier and the disk tier both have it.
protocol HammeredStore: Sendable {
    func record(forKey key: String, countingLookup: Bool) -> CacheRecord?
    func store(_ record: CacheRecord)
    func removeRecord(forKey key: String)
}

extension MemoryStore: HammeredStore {}
extension DiskStore: HammeredStore {}
