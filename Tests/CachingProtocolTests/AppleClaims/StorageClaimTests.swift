#if canImport(Darwin)
import Darwin
import Foundation
import XCTest
@testable import CachingProtocol

/// Foundation facts A13 and A16 on an Apple platform, as far as a test can reach them: a file
/// the cache cannot read for a permission error (what Data Protection answers for a protected
/// file while the device is locked) is *unavailable* — a miss, counted, nothing deleted — and is
/// served again once readable; files get the Data Protection class asked for (on a device); and
/// `fcntl(F_FULLFSYNC)`, which the cache uses for files that must survive a power loss, is
/// accepted where the cache writes. Locking a device, and the power loss itself, are beyond a test.
final class StorageClaimTests: ScratchDirectoryTestCase {
    private func makeCache() -> CachingURLCache {
        CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
    }

    // MARK: A13

    /// Entry files the process may not read (the permission error Apple's file system gives,
    /// `EACCES`; Data Protection gives `EPERM` for a locked file, classified the same): a cache
    /// opened on the directory answers a miss, counts an unavailable read, deletes nothing; once
    /// the files are readable again, a cache opened there serves the entry byte for byte.
    func testA13_aFileThatCannotBeReadIsUnavailableNotCorrupt() throws {
        guard getuid() != 0 else { throw XCTSkip("root reads files whatever their permissions") }
        let (request, response) = storable("https://example.com/protected", body: Data.pattern(10_000))
        let writer = makeCache()
        writer.storeCachedResponse(response, for: request)
        writer.waitUntilSettled()
        let entries = CacheFiles.all(in: directory).filter { $0.contains("/entries/") }
        XCTAssertFalse(entries.isEmpty, "the entry is on disk")
        for path in entries { XCTAssertEqual(chmod(path, 0), 0) }

        let locked = makeCache()
        XCTAssertNil(locked.cachedResponse(for: request), "unreadable: a miss")
        locked.waitUntilSettled()
        XCTAssertGreaterThan(locked.statistics.unavailableDiskReads, 0, "counted as unavailable")
        XCTAssertEqual(locked.statistics.corruptEntriesRemoved, 0, "not as damage")
        XCTAssertEqual(CacheFiles.all(in: directory).filter { $0.contains("/entries/") }, entries, "nothing deleted")

        for path in entries { XCTAssertEqual(chmod(path, 0o600), 0) }
        XCTAssertEqual(makeCache().cachedResponse(for: request)?.data, Data.pattern(10_000), "served once readable")
    }

    /// On a device (Data Protection needs one: the simulator and most Macs have none), the files
    /// the cache writes carry the class `fileProtection` asks for.
    func testA13_filesGetTheProtectionClassAskedFor() throws {
        #if os(iOS) && !targetEnvironment(simulator)
        let cache = makeCache()
        let (request, response) = storable("https://example.com/classed", body: Data.pattern(1_000))
        cache.storeCachedResponse(response, for: request)
        cache.waitUntilSettled()
        for path in CacheFiles.all(in: directory) {
            let protection = try FileManager.default.attributesOfItem(atPath: path)[.protectionKey] as? FileProtectionType
            XCTAssertEqual(protection, .completeUntilFirstUserAuthentication, path)
        }
        #else
        throw XCTSkip("Data Protection classes are set and enforced on a device only")
        #endif
    }

    // MARK: A16

    /// `fcntl(F_FULLFSYNC)` succeeds on a file in the temporary and the caches directories (so
    /// the cache's `.full` durability does not fall back to plain `fsync` there), and the cache's
    /// own call with it does not fail.
    func testA16_fullFsyncIsAcceptedWhereTheCacheWrites() throws {
        let caches = try XCTUnwrap(FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first)
        for place in [FileManager.default.temporaryDirectory, caches] {
            try FileManager.default.createDirectory(at: place, withIntermediateDirectories: true)
            let path = place.appendingPathComponent("F_FULLFSYNC-\(UUID().uuidString)").path
            let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY, 0o600)
            XCTAssertGreaterThanOrEqual(descriptor, 0, "open \(path): errno \(errno)")
            guard descriptor >= 0 else { continue }
            defer {
                close(descriptor)
                unlink(path)
            }
            let bytes = Array(Data.pattern(4_096))
            XCTAssertEqual(write(descriptor, bytes, bytes.count), bytes.count)
            let result = fcntl(descriptor, F_FULLFSYNC)
            XCTAssertEqual(result, 0, "F_FULLFSYNC in \(place.path): errno \(errno)")
            XCTAssertNoThrow(try FileIO.synchronize(descriptor, path: path, .full))
        }
    }
}
#endif
