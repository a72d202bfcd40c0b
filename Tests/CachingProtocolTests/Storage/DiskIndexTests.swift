import XCTest
@testable import CachingProtocol

final class DiskIndexTests: LoaderRulesTestCase {
    private let base = Date(timeIntervalSinceReferenceDate: 700_000_000)

    private func digest(_ name: String) -> EntryDigest { EntryDigest(key: name) }

    private func entry(size: Int, stored: Double = 0, accessed: Double) -> DiskIndex.Entry {
        DiskIndex.Entry(fileSize: size, latestResponseDate: base.addingTimeInterval(stored), lastAccess: base.addingTimeInterval(accessed))
    }

    private func order(_ index: DiskIndex) -> [EntryDigest] {
        index.entries.map(\.key)
    }

    func testSnapshotRoundTripsInLRUOrder() throws {
        // Given an index of three entries, one touched
        var index = DiskIndex()
        index.put(digest("a"), entry(size: 100, accessed: 1))
        index.put(digest("b"), entry(size: 200, stored: 5, accessed: 2))
        index.put(digest("c"), entry(size: 300, accessed: 3))
        index.touch(digest("a"), at: base.addingTimeInterval(4))
        // When it is written as a snapshot and loaded with an empty journal
        let snapshot = index.snapshotData()
        let loaded = try DiskIndex.load(snapshot: snapshot, journal: Data())
        // Then order, sizes and dates survive
        XCTAssertEqual(snapshot.count, DiskIndex.snapshotSize(count: 3))
        XCTAssertEqual(order(loaded.index), [digest("b"), digest("c"), digest("a")])
        XCTAssertEqual(loaded.index.byteCount, 600)
        XCTAssertEqual(loaded.index.entry(for: digest("b")), entry(size: 200, stored: 5, accessed: 2))
        XCTAssertEqual(loaded.damagedJournalBytes, 0)
    }

    func testJournalReplayAppliesPutsRemovesTouchesAndClears() throws {
        var index = DiskIndex()
        index.put(digest("a"), entry(size: 100, accessed: 1))
        index.put(digest("b"), entry(size: 100, accessed: 2))
        let snapshot = index.snapshotData()
        // When the journal adds c, removes a, touches b, then adds d
        let journal = DiskIndex.encodeJournal([
            .put(digest("c"), entry(size: 50, accessed: 3)),
            .remove(digest("a")),
            .touch(digest("b"), base.addingTimeInterval(4)),
            .touch(digest("zzz"), base.addingTimeInterval(5)),  // unknown: ignored
            .put(digest("d"), entry(size: 70, accessed: 6)),
        ])
        let loaded = try DiskIndex.load(snapshot: snapshot, journal: journal).index
        // Then the index is c, b, d from least to most recent
        XCTAssertEqual(order(loaded), [digest("c"), digest("b"), digest("d")])
        XCTAssertEqual(loaded.byteCount, 220)
        // And a clear wipes what came before it
        let cleared = DiskIndex.encodeJournal([.clear, .put(digest("e"), entry(size: 1, accessed: 9))])
        XCTAssertEqual(order(try DiskIndex.load(snapshot: snapshot, journal: journal + cleared).index), [digest("e")])
    }

    func testReplayingAJournalTheSnapshotAlreadyHoldsChangesNothing() throws {
        // A crash between writing a snapshot and emptying the journal replays old records.
        let records: [DiskIndex.JournalRecord] = [
            .put(digest("a"), entry(size: 1, accessed: 1)),
            .put(digest("b"), entry(size: 2, accessed: 2)),
            .remove(digest("a")),
            .touch(digest("b"), base.addingTimeInterval(3)),
            .put(digest("c"), entry(size: 3, accessed: 4)),
        ]
        let journal = DiskIndex.encodeJournal(records)
        let once = try DiskIndex.load(snapshot: DiskIndex().snapshotData(), journal: journal).index
        let twice = try DiskIndex.load(snapshot: once.snapshotData(), journal: journal).index
        XCTAssertEqual(order(once), order(twice))
        XCTAssertEqual(once.snapshotData(), twice.snapshotData())
    }

