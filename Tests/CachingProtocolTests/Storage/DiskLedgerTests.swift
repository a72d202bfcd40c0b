import XCTest
@testable import CachingProtocol

/// `DiskLedger`, the one owner of the disk tier's index, staged writes, access times and
/// tombstones, driven without a disk: each test is a sequence of the operations the store and
/// its worker call, and what the value then says.
final class DiskLedgerTests: LoaderRulesTestCase {
    private let base = Date(timeIntervalSinceReferenceDate: 700_000_000)

    private func at(_ seconds: Double) -> () -> Date {
        { [base] in base.addingTimeInterval(seconds) }
    }

    private func digest(_ key: String) -> EntryDigest {
        EntryDigest(key: key)
    }

    /// Stages `key` and writes it the way the worker does (begin, then mark written).
    @discardableResult
    private func storeAndWrite(_ state: inout DiskLedger, _ key: String, size: Int = 100, at seconds: Double = 0,
                               responseDate: Date? = nil) -> DiskIndex.Entry? {
        let record = Fixtures.record(key: key, responseDate: responseDate ?? base)
        _ = state.stage(record, cost: record.cost, at: at(seconds)())
        guard let job = state.beginWrite(digest(key)) else { return nil }
        return state.markWritten(digest(key), sequence: job.sequence, fileSize: size,
                                 latestResponseDate: job.record.latestResponseDate)
    }

    private func plan(_ state: inout DiskLedger, _ key: String, counting: Bool = true, limit: Int? = nil,
                      at seconds: Double = 0) -> DiskLedger.ReadPlan {
        state.planRead(key, counting: counting, sizeLimit: limit, now: at(seconds)).0
    }

    // MARK: - Staging and writing

    func testAStagedRecordIsAnsweredAndWrittenOnce() {
        // Given a record staged twice before the worker starts
        var state = DiskLedger()
        let first = Fixtures.record(key: "a", version: 1)
        let second = Fixtures.record(key: "a", version: 2)
        XCTAssertTrue(state.stage(first, cost: first.cost, at: base), "the first stage queues a write")
        XCTAssertFalse(state.stage(second, cost: second.cost, at: base), "the second joins it")
        // Then lookups get the newer record without a file, and the bytes count once
        XCTAssertEqual(plan(&state, "a"), .staged(second))
        XCTAssertEqual(state.stagedCount, 1)
        XCTAssertEqual(state.stagedBytes, second.cost)
        // When the worker starts the write, a later stage queues another
        let job = state.beginWrite(digest("a"))
        XCTAssertEqual(job?.record, second)
        XCTAssertTrue(state.stage(first, cost: first.cost, at: base))
    }

    func testMarkWrittenIndexesTheFileAndKeepsANewerStagedRecord() {
        var state = DiskLedger()
        let older = Fixtures.record(key: "a", version: 1)
        _ = state.stage(older, cost: older.cost, at: base)
        let job = state.beginWrite(digest("a"))!
        // When a newer record is staged while the older one is written
        let newer = Fixtures.record(key: "a", version: 2)
        _ = state.stage(newer, cost: newer.cost, at: base)
        let entry = state.markWritten(digest("a"), sequence: job.sequence, fileSize: 321, latestResponseDate: base)
        // Then the file is indexed, and lookups still get the newer staged record
        XCTAssertEqual(entry?.fileSize, 321)
        XCTAssertTrue(state.isIndexed(digest("a")))
        XCTAssertEqual(plan(&state, "a"), .staged(newer))
        XCTAssertEqual(state.stagedCount, 1)
    }

    func testAWriteFinishingAfterARemovalDoesNotBringTheRecordBack() {
        var state = DiskLedger()
        let record = Fixtures.record(key: "a")
        _ = state.stage(record, cost: record.cost, at: base)
        let job = state.beginWrite(digest("a"))!
        // When the app removes it while its file is being written
        XCTAssertEqual(state.forget([digest("a")]), [digest("a")])
        XCTAssertFalse(state.isStaged(digest("a")), "the worker sees it before renaming")
        // Then marking it written says the file must go, and nothing is indexed
        XCTAssertNil(state.markWritten(digest("a"), sequence: job.sequence, fileSize: 100, latestResponseDate: base))
        XCTAssertFalse(state.isIndexed(digest("a")))
        XCTAssertEqual(plan(&state, "a"), .miss)
    }

    func testADroppedWriteForgetsTheOldFileButNotANewerStage() {
        var state = DiskLedger()
        storeAndWrite(&state, "a")
        let record = Fixtures.record(key: "a", version: 2)
        _ = state.stage(record, cost: record.cost, at: base)
        let job = state.beginWrite(digest("a"))!
        let newest = Fixtures.record(key: "a", version: 3)
        _ = state.stage(newest, cost: newest.cost, at: base)
        // When the write of version 2 fails
        state.dropWrite(digest("a"), sequence: job.sequence)
        // Then the old file is forgotten and version 3 stays staged
        XCTAssertFalse(state.isIndexed(digest("a")))
        XCTAssertEqual(plan(&state, "a"), .staged(newest))
    }

