import XCTest
@testable import CachingProtocol

final class DiskStoreTests: TemporaryDirectoryTestCase {
    private var clock = SteppingClock()

    override func setUpWithError() throws {
        try super.setUpWithError()
        clock = SteppingClock()
    }

    private func makeStore(
        _ directory: URL? = nil,
        capacity: Int = 10 * 1024 * 1024,
        fraction: Double = 0.25,
        compaction: Int = 1024 * 1024
    ) -> DiskStore {
        track(DiskStore(configuration: .init(
            directory: directory ?? cacheDirectory(),
            capacity: capacity,
            maximumEntryFraction: fraction,
            journalCompactionThreshold: compaction,
            accessTimeWriteDelay: 3600,  // tests persist access times with flush()
            now: clock.closure
        )))
    }

    private func fileSize(of record: CacheRecord) -> Int {
        EntryCodec.encode(record).count
    }

    private func entryPath(_ key: String) -> String {
        cacheDirectory().appendingPathComponent("entries").appendingPathComponent(StableHash.hexDigest128(key)).path
    }

    private func assertDirectoryMatchesStatistics(_ store: DiskStore, file: StaticString = #filePath, line: UInt = #line) {
        let onDisk = sizeOfFiles(in: cacheDirectory())
        XCTAssertLessThanOrEqual(onDisk, store.capacity, "files exceed the capacity", file: file, line: line)
        XCTAssertEqual(store.statistics.byteCount, onDisk, "statistics disagree with the files", file: file, line: line)
    }

    // MARK: - Write-behind

