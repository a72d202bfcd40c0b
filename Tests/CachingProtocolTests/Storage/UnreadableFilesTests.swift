import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Permission errors injected at the disk tier's file-I/O seam (`FileReader`), switched on and
/// off by a test: what Data Protection answers on Apple platforms while the device is locked.
final class ReadFaults: Sendable {
    private let failing = Locked<Set<FileReader.Target>>([])
    private let code: Int32

    init(code: Int32 = EPERM) {
        self.code = code
    }

    /// From now on, reads of these kinds fail.
    func fail(_ targets: FileReader.Target...) {
        failing.withLock { $0.formUnion(targets) }
    }

    /// From now on, every read succeeds (the device was unlocked).
    func heal() {
        failing.withLock { $0.removeAll() }
    }

    var reader: FileReader {
        FileReader { [failing, code] target, _ in failing.withLock { $0.contains(target) } ? code : nil }
    }
}

/// A read that fails for permission or protection reasons is *unavailable*, never corrupt:
/// nothing is deleted or rebuilt, the lookup is a miss counted as unavailable, and the same
/// entries are served once the files can be read. Faults are injected per kind of read: entry
/// files, their headers (a directory scan), the directory listing, the index.
final class UnreadableFilesTests: TemporaryDirectoryTestCase {
    private let clock = ManualClock()

    private func makeStore(faults: ReadFaults? = nil, retryInterval: TimeInterval = 0) -> DiskStore {
        track(DiskStore(configuration: .init(
            directory: cacheDirectory(),
            accessTimeWriteDelay: 3600,
            unreadableRetryInterval: retryInterval,
            reader: faults?.reader ?? FileReader(),
            now: clock.read
        )))
    }

    /// Stores `count` records with a store that can read everything, and lets it go.
    private func fill(_ count: Int, prefix: String = "k") -> [CacheRecord] {
        let records = (0..<count).map { Fixtures.record(key: "\(prefix)\($0)", bodySize: 500) }
        let store = makeStore()
        records.forEach(store.store)
        store.flush()
        return records
    }

    private func entryPath(_ key: String) -> String {
        cacheDirectory().appendingPathComponent("entries").appendingPathComponent(StableHash.hexDigest128(key)).path
    }

    /// Every file of the cache with its bytes.
    private func contents() throws -> [String: Data] {
        var files: [String: Data] = [:]
        for path in CacheFiles.all(in: cacheDirectory()) {
            files[path] = try Data(contentsOf: URL(fileURLWithPath: path))
        }
        return files
    }

    func testUnreadableEntryFilesAreMissesThatDeleteNothingAndAreServedOnceReadable() throws {
        // Given a cache of 20 records
        let records = fill(20)
        let before = try contents()
        // When it is reopened while its entry files cannot be read, and every record looked up
        let faults = ReadFaults(code: EACCES)
        faults.fail(.entry)
        let store = makeStore(faults: faults)
        store.waitUntilOpen()
        for record in records { XCTAssertNil(store.record(forKey: record.key), record.key) }
        store.flush()
        // Then each was a miss counted as unavailable, none as corrupt, and nothing was deleted
        let diagnostics = store.diagnostics
        XCTAssertEqual(diagnostics.unavailableReads, 20)
        XCTAssertEqual(diagnostics.corruptEntriesRemoved, 0)
        XCTAssertEqual(diagnostics.lastError?.code, .fileUnreadable)
        XCTAssertEqual(diagnostics.status, .available, "reading is not writing")
        XCTAssertEqual(store.statistics.entryCount, 20, "the index still lists every entry")
        XCTAssertEqual(Set(try contents().keys), Set(before.keys))
        // And once the files can be read, the same records are served
        faults.heal()
        for record in records { XCTAssertEqual(store.record(forKey: record.key), record, record.key) }
    }

