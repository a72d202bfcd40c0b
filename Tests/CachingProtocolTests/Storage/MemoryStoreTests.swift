import XCTest
@testable import CachingProtocol

final class MemoryStoreTests: LoaderRulesTestCase {
    func testStoresAndFindsRecordsAndCountsHitsAndMisses() {
        // Given a store with one record
        let store = MemoryStore(capacity: 100_000)
        let record = Fixtures.richRecord()
        store.store(record)
        // When it is looked up, and a missing key too
        let found = store.record(forKey: record.key)
        let missing = store.record(forKey: "GET https://example.com/nope")
        // Then the record comes back whole and the counters say so
        XCTAssertEqual(found, record)
        XCTAssertNil(missing)
        let statistics = store.statistics
        XCTAssertEqual(statistics.hits, 1)
        XCTAssertEqual(statistics.misses, 1)
        XCTAssertEqual(statistics.entryCount, 1)
        XCTAssertEqual(statistics.byteCount, record.cost)
        XCTAssertEqual(statistics.capacity, 100_000)
    }

    func testNeverExceedsCapacityAndEvictsLeastRecentlyUsed() {
        // Given records of equal cost, four of which fit
        let sample = Fixtures.record(key: "k0", bodySize: 1000)
        let store = MemoryStore(capacity: sample.cost * 4 + 10, maximumEntryFraction: 1)
        for index in 0..<4 { store.store(Fixtures.record(key: "k\(index)", bodySize: 1000)) }
        // When the oldest is read (so it becomes the newest) and two more are stored
        XCTAssertNotNil(store.record(forKey: "k0"))
        store.store(Fixtures.record(key: "k4", bodySize: 1000))
        XCTAssertLessThanOrEqual(store.statistics.byteCount, store.capacity)
        store.store(Fixtures.record(key: "k5", bodySize: 1000))
        // Then the least recently used ones (k1, k2) went, and the capacity held throughout
        XCTAssertLessThanOrEqual(store.statistics.byteCount, store.capacity)
        XCTAssertNil(store.record(forKey: "k1"))
        XCTAssertNil(store.record(forKey: "k2"))
        for key in ["k0", "k3", "k4", "k5"] { XCTAssertNotNil(store.record(forKey: key), key) }
    }

    func testCapacityIsNeverExceededUnderRandomWorkload() {
        let store = MemoryStore(capacity: 50_000, maximumEntryFraction: 0.5)
        for step in 0..<2000 {
            let key = "k\(Int.random(in: 0..<100))"
            if step % 7 == 0 {
                store.removeRecord(forKey: key)
            } else {
                store.store(Fixtures.record(key: key, version: step, bodySize: Int.random(in: 0..<20_000)))
            }
            XCTAssertLessThanOrEqual(store.statistics.byteCount, 50_000)
        }
    }

    func testRecordAboveTheEntryFractionIsNotStoredAndDropsTheOldOne() {
        // Given a 10 KB store (default fraction 0.25 → 2.5 KB per record) holding a small record
        let store = MemoryStore(capacity: 10_000)
        store.store(Fixtures.record(key: "big", bodySize: 100))
        XCTAssertNotNil(store.record(forKey: "big"))
        // When a record of about 3 KB is stored under the same key
        store.store(Fixtures.record(key: "big", version: 1, bodySize: 3000))
        // Then neither is kept
        XCTAssertNil(store.record(forKey: "big"))
        XCTAssertEqual(store.statistics.entryCount, 0)
        // And a custom fraction admits it
        let lenient = MemoryStore(capacity: 10_000, maximumEntryFraction: 0.5)
        lenient.store(Fixtures.record(key: "big", version: 1, bodySize: 3000))
        XCTAssertNotNil(lenient.record(forKey: "big"))
    }

    func testShrinkingCapacityEvictsAtOnce() {
        let store = MemoryStore(capacity: 100_000, maximumEntryFraction: 1)
        for index in 0..<10 { store.store(Fixtures.record(key: "k\(index)", bodySize: 1000)) }
        let cost = Fixtures.record(key: "k0", bodySize: 1000).cost
        // When the capacity drops to three records' worth
        store.capacity = cost * 3
        // Then only the three most recent remain
        XCTAssertEqual(store.statistics.entryCount, 3)
        XCTAssertLessThanOrEqual(store.statistics.byteCount, cost * 3)
        XCTAssertEqual(store.allRecords().map(\.key), ["k7", "k8", "k9"])
        // And zero empties it
        store.capacity = 0
        XCTAssertEqual(store.statistics.entryCount, 0)
    }

    func testRemoveRecordsStoredSince() {
        let store = MemoryStore(capacity: 1_000_000)
        let base = Date(timeIntervalSinceReferenceDate: 600_000_000)
        for index in 0..<5 {
            store.store(Fixtures.record(key: "k\(index)", responseDate: base.addingTimeInterval(Double(index) * 60)))
        }
        // When records stored at or after minute 2 are removed
        store.removeRecords(storedSince: base.addingTimeInterval(120))
        // Then the older two remain
        XCTAssertEqual(Set(store.allRecords().map(\.key)), ["k0", "k1"])
    }

    func testRemoveAndRemoveAll() {
        let store = MemoryStore(capacity: 1_000_000)
        for index in 0..<5 { store.store(Fixtures.record(key: "k\(index)")) }
        store.removeRecord(forKey: "k2")
        XCTAssertNil(store.record(forKey: "k2"))
        XCTAssertEqual(store.statistics.entryCount, 4)
        store.removeAll()
        XCTAssertEqual(store.statistics.entryCount, 0)
        XCTAssertEqual(store.statistics.byteCount, 0)
        XCTAssertTrue(store.allRecords().isEmpty)
    }

    func testAllRecordsListsLeastRecentFirst() {
        let store = MemoryStore(capacity: 1_000_000)
        for index in 0..<3 { store.store(Fixtures.record(key: "k\(index)")) }
        _ = store.record(forKey: "k0")
        XCTAssertEqual(store.allRecords().map(\.key), ["k1", "k2", "k0"])
    }
}