    func testTornJournalTailIsIgnoredAndGarbageIsSkipped() throws {
        let snapshot = DiskIndex().snapshotData()
        let first = DiskIndex.encodeJournal([.put(digest("a"), entry(size: 1, accessed: 1))])
        let second = DiskIndex.encodeJournal([.put(digest("b"), entry(size: 2, accessed: 2))])
        // Given a torn append (half a record) followed by another process's whole append
        let journal = first + second.prefix(20) + Data((0..<37).map { _ in UInt8.random(in: 0...255) }) + second
        // When it is replayed
        let loaded = try DiskIndex.load(snapshot: snapshot, journal: journal)
        // Then both whole records apply and the damage is counted
        XCTAssertEqual(Set(order(loaded.index)), [digest("a"), digest("b")])
        XCTAssertEqual(loaded.damagedJournalBytes, 20 + 37)
        // And a journal cut anywhere applies the whole records before the cut
        for cut in 0..<(first.count + second.count) {
            let records = DiskIndex.decodeJournal((first + second).prefix(cut)).records
            XCTAssertEqual(records.count, cut >= first.count + second.count ? 2 : (cut >= first.count ? 1 : 0))
        }
    }

    func testDamagedSnapshotsAreRejected() {
        var index = DiskIndex()
        for name in ["a", "b", "c"] { index.put(digest(name), entry(size: 10, accessed: 1)) }
        let snapshot = index.snapshotData()
        for length in 0..<snapshot.count {
            XCTAssertThrowsError(try DiskIndex.load(snapshot: snapshot.prefix(length), journal: Data()))
        }
        var bytes = [UInt8](snapshot)
        for position in bytes.indices {
            bytes[position] ^= 0x10
            XCTAssertThrowsError(try DiskIndex.load(snapshot: Data(bytes), journal: Data()))
            bytes[position] ^= 0x10
        }
        XCTAssertThrowsError(try DiskIndex.load(snapshot: Data(repeating: 0xAB, count: 4096), journal: Data()))
    }

    func testLoadOrdersByLastAccess() throws {
        // Records written out of time order still load least recently used first
        let journal = DiskIndex.encodeJournal([
            .put(digest("late"), entry(size: 1, accessed: 50)),
            .put(digest("early"), entry(size: 1, accessed: 10)),
            .put(digest("middle"), entry(size: 1, accessed: 30)),
        ])
        let loaded = try DiskIndex.load(snapshot: DiskIndex().snapshotData(), journal: journal).index
        XCTAssertEqual(order(loaded), [digest("early"), digest("middle"), digest("late")])
    }

    func testAdoptedEntriesAreEvictedFirst() {
        var index = DiskIndex()
        index.put(digest("known"), entry(size: 1, accessed: 10))
        // An orphan with a later modification time still goes before the known entry
        index.adopt(digest("orphan"), entry(size: 5, accessed: 99))
        XCTAssertEqual(order(index), [digest("orphan"), digest("known")])
        XCTAssertLessThanOrEqual(index.entry(for: digest("orphan"))!.lastAccess, base.addingTimeInterval(10))
        XCTAssertEqual(index.popLeastRecent()?.digest, digest("orphan"))
    }

    func testRemoveIfGenerationKeepsNewerWrites() {
        var index = DiskIndex()
        let old = index.put(digest("a"), entry(size: 1, accessed: 1))
        let new = index.put(digest("a"), entry(size: 2, accessed: 2))
        XCTAssertNotEqual(old, new)
        XCTAssertFalse(index.remove(digest("a"), ifGeneration: old))
        XCTAssertTrue(index.contains(digest("a")))
        XCTAssertTrue(index.remove(digest("a"), ifGeneration: new))
        XCTAssertFalse(index.contains(digest("a")))
    }

    func testRemoveEntriesStoredSince() {
        var index = DiskIndex()
        for minute in 0..<5 {
            index.put(digest("k\(minute)"), entry(size: 1, stored: Double(minute) * 60, accessed: Double(minute)))
        }
        let doomed = index.digests(storedSince: base.addingTimeInterval(120))
        XCTAssertEqual(Set(doomed), [digest("k2"), digest("k3"), digest("k4")])
        XCTAssertEqual(index.count, 5)
    }
}