    func testAnIndexThatCannotBeReadIsNeitherRebuiltNorOverwrittenAndLoadsLater() throws {
        // Given a cache of 30 records, its index and journal as they are on disk
        let records = fill(30)
        let indexFiles = ["index", "journal"].map { cacheDirectory().appendingPathComponent($0) }
        let indexBytes = try indexFiles.map { try Data(contentsOf: $0) }
        // When it is reopened while no file can be read (only listed), as on a locked device
        let faults = ReadFaults()
        faults.fail(.index, .entry, .entryHeader)
        let store = makeStore(faults: faults)
        store.waitUntilOpen()
        // Then the index is unreadable, not rebuilt, and every lookup is a miss
        guard case .unreadable = store.diagnostics.indexOrigin else { return XCTFail("\(store.diagnostics.indexOrigin)") }
        for record in records { XCTAssertNil(store.record(forKey: record.key), record.key) }
        // And what the app does meanwhile works without touching the index files: a record
        // stored (its file is written) and one removed (its file is deleted)
        let fresh = Fixtures.record(key: "fresh", bodySize: 700)
        store.store(fresh)
        store.removeRecord(forKey: "k0")
        store.flush()
        XCTAssertEqual(try indexFiles.map { try Data(contentsOf: $0) }, indexBytes, "index and journal untouched")
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 0)
        XCTAssertGreaterThanOrEqual(store.diagnostics.unavailableReads, 31)
        XCTAssertTrue(store.containsRecord(forKey: "fresh"), "written, and listed in memory")
        XCTAssertEqual(entryFiles(in: cacheDirectory()).count, 30, "29 old entries and the fresh one")
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath("k0")))

        // When the files can be read again, the next lookup is served and has the index loaded
        faults.heal()
        XCTAssertEqual(store.record(forKey: "k1"), records[1], "read directly while the index loads")
        store.flush()
        // Then the index holds the old entries and the new one, without the removed one
        XCTAssertEqual(store.diagnostics.indexOrigin, .loaded)
        XCTAssertEqual(store.statistics.entryCount, 30)
        XCTAssertNil(store.record(forKey: "k0"))
        for record in records.dropFirst() { XCTAssertEqual(store.record(forKey: record.key), record, record.key) }
        XCTAssertEqual(store.record(forKey: "fresh"), fresh)
        // And so does the index on disk, for the next launch
        let reopened = makeStore()
        reopened.waitUntilOpen()
        XCTAssertEqual(reopened.diagnostics.indexOrigin, .loaded)
        XCTAssertEqual(reopened.statistics.entryCount, 30)
        XCTAssertNil(reopened.record(forKey: "k0"))
        XCTAssertEqual(reopened.record(forKey: "fresh"), fresh)
        XCTAssertEqual(reopened.diagnostics.entryFileReads, 1, "loaded, not rebuilt: only the lookup read a file")
    }

    func testAScanThatCannotReadUnlistedFilesKeepsThemAndAdoptsThemLater() throws {
        // Given a cache whose index lists "known", plus two entry files it does not list yet
        // (written just before the app was killed)
        _ = fill(1, prefix: "known")
        let orphan = Fixtures.record(key: "orphan", bodySize: 600)
        let removed = Fixtures.record(key: "removed", bodySize: 600)
        for record in [orphan, removed] {
            try EntryCodec.encode(record).write(to: URL(fileURLWithPath: entryPath(record.key)))
        }
        // When it is reopened while entry files cannot be read, and one of them is removed
        let faults = ReadFaults()
        faults.fail(.entry, .entryHeader)
        let store = makeStore(faults: faults)
        store.flush()
        XCTAssertNil(store.record(forKey: "orphan"))
        store.removeRecord(forKey: "removed")
        store.flush()
        // Then the unread file is neither adopted nor deleted, nor counted as corrupt
        XCTAssertTrue(FileManager.default.fileExists(atPath: entryPath("orphan")))
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 0)
        XCTAssertGreaterThanOrEqual(store.diagnostics.unavailableReads, 2)
        XCTAssertEqual(store.statistics.entryCount, 1)
        XCTAssertTrue(store.mayContainRecord(forKey: "orphan"))
        // And the removed one is gone for good
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath("removed")))
        // When the files can be read again, the orphan is served at once and then adopted
        faults.heal()
        XCTAssertEqual(store.record(forKey: "orphan"), orphan)
        store.flush()
        XCTAssertEqual(store.statistics.entryCount, 2)
        XCTAssertNil(store.record(forKey: "removed"))
        XCTAssertEqual(store.record(forKey: "known0"), Fixtures.record(key: "known0", bodySize: 500))
    }

    func testARebuildThatCannotListTheDirectoryChangesNothingAndTriesAgain() throws {
        // Given a cache of 10 records whose index is gone (so opening rebuilds it from the files)
        let records = fill(10)
        for name in ["index", "journal"] {
            try FileManager.default.removeItem(at: cacheDirectory().appendingPathComponent(name))
        }
        // When it is opened while the directory cannot be listed
        let faults = ReadFaults()
        faults.fail(.directory)
        let store = makeStore(faults: faults)
        store.flush()
        // Then nothing is rebuilt or deleted, and the files are still served (read directly)
        XCTAssertEqual(store.statistics.entryCount, 0)
        XCTAssertEqual(entryFiles(in: cacheDirectory()).count, 10)
        XCTAssertGreaterThanOrEqual(store.diagnostics.unavailableReads, 1)
        XCTAssertEqual(store.diagnostics.writeFailures, 0)
        XCTAssertEqual(store.record(forKey: "k3"), records[3])
        // (that lookup had the rebuild tried again, still unlisted: let the try end first, or a
        // lookup while it runs would not ask for another)
        store.flush()
        // And once it can be listed, a lookup has the rebuild run
        faults.heal()
        XCTAssertEqual(store.record(forKey: "k4"), records[4])
        store.flush()
        XCTAssertEqual(store.statistics.entryCount, 10)
        for record in records { XCTAssertEqual(store.record(forKey: record.key), record, record.key) }
    }

    func testLookupsTryAgainAtMostOncePerInterval() throws {
        // Given a cache reopened while its index cannot be read, retrying at most once a minute
        let records = fill(3)
        let faults = ReadFaults()
        faults.fail(.index)
        let store = makeStore(faults: faults, retryInterval: 60)
        store.waitUntilOpen()
        XCTAssertNotNil(store.record(forKey: "k0"), "entry files are read directly")  // first retry, fails
        store.flush()
        // When the index becomes readable within the minute, lookups do not try again yet
        faults.heal()
        clock.advance(by: 59)
        XCTAssertNotNil(store.record(forKey: "k1"))
        store.flush()
        guard case .unreadable = store.diagnostics.indexOrigin else { return XCTFail("\(store.diagnostics.indexOrigin)") }
        // Then the first lookup after the minute does
        clock.advance(by: 1)
        XCTAssertEqual(store.record(forKey: "k2"), records[2])
        store.flush()
        XCTAssertEqual(store.diagnostics.indexOrigin, .loaded)
        XCTAssertEqual(store.statistics.entryCount, 3)
    }

    func testDamageIsStillDamage() throws {
        // A file that reads but does not decode is corrupt as before: deleted and counted
        _ = fill(2)
        try Data(repeating: 7, count: 300).write(to: URL(fileURLWithPath: entryPath("k1")))
        let store = makeStore()
        XCTAssertNil(store.record(forKey: "k1"))
        store.flush()
        XCTAssertEqual(store.diagnostics.corruptEntriesRemoved, 1)
        XCTAssertEqual(store.diagnostics.unavailableReads, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath("k1")))
    }
}
