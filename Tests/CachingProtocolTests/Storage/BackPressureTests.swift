import XCTest
@testable import CachingProtocol

/// A burst of writes faster than the disk keeps staged memory bounded.
final class BackPressureTests: TemporaryDirectoryTestCase {
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

    /// A disk tier that may hold 64 KB of records waiting, whose worker runs only once `gate` is
    /// resumed.
    private func heldDiskTier() -> (store: DiskStore, gate: DispatchQueue) {
        let gate = DispatchQueue(label: "gate")
        gate.suspend()
        let store = DiskStore(configuration: .init(directory: cacheDirectory(), capacity: 64 << 20, maximumStagedBytes: 64 << 10),
                              workerTarget: gate)
        return (store, gate)
    }

    /// One response larger than the bound, with nothing else waiting, does not wait for its own
    /// write: the engine stores before it answers, so waiting would hold the answer back.
    func testOneRecordLargerThanTheBoundDoesNotWaitForItsOwnWrite() {
        // Given a disk tier whose worker is held, that may hold 64 KB of records waiting
        let (store, gate) = heldDiskTier()

        // When a record of 1 MB is stored
        let first = expectation(description: "the store returns while its write waits")
        DispatchQueue.global().async {
            store.store(Fixtures.record(key: "large", bodySize: 1 << 20))
            first.fulfill()
        }

        // Then it returns with its write still staged; a second one, over the bound, waits
        wait(for: [first], timeout: 5)
        XCTAssertEqual(store.diagnostics.stagedCount, 1)
        let second = expectation(description: "a second store, over the bound, waits for the first write")
        DispatchQueue.global().async {
            store.store(Fixtures.record(key: "next", bodySize: 1 << 20))
            second.fulfill()
        }
        gate.resume()
        wait(for: [second], timeout: 10)
        store.flush()
        XCTAssertEqual(store.record(forKey: "large").map { Fixtures.isIntact($0, key: "large") }, true)
        XCTAssertEqual(store.record(forKey: "next").map { Fixtures.isIntact($0, key: "next") }, true)
    }

    /// A store told not to wait (one made on corelibs' queue, `CacheEngine.apply`) returns at
    /// once while the worker is behind, its record staged past the bound and written after.
    func testAStoreThatMayNotWaitIsStagedPastTheBound() {
        // Given a disk tier whose worker is held, behind with a record of 1 MB
        let (store, gate) = heldDiskTier()
        store.store(Fixtures.record(key: "large", bodySize: 1 << 20))
        XCTAssertTrue(store.isBacklogged)

        // When another record is stored without waiting
        let stored = expectation(description: "the store returns while the worker is held")
        DispatchQueue.global().async {
            store.store(Fixtures.record(key: "small", bodySize: 4_000), bodyFile: nil, waitsIfBehind: false)
            stored.fulfill()
        }

        // Then it returns with both writes still staged, and both are written once the worker runs
        wait(for: [stored], timeout: 5)
        XCTAssertEqual(store.diagnostics.stagedCount, 2)
        XCTAssertEqual(store.record(forKey: "small").map { Fixtures.isIntact($0, key: "small") }, true, "staged records are read")
        gate.resume()
        store.flush()
        XCTAssertEqual(store.diagnostics.stagedCount, 0)
        XCTAssertEqual(store.record(forKey: "large").map { Fixtures.isIntact($0, key: "large") }, true)
        XCTAssertEqual(store.record(forKey: "small").map { Fixtures.isIntact($0, key: "small") }, true)
    }

    /// What lets the engine store where an upstream transfer ends (`RecordStore.storesWithoutWaiting`):
    /// the disk tier says it is behind exactly while a store would wait for it.
    func testTheDiskTierSaysItIsBehindWhileAStoreWouldWait() {
        // Given a disk tier whose worker is held, that may hold 64 KB of records waiting
        let (store, gate) = heldDiskTier()
        XCTAssertFalse(store.isBacklogged)

        // When one record of 1 MB waits to be written, then is written
        store.store(Fixtures.record(key: "large", bodySize: 1 << 20))
        XCTAssertTrue(store.isBacklogged, "the next store would wait")
        gate.resume()
        store.flush()

        // Then it is no longer behind
        XCTAssertFalse(store.isBacklogged)
    }

    /// Both tiers store a variant without waiting for a key whose record is in memory or
    /// nowhere; a record only on disk is read first (its other variants stay beside the new one).
    func testStoringWithoutWaitingMeansReadingNoFile() throws {
        let onDiskOnly = CachingURLCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: cacheDirectory("on-disk-only"))
        let entry = Fixtures.entry(body: Data("body".utf8))
        onDiskOnly.waitUntilSettled()   // the index is loaded: until then any key may be stored
        XCTAssertTrue(onDiskOnly.store.storesWithoutWaiting(forKey: "k"), "nothing stored")
        onDiskOnly.store.storeVariant(entry, key: "k", memoryOnly: false)
        onDiskOnly.waitUntilSettled()
        XCTAssertNotNil(onDiskOnly.store.peek("k"), "stored on disk")
        XCTAssertFalse(onDiskOnly.store.storesWithoutWaiting(forKey: "k"), "its file would be read")

        let inMemory = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 64 << 20, directory: cacheDirectory("in-memory"))
        inMemory.store.storeVariant(entry, key: "k", memoryOnly: false)
        inMemory.waitUntilSettled()
        XCTAssertTrue(inMemory.store.storesWithoutWaiting(forKey: "k"), "the record is in memory")
    }
}
