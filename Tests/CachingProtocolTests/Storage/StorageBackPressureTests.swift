import XCTest
@testable import CachingProtocol

/// A burst of writes faster than the disk keeps staged memory bounded.
final class StorageBackPressureTests: TemporaryDirectoryTestCase {
    func testStagedWritesNeverExceedTheBoundWhenStoreReturns() {
        // Given a disk tier that may hold 256 KB of records waiting to be written
        let limit = 256 << 10
        let store = DiskStore(configuration: .init(directory: cacheDirectory(), capacity: 64 << 20, maximumStagedBytes: limit))

        // When 200 records of 20 KB each are stored as fast as possible
        var peakStaged = 0
        for number in 0..<200 {
            let record = Fixtures.record(key: "k\(number)", bodySize: 20_000)
            store.store(record)
            peakStaged = max(peakStaged, store.diagnostics.stagedCount * record.cost)
        }

        // Then what waits in memory never passed the bound (plus the record just handed in)
        XCTAssertLessThanOrEqual(peakStaged, limit + 21_000)
        store.flush()
        XCTAssertEqual(store.statistics.entryCount, 200)
        XCTAssertEqual(store.record(forKey: "k199").map { Fixtures.isIntact($0, key: "k199") }, true)
    }
}
