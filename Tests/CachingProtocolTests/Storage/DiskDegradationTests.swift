import XCTest
@testable import CachingProtocol

/// The disk tier when the disk will not cooperate. Tests run as root, which ignores permission
/// bits, so an unwritable directory is made with a regular file in its place or with tmpfs
/// mounts (read-only, or 64 KB to fill up); the mount tests skip where mounting is not permitted.
final class DiskDegradationTests: TemporaryDirectoryTestCase {
    private let clock = SteppingClock()

    private func makeStore(_ directory: URL, capacity: Int = 10 * 1024 * 1024) -> DiskStore {
        track(DiskStore(configuration: .init(directory: directory, capacity: capacity, accessTimeWriteDelay: 3600, now: clock.closure)))
    }

    private func temporaryFiles(in directory: URL) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("entries").path)) ?? []
        let top = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return (entries + top).filter { $0.hasPrefix(".tmp-") }
    }

    func testDirectoryPathThatIsAFileMakesTheStoreUnavailableNotCrash() throws {
        // Given a regular file where the cache directory should be
        let path = cacheDirectory()
        try Data("not a directory".utf8).write(to: path)
        // When a store opens there and is used
        let store = makeStore(path)
        store.store(Fixtures.record(key: "a"))
        store.flush()
        // Then it answers misses, drops the write, and says why
        XCTAssertNil(store.record(forKey: "a"))
        guard case .unavailable(let error) = store.diagnostics.status else {
            return XCTFail("expected unavailable, got \(store.diagnostics.status)")
        }
        XCTAssertEqual(error.code, .diskUnavailable)
        XCTAssertEqual(store.diagnostics.indexOrigin, .unavailable)
        XCTAssertGreaterThanOrEqual(store.diagnostics.writeFailures, 1)
        XCTAssertEqual(store.statistics.entryCount, 0)
        // And the file is untouched
        XCTAssertEqual(try Data(contentsOf: path), Data("not a directory".utf8))
    }

    func testDirectoryInsideAFileIsUnavailable() throws {
        let file = cacheDirectory("plain-file")
        try Data().write(to: file)
        let store = makeStore(file.appendingPathComponent("cache"))
        store.store(Fixtures.record(key: "a"))
        store.flush()
        XCTAssertNil(store.record(forKey: "a"))
        XCTAssertNotEqual(store.diagnostics.status, .available)
    }

    func testReadOnlyFileSystemMakesTheStoreUnavailable() throws {
        // Given a read-only file system
        let mountPoint = cacheDirectory("readonly").path
        try mounts.tmpfs(at: mountPoint, options: "ro,size=1m")
        // When a cache is opened in it and written to
        let store = makeStore(URL(fileURLWithPath: mountPoint).appendingPathComponent("cache"))
        store.store(Fixtures.record(key: "a"))
        store.flush()
        // Then the store reports the condition and answers misses
        guard case .unavailable(let error) = store.diagnostics.status else {
            return XCTFail("expected unavailable, got \(store.diagnostics.status)")
        }
        XCTAssertEqual(error.code, .diskUnavailable)
        XCTAssertTrue(error.detail.contains("Read-only"), error.detail)
        XCTAssertNil(store.record(forKey: "a"))
    }

    func testDirectoryTurningReadOnlyKeepsServingWhatIsStored() throws {
        // Given a cache holding a record
        let directory = cacheDirectory()
        let store = makeStore(directory)
        let kept = Fixtures.record(key: "kept", bodySize: 2000)
        store.store(kept)
        store.flush()
        // When its directory becomes read-only (a read-only bind mount over it: the store's open
        // journal keeps the file system itself from being remounted read-only)
        try mounts.bindReadOnly(directory.path)
        store.store(Fixtures.record(key: "new"))
        store.flush()
        // Then the write is dropped and reported, and the stored record is still served
        guard case .unavailable(let error) = store.diagnostics.status else {
            return XCTFail("expected unavailable, got \(store.diagnostics.status)")
        }
        XCTAssertEqual(error.code, .diskUnavailable)
        XCTAssertTrue(error.detail.contains("Read-only"), error.detail)
        XCTAssertGreaterThanOrEqual(store.diagnostics.writeFailures, 1)
        XCTAssertNil(store.record(forKey: "new"))
        XCTAssertEqual(store.record(forKey: "kept"), kept)
        XCTAssertEqual(temporaryFiles(in: directory), [])
        // And once it is writable again, writes work again
        XCTAssertTrue(mounts.remountWritable(directory.path))
        store.store(Fixtures.record(key: "later"))
        store.flush()
        XCTAssertEqual(store.diagnostics.status, .available)
        XCTAssertNotNil(store.record(forKey: "later"))
        XCTAssertEqual(store.record(forKey: "kept"), kept)
    }

    func testFullDiskDropsWritesReportsAndKeepsServing() throws {
        // Given a 64 KB file system and a cache that believes it may use 10 MB
        let mountPoint = cacheDirectory("full").path
        try mounts.tmpfs(at: mountPoint, options: "size=64k")
        let directory = URL(fileURLWithPath: mountPoint).appendingPathComponent("cache")
        let store = makeStore(directory)
        // When more is stored than fits
        let records = (0..<12).map { Fixtures.record(key: "k\($0)", bodySize: 8000) }
        for record in records {
            store.store(record)
            store.flush()
        }
        // Then some writes failed with a reported error, no temporary file is left behind,
        // and the records that were written are served whole
        let diagnostics = store.diagnostics
        XCTAssertGreaterThanOrEqual(diagnostics.writeFailures, 1)
        guard case .unavailable(let error) = diagnostics.status else {
            return XCTFail("expected unavailable, got \(diagnostics.status)")
        }
        XCTAssertEqual(error.code, .diskWriteFailed)
        XCTAssertTrue(error.detail.contains("No space left"), error.detail)
        XCTAssertEqual(temporaryFiles(in: directory), [])
        let served = records.filter { store.record(forKey: $0.key) == $0 }
        XCTAssertGreaterThanOrEqual(served.count, 2)
        XCTAssertLessThan(served.count, records.count)
        XCTAssertEqual(store.statistics.entryCount, served.count)
        // And after room is made, writes succeed again
        served.prefix(3).forEach { store.removeRecord(forKey: $0.key) }
        store.flush()
        store.store(Fixtures.record(key: "after", bodySize: 1000))
        store.flush()
        XCTAssertNotNil(store.record(forKey: "after"))
        XCTAssertEqual(store.diagnostics.status, .available)
        // And what is on disk still opens cleanly
        let reopened = makeStore(directory)
        reopened.flush()
        XCTAssertNotNil(reopened.record(forKey: "after"))
        XCTAssertEqual(reopened.diagnostics.corruptEntriesRemoved, 0)
    }
}