    // MARK: - Lookups and access times

    func testCountedLookupsTouchTheIndexAndScheduleOneAccessTimeWrite() {
        var state = DiskLedger()
        let entry = storeAndWrite(&state, "a")!
        storeAndWrite(&state, "b")
        XCTAssertEqual(state.takeAccessTimes(), [], "a write carries its own access time")
        // When "a" is read twice and "b" once, counted
        let first = state.planRead("a", counting: true, sizeLimit: nil, now: at(10))
        let second = state.planRead("b", counting: true, sizeLimit: nil, now: at(20))
        let third = state.planRead("a", counting: true, sizeLimit: nil, now: at(30))
        // Then each reads the indexed file, and only the first asks for the delayed append
        XCTAssertEqual(first.0, .indexed(generation: entry.generation))
        XCTAssertEqual([first.1, second.1, third.1], [true, false, false])
        // And the access times come out oldest first, once
        XCTAssertEqual(state.takeAccessTimes(), [.touch(digest("b"), base.addingTimeInterval(20)),
                                                 .touch(digest("a"), base.addingTimeInterval(30))])
        XCTAssertEqual(state.takeAccessTimes(), [])
        // And an uncounted lookup touches nothing
        _ = plan(&state, "b", counting: false, at: 40)
        XCTAssertEqual(state.takeAccessTimes(), [])
    }

    func testALargeFileIsDeferredAndAnUnknownKeyIsAMiss() {
        var state = DiskLedger()
        storeAndWrite(&state, "big", size: 100_000)
        XCTAssertEqual(plan(&state, "big", limit: 65_536), .deferred)
        XCTAssertEqual(plan(&state, "unknown", limit: 65_536), .miss)
        XCTAssertEqual(state.takeAccessTimes(), [], "a deferred lookup touches nothing yet")
    }

    func testAMissingOrCorruptFileIsForgottenOnlyForItsOwnGeneration() {
        var state = DiskLedger()
        let old = storeAndWrite(&state, "a")!
        let new = storeAndWrite(&state, "a")!
        XCTAssertNotEqual(old.generation, new.generation)
        // A reader of the old file finds it missing or damaged: the newer entry stays
        XCTAssertFalse(state.fileVanished(digest("a"), generation: old.generation))
        XCTAssertFalse(state.fileCorrupt(digest("a"), generation: old.generation))
        XCTAssertTrue(state.isIndexed(digest("a")))
        // A reader of the current file: it goes, and its discard is due
        _ = plan(&state, "a", at: 5)
        XCTAssertTrue(state.fileCorrupt(digest("a"), generation: new.generation))
        XCTAssertFalse(state.isIndexed(digest("a")))
        XCTAssertEqual(state.takeAccessTimes(), [], "no access time for a forgotten entry")
    }

    // MARK: - Removing and evicting

    func testForgettingAnUnknownKeyCostsNoDiskWorkUnlessAScanMayFindAFile() {
        var state = DiskLedger()
        XCTAssertEqual(state.forget([digest("never")]), [])
        // While a scan is pending, the file may exist: its deletion is queued and remembered
        state.scanQueued()
        XCTAssertEqual(state.forget([digest("maybe")]), [digest("maybe")])
        XCTAssertTrue(state.wasRemoved(digest("maybe"), latestResponseDate: base))
        state.finishScan()
        XCTAssertFalse(state.wasRemoved(digest("maybe"), latestResponseDate: base), "tombstones go with the last scan")
    }

    func testForgetStoredSinceTakesIndexedAndStagedRecords() {
        var state = DiskLedger()
        storeAndWrite(&state, "old", responseDate: base)
        storeAndWrite(&state, "new", responseDate: base.addingTimeInterval(100))
        let staged = Fixtures.record(key: "staged", responseDate: base.addingTimeInterval(200))
        _ = state.stage(staged, cost: staged.cost, at: base)
        let doomed = Set(state.forget(storedSince: base.addingTimeInterval(50)))
        XCTAssertEqual(doomed, [digest("new"), digest("staged")])
        XCTAssertTrue(state.isIndexed(digest("old")))
        XCTAssertFalse(state.holdsRecord(forKey: "staged"))
    }

