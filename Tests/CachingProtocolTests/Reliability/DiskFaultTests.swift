import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The disk will not cooperate, seen through the protocol: a full disk, a read-only directory,
/// the directory deleted while the app runs, corrupt entry files. The app always gets correct
/// answers (from memory or from the origin), nothing crashes, and `statistics` says what is
/// wrong. (DiskDegradationTests and DiskStoreTests cover the same conditions at
/// the DiskStore level.)
final class DiskFaultTests: CachingTestCase {
    private let mounts = Mounts()
    private var mountRoot: URL!
    private var harnessDirectory: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        harnessDirectory = directory
        mountRoot = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocolMounts-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        try super.tearDownWithError()   // settles the cache before its file system goes
        mounts.unmountAll()
        try? FileManager.default.removeItem(at: mountRoot)
        try? FileManager.default.removeItem(at: harnessDirectory)
    }

    /// Replaces the harness cache with one in `directory`, and the session with one using it.
    private func useCache(in directory: URL, memory: Int = 4 << 20, disk: Int = 32 << 20) {
        cache.waitUntilSettled()
        self.directory = directory
        cache = CachingURLCache(memoryCapacity: memory, diskCapacity: disk, directory: directory)
        installSession(makeConfiguration())
    }

    /// Serves `count` resources `/r<i>` of `size` bytes, fresh for ten minutes.
    private func serveResources(_ count: Int, size: Int) -> [Data] {
        (0..<count).map { index in
            let body = Data.pattern(size, seed: UInt8(index))
            origin.handle("/r\(index)") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: body) }
            return body
        }
    }

    func testFullDiskDegradesToMemoryAndIsReported() async throws {
        // Given a cache on a 64 KB file system that believes it may use 32 MB
        try mounts.tmpfs(at: mountRoot.path, options: "size=64k")
        useCache(in: mountRoot.appendingPathComponent("cache"))
        let bodies = serveResources(12, size: 8_000)
        // When more is fetched than the disk holds, and then fetched again
        for (index, body) in bodies.enumerated() {
            let (data, _) = try await get("/r\(index)")
            XCTAssertEqual(data, body, "miss \(index)")
        }
        cache.waitUntilSettled()
        for (index, body) in bodies.enumerated() {
            let (data, _) = try await get("/r\(index)")
            XCTAssertEqual(data, body, "hit \(index)")
        }
        // Then every answer was right, the second round came from memory, and the full disk is reported
        XCTAssertEqual(origin.requestCount(), bodies.count, "the second round never reached the origin")
        let statistics = cache.statistics
        XCTAssertEqual(statistics.diskProblem?.code, .diskWriteFailed)
        XCTAssertTrue(statistics.diskProblem?.detail.contains("No space left") == true, "\(String(describing: statistics.diskProblem))")
        XCTAssertGreaterThanOrEqual(statistics.diskWriteFailures, 1)
        XCTAssertLessThan(statistics.disk.entryCount, bodies.count)
        XCTAssertGreaterThan(statistics.disk.entryCount, 0)
        XCTAssertEqual(CacheFiles.entryNames(in: directory).filter { $0.hasPrefix(".tmp-") }, [], "no temporary file left")

        // And after a restart (no memory tier), every entry on disk is read whole or is a miss
        useCache(in: directory, memory: 0)
        cache.waitUntilSettled()  // the opening reconcile adopts files a failed journal append left out
        let onDisk = cache.statistics.disk.entryCount
        XCTAssertGreaterThan(onDisk, 0)
        origin.resetLog()
        for (index, body) in bodies.enumerated() {
            let (data, _) = try await get("/r\(index)")
            XCTAssertEqual(data, body, "after restart \(index)")
        }
        XCTAssertEqual(origin.requestCount(), bodies.count - onDisk, "what was on disk was served from disk")
        XCTAssertEqual(cache.statistics.corruptEntriesRemoved, 0)
    }

    func testReadOnlyCacheDirectoryDegradesToMemoryAndIsReported() async throws {
        // Given a cache whose directory is on a read-only file system
        try mounts.tmpfs(at: mountRoot.path, options: "ro,size=1m")
        useCache(in: mountRoot.appendingPathComponent("cache"))
        XCTAssertEqual(cache.statistics.diskProblem?.code, .diskUnavailable, "reported as soon as the cache opens")
        let bodies = serveResources(3, size: 5_000)
        // When resources are fetched twice
        for _ in 0..<2 {
            for (index, body) in bodies.enumerated() {
                let (data, _) = try await get("/r\(index)")
                XCTAssertEqual(data, body)
            }
        }
        cache.waitUntilSettled()
        // Then the second round came from memory, nothing is on disk, and the condition is reported
        XCTAssertEqual(origin.requestCount(), bodies.count)
        let statistics = cache.statistics
        XCTAssertEqual(statistics.diskProblem?.code, .diskUnavailable)
        XCTAssertTrue(statistics.diskProblem?.detail.contains("Read-only") == true, "\(String(describing: statistics.diskProblem))")
        XCTAssertEqual(statistics.disk.entryCount, 0)
        XCTAssertEqual(statistics.memory.entryCount, bodies.count)
    }

    func testDirectoryTurningReadOnlyWhileRunningKeepsServing() async throws {
        // Given a cache that stored one response on disk
        let cacheDirectory = mountRoot.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: mountRoot, withIntermediateDirectories: true)
        useCache(in: cacheDirectory, memory: 0)
        let bodies = serveResources(2, size: 5_000)
        _ = try await get("/r0")
        cache.waitUntilSettled()
        // When the directory becomes read-only and another response arrives
        try mounts.bindReadOnly(cacheDirectory.path)
        let (fresh, _) = try await get("/r1")
        cache.waitUntilSettled()
        // Then the app got it, the problem is reported, and the stored one is still served from disk
        XCTAssertEqual(fresh, bodies[1])
        XCTAssertEqual(cache.statistics.diskProblem?.code, .diskUnavailable)
        let (stored, response) = try await get("/r0")
        XCTAssertEqual(stored, bodies[0])
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status")?.contains("hit"), true)
        XCTAssertEqual(originMethods("/r0"), ["GET"])
        // And once it is writable again, the next write succeeds and clears the problem
        XCTAssertTrue(mounts.remountWritable(cacheDirectory.path))
        _ = try await get("/r1")
        cache.waitUntilSettled()
        XCTAssertNil(cache.statistics.diskProblem)
        XCTAssertEqual(cache.statistics.disk.entryCount, 2)
    }

    func testCacheDirectoryDeletedWhileRunningIsRecreated() async throws {
        // Given a cache with no memory tier (so every lookup reads the disk) that stored a response
        useCache(in: directory, memory: 0)
        let bodies = serveResources(1, size: 20_000)
        _ = try await get("/r0")
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, 1)
        // When the whole cache directory is deleted under it
        try FileManager.default.removeItem(at: directory)
        // Then the next request is a miss that goes to the origin and gets the right body
        let (data, _) = try await get("/r0")
        XCTAssertEqual(data, bodies[0])
        XCTAssertEqual(originMethods("/r0"), ["GET", "GET"])
        // And the write recreated the directory, owner-only, and the entry is served from disk again
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.mode(directory.path), 0o700)
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, 1)
        let (again, _) = try await get("/r0")
        XCTAssertEqual(again, bodies[0])
        XCTAssertEqual(originMethods("/r0"), ["GET", "GET"])
        XCTAssertNil(cache.statistics.diskProblem)
    }

    func testCorruptEntryFilesAreMissesThroughTheProtocol() async throws {
        // Given three stored responses whose files are then damaged: truncated, garbage, emptied
        let bodies = serveResources(3, size: 10_000)
        for index in bodies.indices { _ = try await get("/r\(index)") }
        cache.waitUntilSettled()
        let files = CacheFiles.entryNames(in: directory).map { directory.appendingPathComponent("entries/\($0)") }
        XCTAssertEqual(files.count, 3)
        let original = try Data(contentsOf: files[0])
        try original.prefix(original.count / 2).write(to: files[0])
        try Data((0..<5_000).map { _ in UInt8.random(in: 0...255) }).write(to: files[1])
        try Data().write(to: files[2])
        // When the app restarts and loads them
        useCache(in: directory)
        origin.resetLog()
        for (index, body) in bodies.enumerated() {
            let (data, _) = try await get("/r\(index)")
            XCTAssertEqual(data, body)
        }
        // Then each was a miss fetched from the origin, counted and reported, and replaced by a whole entry
        XCTAssertEqual(origin.requestCount(), 3)
        cache.waitUntilSettled()
        let statistics = cache.statistics
        XCTAssertEqual(statistics.corruptEntriesRemoved, 3)
        XCTAssertNil(statistics.diskProblem, "a corrupt file is not a disk problem")
        useCache(in: directory, memory: 0)
        origin.resetLog()
        for (index, body) in bodies.enumerated() {
            let (data, _) = try await get("/r\(index)")
            XCTAssertEqual(data, body)
        }
        XCTAssertEqual(origin.requestCount(), 0, "the replacements are whole")
    }
}