    func testARecordWaitsForTheWriteDelayAndIsServedFromStagingMeanwhile() throws {
        // A delay no test outlives: the worker starts the write only when flushed.
        let store = track(DiskStore(configuration: .init(directory: cacheDirectory(), accessTimeWriteDelay: 3600,
                                                         writeDelay: 3600, now: clock.closure)))
        store.waitUntilOpen()
        let record = Fixtures.record(key: "behind", bodySize: 2000)
        store.store(record)
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath("behind")), "not written yet")
        XCTAssertEqual(store.record(forKey: "behind", countingLookup: false), record, "answered from the staging area")
        store.flush()
        XCTAssertTrue(FileManager.default.fileExists(atPath: entryPath("behind")), "flush writes at once")
        XCTAssertEqual(try FileIO.readFile(entryPath("behind")).count, fileSize(of: record))
    }

    // MARK: - Persistence

    func testStoredRecordsSurviveARestart() {
        // Given a store that wrote three records
        let records = [Fixtures.richRecord(), Fixtures.record(key: "b", bodySize: 5000), Fixtures.record(key: "c", bodySize: 0)]
        do {
            let store = makeStore()
            records.forEach(store.store)
            store.flush()
            XCTAssertEqual(store.statistics.entryCount, 3)
            XCTAssertEqual(store.diagnostics.status, .available)
        }
        // When a second instance opens the same directory
        let reopened = makeStore()
        // Then it loaded the index without reading entry files, and finds every record whole
        reopened.waitUntilOpen()
        XCTAssertEqual(reopened.diagnostics.indexOrigin, .loaded)
        XCTAssertEqual(reopened.statistics.entryCount, 3)
        reopened.flush()
        XCTAssertEqual(reopened.diagnostics.entryFileReads, 0)
        for record in records {
            XCTAssertEqual(reopened.record(forKey: record.key), record)
        }
        XCTAssertEqual(reopened.statistics.hits, 3)
        XCTAssertNil(reopened.record(forKey: "missing"))
        XCTAssertEqual(reopened.statistics.misses, 1)
        assertDirectoryMatchesStatistics(reopened)
    }

    func testLayoutUsesDigestNamesAndOwnerOnlyPermissions() throws {
        let store = makeStore()
        store.store(Fixtures.record(key: "GET https://example.com/%2e%2e/%2e%2e/etc/passwd"))
        store.flush()
        let names = entryFiles(in: cacheDirectory())
        XCTAssertEqual(names, [StableHash.hexDigest128("GET https://example.com/%2e%2e/%2e%2e/etc/passwd")])
        let root = try FileManager.default.attributesOfItem(atPath: cacheDirectory().path)
        XCTAssertEqual((root[.posixPermissions] as? NSNumber)?.intValue, 0o700)
        let file = try FileManager.default.attributesOfItem(atPath: cacheDirectory().appendingPathComponent("entries/\(names[0])").path)
        XCTAssertEqual((file[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let top = try FileManager.default.contentsOfDirectory(atPath: cacheDirectory().path).sorted()
        XCTAssertEqual(top, ["entries", "index", "journal"])
    }

    func testOpeningThousandsOfEntriesReadsNoEntryFile() {
        // Given a cache of 3000 entries
        do {
            let store = makeStore()
            for index in 0..<3000 { store.store(Fixtures.record(key: "k\(index)", bodySize: 16)) }
            store.flush()
        }
        // When it is opened and its background reconcile has run
        let reopened = makeStore()
        reopened.flush()
        // Then not one entry file was opened, and all entries are known
        XCTAssertEqual(reopened.diagnostics.entryFileReads, 0)
        XCTAssertEqual(reopened.statistics.entryCount, 3000)
        XCTAssertEqual(reopened.diagnostics.indexOrigin, .loaded)
        assertDirectoryMatchesStatistics(reopened)
    }

    // MARK: - Staged writes

    func testReadsSeeStagedWritesBeforeTheyReachDisk() {
        // Given a store whose worker is held
        let store = makeStore()
        store.flush()
        store.worker.suspend()
        let record = Fixtures.record(key: "staged", bodySize: 1000)
        // When a record is stored
        store.store(record)
        // Then it is readable at once, though no file exists yet
        XCTAssertEqual(store.record(forKey: "staged"), record)
        XCTAssertEqual(store.diagnostics.stagedCount, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath("staged")))
        store.worker.resume()
        // And after the flush it is on disk and no longer staged
        store.flush()
        XCTAssertTrue(FileManager.default.fileExists(atPath: entryPath("staged")))
        XCTAssertEqual(store.diagnostics.stagedCount, 0)
        XCTAssertEqual(store.record(forKey: "staged"), record)
    }

    func testRepeatedStoresOfOneKeyAreCoalesced() {
        let store = makeStore()
        store.flush()
        store.worker.suspend()
        for version in 0..<50 { store.store(Fixtures.record(key: "hot", version: version)) }
        store.worker.resume()
        store.flush()
        XCTAssertEqual(store.record(forKey: "hot"), Fixtures.record(key: "hot", version: 49))
        // One write settled: one put record in the journal
        let journal = (try? Data(contentsOf: cacheDirectory().appendingPathComponent("journal"))) ?? Data()
        let puts = DiskIndex.decodeJournal(journal).records.filter { if case .put = $0 { true } else { false } }
        XCTAssertEqual(puts.count, 1)
    }

    func testRemoveCancelsAStagedWrite() {
        // Given a stored record and a newer version staged behind a held worker
        let store = makeStore()
        store.store(Fixtures.record(key: "a", version: 1))
        store.flush()
        store.worker.suspend()
        store.store(Fixtures.record(key: "a", version: 2))
        store.store(Fixtures.record(key: "b"))
        // When both are removed before the worker runs
        store.removeRecord(forKey: "a")
        store.removeRecord(forKey: "b")
        XCTAssertNil(store.record(forKey: "a"))
        store.worker.resume()
        store.flush()
        // Then neither comes back, now or after a restart
        XCTAssertNil(store.record(forKey: "a"))
        XCTAssertNil(store.record(forKey: "b"))
        XCTAssertEqual(entryFiles(in: cacheDirectory()), [])
        let reopened = makeStore()
        reopened.flush()
        XCTAssertNil(reopened.record(forKey: "a"))
        XCTAssertEqual(reopened.statistics.entryCount, 0)
    }

    func testRemoveAllCancelsStagedWritesButKeepsLaterStores() {
        let store = makeStore()
        for index in 0..<5 { store.store(Fixtures.record(key: "k\(index)")) }
        store.flush()
        store.worker.suspend()
        store.store(Fixtures.record(key: "k0", version: 1))
        // When everything is removed, then one key stored again, before the worker runs
        store.removeAll()
        store.store(Fixtures.record(key: "k0", version: 2))
        store.worker.resume()
        store.flush()
        // Then only the store made after removeAll remains
        XCTAssertEqual(store.record(forKey: "k0"), Fixtures.record(key: "k0", version: 2))
        for index in 1..<5 { XCTAssertNil(store.record(forKey: "k\(index)")) }
        XCTAssertEqual(entryFiles(in: cacheDirectory()), [StableHash.hexDigest128("k0")])
        assertDirectoryMatchesStatistics(store)
        let reopened = makeStore()
        XCTAssertEqual(reopened.record(forKey: "k0"), Fixtures.record(key: "k0", version: 2))
        XCTAssertEqual(reopened.statistics.entryCount, 1)
    }

    // MARK: - Capacity and LRU

    func testFilesNeverExceedTheCapacityOnceWritesSettle() {
        // Given a 64 KB cache
        let store = makeStore(capacity: 64 * 1024)
        // When hundreds of records of assorted sizes are stored, read and removed
        for step in 0..<400 {
            let key = "k\(Int.random(in: 0..<120))"
            switch step % 10 {
            case 0: store.removeRecord(forKey: key)
            case 1, 2: _ = store.record(forKey: key)
            default: store.store(Fixtures.record(key: key, version: step, bodySize: Int.random(in: 0..<9000)))
            }
            if step % 25 == 0 {
                store.flush()
                // Then, each time writes settle, the real files fit and the statistics agree
                assertDirectoryMatchesStatistics(store)
            }
        }
        store.flush()
        assertDirectoryMatchesStatistics(store)
        XCTAssertGreaterThan(store.statistics.entryCount, 3)
        // And a reopened store agrees with the files too
        let reopened = makeStore(capacity: 64 * 1024)
        reopened.flush()
        assertDirectoryMatchesStatistics(reopened)
        XCTAssertEqual(reopened.statistics.entryCount, store.statistics.entryCount)
    }

    func testEvictsTheLeastRecentlyReadEntry() {
        // Given room for three records
        let size = fileSize(of: Fixtures.record(key: "a", bodySize: 4000))
        let store = makeStore(capacity: size * 3 + 1500, fraction: 1)
        for key in ["a", "b", "c"] { store.store(Fixtures.record(key: key, bodySize: 4000)) }
        store.flush()
        XCTAssertEqual(store.statistics.entryCount, 3)
        // When "a" is read, then "d" stored
        XCTAssertNotNil(store.record(forKey: "a"))
        store.store(Fixtures.record(key: "d", bodySize: 4000))
        store.flush()
        // Then "b", the least recently used, was evicted
        XCTAssertNil(store.record(forKey: "b"))
        for key in ["a", "c", "d"] { XCTAssertNotNil(store.record(forKey: key), key) }
        assertDirectoryMatchesStatistics(store)
    }

    func testAccessOrderSurvivesARestart() {
        let size = fileSize(of: Fixtures.record(key: "a", bodySize: 4000))
        do {
            let store = makeStore(capacity: size * 3 + 1500, fraction: 1)
            for key in ["a", "b", "c"] { store.store(Fixtures.record(key: key, bodySize: 4000)) }
            store.flush()
            _ = store.record(forKey: "a")
            _ = store.record(forKey: "b")
            store.flush()  // journals the access times
        }
        // When the cache reopens and a fourth record arrives
        let reopened = makeStore(capacity: size * 3 + 1500, fraction: 1)
        reopened.store(Fixtures.record(key: "d", bodySize: 4000))
        reopened.flush()
        // Then "c" (read least recently before the restart) is the one evicted
        XCTAssertNil(reopened.record(forKey: "c"))
        for key in ["a", "b", "d"] { XCTAssertNotNil(reopened.record(forKey: key), key) }
    }

    func testHitsDoNotWriteToDiskUntilBatched() throws {
        let store = makeStore()
        for index in 0..<20 { store.store(Fixtures.record(key: "k\(index)")) }
        store.flush()
        let journalPath = cacheDirectory().appendingPathComponent("journal").path
        let before = try FileIO.status(journalPath).size
        // When every entry is read fifty times
        for _ in 0..<50 {
            for index in 0..<20 { XCTAssertNotNil(store.record(forKey: "k\(index)")) }
        }
        // Then nothing was written yet
        XCTAssertEqual(try FileIO.status(journalPath).size, before)
        // And the flush writes one access time per entry, in one append
        store.flush()
        let touchSize = DiskIndex.JournalRecord.touch(EntryDigest(high: 0, low: 0), Date()).encodedSize
        XCTAssertEqual(try FileIO.status(journalPath).size, before + 20 * touchSize)
    }

    func testRecordAboveTheEntryFractionIsNotStored() {
        // Given a 100 KB cache holding a small record under a key
        let store = makeStore(capacity: 100_000)
        store.store(Fixtures.record(key: "big", bodySize: 1000))
        store.flush()
        // When a 30 KB record (over a quarter) is stored under the same key
        store.store(Fixtures.record(key: "big", version: 1, bodySize: 30_000))
        store.flush()
        // Then it is not stored and the old record is gone too
        XCTAssertNil(store.record(forKey: "big"))
        XCTAssertEqual(entryFiles(in: cacheDirectory()), [])
        // And a record of 20 KB fits
        store.store(Fixtures.record(key: "fits", bodySize: 20_000))
        store.flush()
        XCTAssertNotNil(store.record(forKey: "fits"))
    }

    func testShrinkingTheCapacityEvicts() {
        let store = makeStore(capacity: 1_000_000)
        for index in 0..<20 { store.store(Fixtures.record(key: "k\(index)", bodySize: 5000)) }
        store.flush()
        // When the capacity drops to about four records
        let size = fileSize(of: Fixtures.record(key: "k0", bodySize: 5000))
        store.capacity = size * 4 + 2000
        store.flush()
        // Then the files fit and the newest records remain
        assertDirectoryMatchesStatistics(store)
        XCTAssertLessThanOrEqual(store.statistics.entryCount, 4)
        XCTAssertNotNil(store.record(forKey: "k19"))
        XCTAssertNil(store.record(forKey: "k0"))
        // And zero empties the directory
        store.capacity = 0
        store.flush()
        XCTAssertEqual(sizeOfFiles(in: cacheDirectory()), 0)
        XCTAssertEqual(store.statistics.byteCount, 0)
    }

    func testJournalIsCompactedIntoTheSnapshot() throws {
        // Given a small compaction threshold
        let store = makeStore(compaction: 4096)
        for index in 0..<500 { store.store(Fixtures.record(key: "k\(index % 50)", version: index, bodySize: 10)) }
        store.flush()
        // Then the journal stayed small and the snapshot holds the entries
        let journal = try FileIO.status(cacheDirectory().appendingPathComponent("journal").path).size
        XCTAssertLessThan(journal, 4096 + 60)
        let reopened = makeStore()
        XCTAssertEqual(reopened.statistics.entryCount, 50)
        XCTAssertEqual(reopened.record(forKey: "k7"), Fixtures.record(key: "k7", version: 457, bodySize: 10))
    }

    func testRemoveRecordsStoredSince() {
        let base = Date(timeIntervalSinceReferenceDate: 600_000_000)
        let store = makeStore()
        for minute in 0..<6 {
            store.store(Fixtures.record(key: "k\(minute)", responseDate: base.addingTimeInterval(Double(minute) * 60)))
        }
        store.flush()
        store.worker.suspend()
        store.store(Fixtures.record(key: "staged", responseDate: base.addingTimeInterval(1000)))
        // When records stored from minute 3 on are removed (one of them still staged)
        store.removeRecords(storedSince: base.addingTimeInterval(180))
        store.worker.resume()
        store.flush()
        // Then only minutes 0-2 remain, also after a restart
        for minute in 0..<3 { XCTAssertNotNil(store.record(forKey: "k\(minute)")) }
        for minute in 3..<6 { XCTAssertNil(store.record(forKey: "k\(minute)")) }
        XCTAssertNil(store.record(forKey: "staged"))
        XCTAssertEqual(entryFiles(in: cacheDirectory()).count, 3)
        let reopened = makeStore()
        XCTAssertEqual(reopened.statistics.entryCount, 3)
    }

    func testSynchronousWritesOptionWorks() {
        let store = track(DiskStore(configuration: .init(directory: cacheDirectory(), synchronizesWrites: true, now: clock.closure)))
        store.store(Fixtures.richRecord())
        store.flush()
        XCTAssertEqual(makeStore().record(forKey: Fixtures.richRecord().key), Fixtures.richRecord())
    }

    // MARK: - Damaged files

    func testCorruptEntryFilesAreMissesAndAreRemoved() throws {
        let record = Fixtures.record(key: "victim", bodySize: 2000)
        let valid = EntryCodec.encode(record)
        var flipped = [UInt8](valid)
        flipped[valid.count / 2] ^= 0x04
        var otherVersion = [UInt8](valid)
        otherVersion[4] = 9
        let corruptions: [(String, Data)] = [
            ("truncated", valid.prefix(valid.count - 100)),
            ("torn header", valid.prefix(20)),
            ("empty", Data()),
            ("bit flip", Data(flipped)),
            ("garbage", Data((0..<3000).map { _ in UInt8.random(in: 0...255) })),
            ("other version", Data(otherVersion)),
            ("another key's entry", EntryCodec.encode(Fixtures.record(key: "intruder"))),
        ]
        let store = makeStore()
        for (index, (name, bytes)) in corruptions.enumerated() {
            // Given a stored record whose file is then damaged
            store.store(record)
            store.flush()
            try bytes.write(to: URL(fileURLWithPath: entryPath("victim")))
            // When it is read
            let found = store.record(forKey: "victim")
            store.flush()
            // Then it is a miss, the file is gone, and the damage is counted and reported
            XCTAssertNil(found, name)
            XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath("victim")), name)
            XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, index + 1, name)
            XCTAssertEqual(store.diagnostics.lastError?.code, .corruptEntry, name)
            XCTAssertEqual(store.statistics.entryCount, 0, name)
            assertDirectoryMatchesStatistics(store)
        }
        // And the store still works
        store.store(record)
        store.flush()
        XCTAssertEqual(store.record(forKey: "victim"), record)
    }

    func testVanishedFileIsAMissAndLeavesTheIndex() throws {
        let store = makeStore()
        store.store(Fixtures.record(key: "gone"))
        store.store(Fixtures.record(key: "kept"))
        store.flush()
        // When another process deletes the file
        try FileManager.default.removeItem(atPath: entryPath("gone"))
        // Then the read is a miss and the index forgets it
        XCTAssertNil(store.record(forKey: "gone"))
        store.flush()
        XCTAssertEqual(store.statistics.entryCount, 1)
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 0)
        assertDirectoryMatchesStatistics(store)
        XCTAssertEqual(makeStore().statistics.entryCount, 1)
    }

    func testCorruptOrMissingIndexIsRebuiltFromTheFiles() throws {
        // Given a cache of 20 records
        let records = (0..<20).map { Fixtures.record(key: "k\($0)", bodySize: $0 * 100) }
        do {
            let store = makeStore()
            records.forEach(store.store)
            store.flush()
        }
        let indexURL = cacheDirectory().appendingPathComponent("index")
        for damage in ["garbage", "missing", "truncated"] {
            switch damage {
            case "garbage": try Data((0..<500).map { _ in UInt8.random(in: 0...255) }).write(to: indexURL)
            case "missing": try FileManager.default.removeItem(at: indexURL)
            default: try Data(try Data(contentsOf: indexURL).prefix(100)).write(to: indexURL)
            }
            // When the cache opens
            let store = makeStore()
            // Then it reports a rebuild, and once the worker is done every record is back
            store.waitUntilOpen()
            guard case .rebuilt = store.diagnostics.indexOrigin else {
                XCTFail("\(damage): expected a rebuild, got \(store.diagnostics.indexOrigin)")
                continue
            }
            store.flush()
            XCTAssertEqual(store.statistics.entryCount, 20, damage)
            for record in records { XCTAssertEqual(store.record(forKey: record.key), record, damage) }
            assertDirectoryMatchesStatistics(store)
            // And the rebuilt index was saved, so the next open loads it
            let next = makeStore()
            next.waitUntilOpen()
            XCTAssertEqual(next.diagnostics.indexOrigin, .loaded, damage)
        }
    }

    func testRemovalsMadeBeforeTheIndexIsRebuiltStick() throws {
        try assertRemovalsBeforeOpeningStick(damagingTheIndex: true)
    }

    /// The index loads on the worker, not in `init`: a store opened with its worker held already
    /// answers lookups (from the files) and takes removals, which the loaded index respects.
    func testRemovalsMadeBeforeTheIndexIsLoadedStick() throws {
        try assertRemovalsBeforeOpeningStick(damagingTheIndex: false)
    }

    private func assertRemovalsBeforeOpeningStick(damagingTheIndex: Bool) throws {
        // Given a cache of six records, whose index snapshot is damaged (so opening rebuilds it
        // from the files) or intact (so opening loads it)
        let base = Date(timeIntervalSinceReferenceDate: 600_000_000)
        let records = (0..<6).map { Fixtures.record(key: "k\($0)", responseDate: base.addingTimeInterval(Double($0) * 60)) }
        do {
            let store = makeStore()
            records.forEach(store.store)
            store.flush()
        }
        if damagingTheIndex {
            try Data(repeating: 0, count: 64).write(to: cacheDirectory().appendingPathComponent("index"))
        }
        // When it opens with its worker held, and before the index is in one record is removed
        // and those from minute 4 on too
        let gate = DispatchQueue(label: "gate")
        gate.suspend()
        let store = track(DiskStore(configuration: .init(directory: cacheDirectory(), now: clock.closure), workerTarget: gate))
        XCTAssertEqual(store.diagnostics.indexOrigin, .opening)
        store.removeRecord(forKey: "k1")
        store.removeRecords(storedSince: base.addingTimeInterval(240))
        // Then lookups made meanwhile (which read files directly) already miss them
        XCTAssertNil(store.record(forKey: "k1"))
        XCTAssertNil(store.record(forKey: "k5"))
        XCTAssertEqual(store.record(forKey: "k0"), records[0])
        gate.resume()
        store.flush()
        // And the opened index does not bring them back, now or after a restart
        if damagingTheIndex {
            guard case .rebuilt = store.diagnostics.indexOrigin else { return XCTFail("\(store.diagnostics.indexOrigin)") }
        } else {
            XCTAssertEqual(store.diagnostics.indexOrigin, .loaded)
        }
        let expected: Set = ["k0", "k2", "k3"]
        for record in records {
            XCTAssertEqual(store.record(forKey: record.key) != nil, expected.contains(record.key), record.key)
        }
        XCTAssertEqual(store.statistics.entryCount, 3)
        XCTAssertEqual(entryFiles(in: cacheDirectory()).count, 3)
        let reopened = makeStore()
        reopened.flush()
        XCTAssertEqual(reopened.statistics.entryCount, 3)
        assertDirectoryMatchesStatistics(reopened)
    }

    /// A corrupt entry file found before the index is in (lookups then read files directly) is
    /// counted once and never read again: a second read of the same key (the store reads what is
    /// stored before storing the fresh answer) used to count it again, and the loaded index
    /// listed it until the discard ran (seen once in 20–30 runs of `DiskFaultTests`).
    func testACorruptFileFoundBeforeTheIndexIsInIsCountedOnce() throws {
        // Given a cache of two records, one of whose files is then truncated
        do {
            let store = makeStore()
            store.store(Fixtures.record(key: "damaged"))
            store.store(Fixtures.record(key: "intact"))
            store.flush()
        }
        let damaged = URL(fileURLWithPath: entryPath("damaged"))
        let bytes = try Data(contentsOf: damaged)
        try bytes.prefix(bytes.count / 2).write(to: damaged)
        // When it opens with its worker held, and the damaged key is read twice before the index is in
        let gate = DispatchQueue(label: "gate")
        gate.suspend()
        let store = track(DiskStore(configuration: .init(directory: cacheDirectory(), now: clock.closure), workerTarget: gate))
        XCTAssertNil(store.record(forKey: "damaged"))
        XCTAssertNil(store.record(forKey: "damaged", countingLookup: false))
        // Then it was counted once
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 1)
        // And once the index is in, it neither lists nor reads the file again: it is gone
        gate.resume()
        store.flush()
        XCTAssertNil(store.record(forKey: "damaged"))
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 1)
        XCTAssertEqual(store.statistics.entryCount, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: damaged.path))
        XCTAssertEqual(store.record(forKey: "intact"), Fixtures.record(key: "intact"))
    }

    /// A cache holding "known" (in the index) and "orphan" (a file the index never heard of, as
    /// after a crash between rename and journal append), reopened with its worker suspended on
    /// `gate` so the test acts before the opening reconcile; the test resumes `gate`.
    private func reopenWithOrphan(workerHeldBy gate: DispatchQueue) throws -> DiskStore {
        do {
            let store = makeStore()
            store.store(Fixtures.record(key: "known"))
            store.flush()
        }
        try EntryCodec.encode(Fixtures.record(key: "orphan")).write(to: URL(fileURLWithPath: entryPath("orphan")))
        gate.suspend()
        return track(DiskStore(configuration: .init(directory: cacheDirectory(), now: clock.closure), workerTarget: gate))
    }

    func testRemoveAllBeforeTheOpeningReconcileRemovesOrphansToo() throws {
        // Given a cache with an orphan file (written just before a crash), reopened
        let gate = DispatchQueue(label: "gate")
        let store = try reopenWithOrphan(workerHeldBy: gate)
        // When everything is removed before the reconcile runs, and one record stored again
        store.removeAll()
        store.removeRecord(forKey: "orphan")
        store.store(Fixtures.record(key: "new"))
        gate.resume()
        store.flush()
        // Then neither old record comes back, and the new one stays
        XCTAssertNil(store.record(forKey: "known"))
        XCTAssertNil(store.record(forKey: "orphan"))
        XCTAssertNotNil(store.record(forKey: "new"))
        XCTAssertEqual(entryFiles(in: cacheDirectory()), [StableHash.hexDigest128("new")])
    }

    func testRemovingAnOrphanBeforeTheReconcileDeletesIt() throws {
        let gate = DispatchQueue(label: "gate")
        let store = try reopenWithOrphan(workerHeldBy: gate)
        store.removeRecord(forKey: "orphan")
        gate.resume()
        store.flush()
        XCTAssertNil(store.record(forKey: "orphan"))
        XCTAssertNotNil(store.record(forKey: "known"))
        XCTAssertEqual(entryFiles(in: cacheDirectory()), [StableHash.hexDigest128("known")])
    }

    func testOrphanFilesAreAdoptedOrDeleted() throws {
        // Given a cache, plus files the index does not know: a valid entry (a crash between its
        // rename and the journal append), a garbage file with an entry name, an abandoned
        // temporary file, a foreign file, and a live temporary file
        do {
            let store = makeStore()
            store.store(Fixtures.record(key: "known"))
            store.flush()
        }
        let entries = cacheDirectory().appendingPathComponent("entries")
        let orphan = Fixtures.record(key: "orphan", bodySize: 700)
        try EntryCodec.encode(orphan).write(to: URL(fileURLWithPath: entryPath("orphan")))
        try Data(repeating: 7, count: 900).write(to: URL(fileURLWithPath: entryPath("garbage")))
        try Data(repeating: 1, count: 100).write(to: entries.appendingPathComponent(".tmp-0-dead"))
        try Data(repeating: 1, count: 100).write(to: cacheDirectory().appendingPathComponent(".tmp-0-index"))
        try Data("notes".utf8).write(to: entries.appendingPathComponent("notes.txt"))
        let live = entries.appendingPathComponent(".tmp-\(getpid())-live")
        try Data(repeating: 1, count: 10).write(to: live)
        // When the cache opens and reconciles
        let store = makeStore()
        store.flush()
        // Then the valid orphan is adopted, the rest are deleted, the live temp file is left alone
        XCTAssertEqual(store.record(forKey: "orphan"), orphan)
        XCTAssertNotNil(store.record(forKey: "known"))
        XCTAssertEqual(store.statistics.entryCount, 2)
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 1)
        let remaining = Set(entryFiles(in: cacheDirectory()))
        XCTAssertEqual(remaining, [StableHash.hexDigest128("known"), StableHash.hexDigest128("orphan"), live.lastPathComponent])
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheDirectory().appendingPathComponent(".tmp-0-index").path))
        try FileManager.default.removeItem(at: live)
        assertDirectoryMatchesStatistics(store)
    }

    func testOrphansCannotHoldTheDirectoryOverCapacity() throws {
        // Given a small cache and many orphan entry files that together exceed it
        let capacity = 40_000
        do {
            let store = makeStore(capacity: capacity)
            store.store(Fixtures.record(key: "known", bodySize: 1000))
            store.flush()
        }
        for index in 0..<30 {
            try EntryCodec.encode(Fixtures.record(key: "orphan\(index)", bodySize: 3000))
                .write(to: URL(fileURLWithPath: entryPath("orphan\(index)")))
        }
        XCTAssertGreaterThan(sizeOfFiles(in: cacheDirectory()), capacity)
        // When the cache opens
        let store = makeStore(capacity: capacity)
        store.flush()
        // Then orphans are adopted as least recently used and evicted down to the capacity
        assertDirectoryMatchesStatistics(store)
        XCTAssertNotNil(store.record(forKey: "known"))
    }

    // MARK: - Directory and processes

    func testDirectoryDeletedWhileRunningIsRecreatedByTheNextWrite() throws {
        let store = makeStore()
        store.store(Fixtures.record(key: "before"))
        store.flush()
        // When the whole directory is deleted under the store
        try FileManager.default.removeItem(at: cacheDirectory())
        // Then reads miss, and nothing but a write recreates the directory
        XCTAssertNil(store.record(forKey: "before"))
        store.removeRecord(forKey: "other")
        store.capacity = 1_000_000
        store.flush()
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheDirectory().path))
        XCTAssertEqual(store.statistics.entryCount, 0)
        store.store(Fixtures.record(key: "after"))
        store.flush()
        XCTAssertEqual(store.record(forKey: "after"), Fixtures.record(key: "after"))
        XCTAssertEqual(store.statistics.entryCount, 1)
        XCTAssertEqual(store.diagnostics.status, .available)
        assertDirectoryMatchesStatistics(store)
        let reopened = makeStore()
        reopened.waitUntilOpen()
        XCTAssertEqual(reopened.diagnostics.indexOrigin, .loaded)
        XCTAssertEqual(reopened.record(forKey: "after"), Fixtures.record(key: "after"))
        XCTAssertNil(reopened.record(forKey: "before"))
    }

    func testTwoStoresOnOneDirectoryNeverSeeTornEntries() {
        // Given two instances (as two processes would) on one directory
        let first = makeStore()
        let second = makeStore()
        let keys = (0..<40).map { "shared\($0)" }
        // When both write the same keys concurrently, with different versions, and read them back
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            let store = worker == 0 ? first : second
            for round in 0..<5 {
                for key in keys {
                    store.store(Fixtures.record(key: key, version: worker * 100 + round, bodySize: 3000))
                }
                store.flush()
                for key in keys {
                    // Then every read is a whole record of one of the two writers, or a miss
                    if let record = store.record(forKey: key) {
                        XCTAssertTrue(Fixtures.isIntact(record, key: key), key)
                    }
                }
            }
        }
        // And a third instance sees every key whole
        let third = makeStore()
        third.flush()
        for key in keys { XCTAssertNotNil(third.record(forKey: key), key) }
        XCTAssertEqual(third.diagnostics.corruptEntriesRemoved, 0)
    }
}