    func testEvictionTakesLeastRecentlyUsedFirstAndDropsTheirAccessTimes() {
        var state = DiskLedger()
        storeAndWrite(&state, "a", size: 100, at: 1)
        storeAndWrite(&state, "b", size: 100, at: 2)
        storeAndWrite(&state, "c", size: 100, at: 3)
        _ = plan(&state, "a", at: 4)  // "a" is now the most recent
        _ = plan(&state, "b", at: 5)
        // When everything must fit in 150 bytes with 20 bytes of metadata
        let victims = state.evict(toFit: 150, metadataBytes: 20, removalRecordSize: 10)
        // Then "c" then "a" go (130 + 10 + 10 > 150 after "c"; 110 + … fits after "a")
        XCTAssertEqual(victims, [digest("c"), digest("a")])
        XCTAssertEqual(state.index.count, 1)
        XCTAssertEqual(state.takeAccessTimes(), [.touch(digest("b"), base.addingTimeInterval(5))])
    }

    func testAVanishedDirectoryEmptiesTheIndex() {
        var state = DiskLedger()
        storeAndWrite(&state, "a")
        _ = plan(&state, "a", at: 9)
        state.vanish()
        XCTAssertEqual(state.index.count, 0)
        XCTAssertEqual(state.takeAccessTimes(), [])
        XCTAssertEqual(state.filesToDiscard([digest("a")]), [digest("a")])
    }

    // MARK: - Opening and scanning

    func testLookupsReadFilesDirectlyUntilTheIndexIsIn() {
        var state = DiskLedger()
        state.beginOpening()
        XCTAssertEqual(plan(&state, "a"), .unindexed)
        XCTAssertEqual(plan(&state, "a", limit: 1000), .deferred, "its size is unknown")
        XCTAssertTrue(state.mayHoldRecord(forKey: "a"))
        // A removal before the index is in: no direct read any more
        _ = state.forget([digest("a")])
        XCTAssertEqual(plan(&state, "a"), .miss)
    }

    func testTheLoadedIndexLeavesOutWhatWasRemovedBeforeIt() {
        // Given an index on disk listing three files
        var onDisk = DiskIndex()
        for (offset, key) in ["a", "b", "c"].enumerated() {
            onDisk.put(digest(key), DiskIndex.Entry(fileSize: 10, latestResponseDate: base.addingTimeInterval(Double(offset) * 60),
                                                    lastAccess: base))
        }
        // When, before it is loaded, "a" is removed and everything from minute 2 on
        var state = DiskLedger()
        state.beginOpening()
        _ = state.forget([digest("a")])
        _ = state.forget(storedSince: base.addingTimeInterval(120))
        state.install(onDisk)
        // Then only "b" is listed, and the removals still apply until the scan ends
        XCTAssertTrue(state.isIndexReady)
        XCTAssertEqual(Set(state.index.entries.map(\.key)), [digest("b")])
        XCTAssertTrue(state.scanPending)
        state.finishScan()
        XCTAssertFalse(state.scanPending)
    }

    func testAScanDropsVanishedEntriesAndAdoptsUnlistedFilesUnlessRemoved() {
        var state = DiskLedger()
        storeAndWrite(&state, "kept", at: 50)
        storeAndWrite(&state, "gone", at: 60)
        state.scanQueued()
        _ = state.forget([digest("removed")])
        // When the directory lists "kept", an orphan, and the removed one
        let (unlisted, vanished) = state.compare(listed: [digest("kept"), digest("orphan"), digest("removed")])
        // Then the entry whose file is gone is dropped, and only the orphan is to be read
        XCTAssertEqual(vanished, [digest("gone")])
        XCTAssertEqual(unlisted, [digest("orphan")])
        // And adopting it puts it behind everything, never newer than the oldest entry
        let found = [(digest: digest("orphan"), entry: DiskIndex.Entry(fileSize: 7, latestResponseDate: base, lastAccess: base.addingTimeInterval(99)))]
        let (records, removed) = state.adopt(found)
        XCTAssertEqual(removed, [])
        XCTAssertEqual(records.count, 1)
        XCTAssertEqual(state.index.entries.map(\.key), [digest("orphan"), digest("kept")])
        XCTAssertEqual(state.index.entry(for: digest("orphan"))?.lastAccess, base.addingTimeInterval(50))
        // And a file removed since the store opened that a scan reads anyway is deleted, not adopted
        let late = [(digest: digest("removed"), entry: DiskIndex.Entry(fileSize: 7, latestResponseDate: base, lastAccess: base))]
        XCTAssertEqual(state.adopt(late).removed, [digest("removed")])
        state.finishScan()
    }

    func testRemovingEverythingDuringAScanDeletesWhateverItFinds() {
        var state = DiskLedger()
        storeAndWrite(&state, "a")
        state.scanQueued()
        state.forgetAll()
        XCTAssertEqual(state.index.count, 0)
        XCTAssertEqual(state.stagedCount, 0)
        let (unlisted, _) = state.compare(listed: [digest("a"), digest("b")])
        XCTAssertEqual(unlisted, [], "everything is covered")
        let found = [(digest: digest("b"), entry: DiskIndex.Entry(fileSize: 7, latestResponseDate: base, lastAccess: base))]
        XCTAssertEqual(state.adopt(found).removed, [digest("b")])
    }

    // MARK: - Files that cannot be read

    func testAnUnreadableIndexIsTriedAgainOnceAtATimeAndNeverPersistedMeanwhile() {
        var state = DiskLedger()
        state.beginOpening()
        state.indexUnreadable()
        // Then lookups read files directly, the index is not written, removals leave tombstones
        XCTAssertFalse(state.persistsIndex)
        XCTAssertEqual(plan(&state, "a"), .unindexed)
        XCTAssertTrue(state.scanPending)
        _ = state.forget([digest("gone")])
        XCTAssertTrue(state.wasRemoved(digest("gone"), latestResponseDate: base))
        // And a lookup gets the load to queue once, not again while it is queued
        XCTAssertEqual(state.takeOwedWork(now: at(0), interval: 10).map { "\($0)" }, "open")
        XCTAssertNil(state.takeOwedWork(now: at(100), interval: 10))
        // When it fails again, the next try waits for the interval
        state.indexUnreadable()
        XCTAssertNil(state.takeOwedWork(now: at(5), interval: 10))
        XCTAssertNotNil(state.takeOwedWork(now: at(10), interval: 10))
    }

    func testAnIndexLoadedLateKeepsWhatWasWrittenMeanwhileAsTheMostRecent() {
        // Given an index that could not be read, while "new" was written and "old2" removed
        var state = DiskLedger()
        state.beginOpening()
        state.indexUnreadable()
        storeAndWrite(&state, "new", at: 500)
        _ = state.forget([digest("old2")])
        // When the index on disk (old1, old2, and an older "new") loads on a later try
        var onDisk = DiskIndex()
        for key in ["old1", "old2", "new"] {
            onDisk.put(digest(key), DiskIndex.Entry(fileSize: 10, latestResponseDate: base, lastAccess: base))
        }
        _ = state.takeOwedWork(now: at(0), interval: 0)
        state.install(onDisk)
        // Then it lists the old entries behind the new one, without the removed one
        XCTAssertTrue(state.persistsIndex)
        XCTAssertEqual(state.index.entries.map(\.key), [digest("old1"), digest("new")])
        XCTAssertEqual(state.index.entry(for: digest("new"))?.fileSize, 100, "the file written meanwhile")
        // And the scan that follows ends the owed work
        state.finishScan()
        XCTAssertFalse(state.scanPending)
        XCTAssertNil(state.takeOwedWork(now: at(1000), interval: 0))
    }

    func testFilesAScanCouldNotReadAreReadDirectlyAndScannedAgain() {
        var state = DiskLedger()
        state.scanQueued()
        let (unlisted, _) = state.compare(listed: [digest("locked"), digest("removed")])
        XCTAssertEqual(Set(unlisted), [digest("locked"), digest("removed")])
        state.finishScan(unreadable: [digest("locked"), digest("removed")])
        // Then they may be stored: lookups read them directly, and a scan is owed
        XCTAssertTrue(state.mayHoldRecord(forKey: "locked"))
        XCTAssertFalse(state.mayHoldRecord(forKey: "never"))
        XCTAssertEqual(plan(&state, "locked"), .unindexed)
        XCTAssertEqual(plan(&state, "never"), .miss)
        XCTAssertTrue(state.scanPending)
        // And removing one deletes its file and keeps a later read from serving it
        XCTAssertEqual(state.forget([digest("removed")]), [digest("removed")])
        XCTAssertEqual(plan(&state, "removed"), .miss)
        // And the owed scan, once it reads the file, adopts it and owes nothing more
        XCTAssertEqual(state.takeOwedWork(now: at(0), interval: 0).map { "\($0)" }, "reconcile(full: false)")
        let found = [(digest: digest("locked"), entry: DiskIndex.Entry(fileSize: 9, latestResponseDate: base, lastAccess: base))]
        XCTAssertEqual(state.adopt(found).records.count, 1)
        state.finishScan(unreadable: [])
        XCTAssertFalse(state.scanPending)
        XCTAssertFalse(state.wasRemoved(digest("removed"), latestResponseDate: base))
    }

    func testAnUnlistableDirectoryKeepsARebuildPending() {
        var state = DiskLedger()
        state.beginOpening()
        state.indexMissing()
        state.scanUnavailable()
        XCTAssertFalse(state.isIndexReady)
        XCTAssertTrue(state.persistsIndex, "a missing index may be written")
        XCTAssertEqual(plan(&state, "a"), .unindexed)
        XCTAssertEqual(state.takeOwedWork(now: at(0), interval: 0).map { "\($0)" }, "reconcile(full: true)")
    }
}
