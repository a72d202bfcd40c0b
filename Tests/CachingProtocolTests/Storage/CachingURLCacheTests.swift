import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `CachingURLCache` as a plain `URLCache`, for callers that never use the protocol.
final class CachingURLCacheTests: LoaderRulesTestCase {
    private var directory: URL!

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("urlcache-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private func makeCache(memory: Int = 1 << 20, disk: Int = 8 << 20) -> CachingURLCache {
        CachingURLCache(memoryCapacity: memory, diskCapacity: disk, directory: directory)
    }

    private func cached(_ url: String, body: Data, headers: [String: String] = ["Cache-Control": "max-age=60"],
                        userInfo: [AnyHashable: Any]? = nil, policy: URLCache.StoragePolicy = .allowed) -> (URLRequest, CachedURLResponse) {
        let request = URLRequest(url: URL(string: url)!)
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!
        return (request, CachedURLResponse(response: response, data: body, userInfo: userInfo, storagePolicy: policy))
    }

    func testStoreLookUpAndRemoveThroughTheURLCacheAPI() throws {
        let cache = makeCache()
        let (request, response) = cached("https://example.com/a?x=1", body: Data.pattern(1_000), userInfo: ["note": "kept"])
        cache.storeCachedResponse(response, for: request)

        let found = try XCTUnwrap(cache.cachedResponse(for: request))
        XCTAssertEqual(found.data, Data.pattern(1_000))
        XCTAssertEqual((found.response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual((found.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Control"), "max-age=60")
        XCTAssertEqual(found.userInfo?["note"] as? String, "kept")
        XCTAssertGreaterThan(cache.currentMemoryUsage, 1_000)

        cache.removeCachedResponse(for: request)
        XCTAssertNil(cache.cachedResponse(for: request))
    }

    func testDistinctQueriesAreDistinctEntries() {
        let cache = makeCache()
        let (first, firstResponse) = cached("https://example.com/list?page=1", body: Data("one".utf8))
        let (second, secondResponse) = cached("https://example.com/list?page=2", body: Data("two".utf8))
        cache.storeCachedResponse(firstResponse, for: first)
        cache.storeCachedResponse(secondResponse, for: second)
        XCTAssertEqual(cache.cachedResponse(for: first)?.data, Data("one".utf8))
        XCTAssertEqual(cache.cachedResponse(for: second)?.data, Data("two".utf8))
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/list")!)))
    }

    func testRemoveCachedResponsesSinceADate() {
        let clock = ManualClock()
        let cache = makeCache()
        cache.use(policy: .heuristic(), clock: clock.read)
        let (old, oldResponse) = cached("https://example.com/old", body: Data("old".utf8))
        cache.storeCachedResponse(oldResponse, for: old)
        clock.advance(by: 3600)
        let cutoff = clock.now
        let (recent, recentResponse) = cached("https://example.com/recent", body: Data("recent".utf8))
        cache.storeCachedResponse(recentResponse, for: recent)

        cache.removeCachedResponses(since: cutoff)
        cache.waitUntilSettled()
        XCTAssertNotNil(cache.cachedResponse(for: old))
        XCTAssertNil(cache.cachedResponse(for: recent))
        XCTAssertNil(makeCache().cachedResponse(for: recent), "also gone from disk")
    }

    func testEntriesSurviveARestart() {
        let (request, response) = cached("https://example.com/persisted", body: Data.pattern(20_000))
        let cache = makeCache()
        cache.storeCachedResponse(response, for: request)
        cache.waitUntilSettled()
        XCTAssertEqual(makeCache().cachedResponse(for: request)?.data, Data.pattern(20_000))
    }

    func testMemoryOnlyPolicyNeverReachesDiskAndNotAllowedIsNotStored() {
        let cache = makeCache()
        let (memoryOnly, memoryResponse) = cached("https://example.com/memory", body: Data("m".utf8), policy: .allowedInMemoryOnly)
        let (refused, refusedResponse) = cached("https://example.com/refused", body: Data("r".utf8), policy: .notAllowed)
        cache.storeCachedResponse(memoryResponse, for: memoryOnly)
        cache.storeCachedResponse(refusedResponse, for: refused)
        cache.waitUntilSettled()
        XCTAssertNotNil(cache.cachedResponse(for: memoryOnly))
        XCTAssertNil(cache.cachedResponse(for: refused))
        XCTAssertNil(makeCache().cachedResponse(for: memoryOnly), "memory-only entries are not on disk")
    }

    func testCapacitiesAreHonouredAndChangeableAtRunTime() {
        let cache = makeCache(memory: 64 << 10, disk: 256 << 10)
        for index in 0..<40 {
            let (request, response) = cached("https://example.com/item\(index)", body: Data.pattern(10_000, seed: UInt8(index)))
            cache.storeCachedResponse(response, for: request)
            XCTAssertLessThanOrEqual(cache.currentMemoryUsage, cache.memoryCapacity)
        }
        cache.waitUntilSettled()
        XCTAssertLessThanOrEqual(cache.currentDiskUsage, 256 << 10)
        XCTAssertLessThanOrEqual(directorySize(), 256 << 10, "the directory's real size")

        cache.memoryCapacity = 16 << 10
        XCTAssertLessThanOrEqual(cache.currentMemoryUsage, 16 << 10, "a smaller capacity evicts at once")
        cache.diskCapacity = 64 << 10
        cache.waitUntilSettled()
        XCTAssertLessThanOrEqual(directorySize(), 64 << 10)
        let (newest, _) = cached("https://example.com/item39", body: Data())
        XCTAssertEqual(cache.cachedResponse(for: newest)?.data, Data.pattern(10_000, seed: 39), "the most recent entry survives")
    }

    func testFlushingMemoryToDiskUnderMemoryPressure() {
        let cache = makeCache()
        let (request, response) = cached("https://example.com/pressure", body: Data.pattern(5_000))
        cache.storeCachedResponse(response, for: request)
        cache.flushMemoryToDisk()
        XCTAssertEqual(cache.currentMemoryUsage, 0)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.disk.entryCount, 1)
        XCTAssertEqual(cache.cachedResponse(for: request)?.data, Data.pattern(5_000), "read back from disk")
        XCTAssertEqual(cache.statistics.disk.hits, 1)
        XCTAssertGreaterThan(cache.currentMemoryUsage, 0, "and promoted to memory again")
    }

    func testTrimmingTheDiskTierKeepsTheCapacity() {
        let cache = makeCache()
        for index in 0..<10 {
            let (request, response) = cached("https://example.com/t\(index)", body: Data.pattern(10_000))
            cache.storeCachedResponse(response, for: request)
        }
        cache.waitUntilSettled()
        cache.trimDisk(toBytes: 30_000)
        cache.waitUntilSettled()
        XCTAssertLessThanOrEqual(directorySize(), 30_000)
        XCTAssertEqual(cache.diskCapacity, 8 << 20)
    }

    func testStatisticsCountHitsAndMissesPerTier() {
        let cache = makeCache()
        let (request, response) = cached("https://example.com/s", body: Data("s".utf8))
        _ = cache.cachedResponse(for: request)
        cache.storeCachedResponse(response, for: request)
        _ = cache.cachedResponse(for: request)
        let statistics = cache.statistics
        XCTAssertEqual(statistics.memory.hits, 1)
        XCTAssertEqual(statistics.memory.misses, 1)
        XCTAssertEqual(statistics.disk.misses, 1)
        XCTAssertEqual(statistics.memory.entryCount, 1)
    }

    /// The option's plumbing (on Linux it changes nothing on disk): the default — the class Apple
    /// gives app files by default —, a change that reaches the disk tier in order with the writes,
    /// and a cache that keeps working. The Apple call itself (`FileManager`'s `.protectionKey`) is
    /// type-checked against every SDK subset; the class on a device's files: the Apple claim kit.
    func testFileProtectionDefaultsToCompleteUntilFirstUserAuthenticationAndCanBeChanged() throws {
        let cache = makeCache()
        XCTAssertEqual(cache.fileProtection, .completeUntilFirstUserAuthentication)
        XCTAssertEqual(cache.fileProtection.description, "completeUntilFirstUserAuthentication")
        let (before, beforeResponse) = cached("https://example.com/before", body: Data.pattern(3_000))
        cache.storeCachedResponse(beforeResponse, for: before)

        cache.fileProtection = .complete
        let (after, afterResponse) = cached("https://example.com/after", body: Data.pattern(4_000))
        cache.storeCachedResponse(afterResponse, for: after)
        cache.waitUntilSettled()

        XCTAssertEqual(cache.fileProtection, .complete)
        XCTAssertEqual(cache.store.fileProtection, .complete)
        #if canImport(Darwin)
        XCTAssertTrue(CachingFileProtection.isSupported)
        #else
        XCTAssertFalse(CachingFileProtection.isSupported, "Linux has no Data Protection")
        #endif
        let reopened = makeCache()
        XCTAssertEqual(reopened.cachedResponse(for: before)?.data, Data.pattern(3_000))
        XCTAssertEqual(reopened.cachedResponse(for: after)?.data, Data.pattern(4_000))
        XCTAssertEqual(reopened.fileProtection, .completeUntilFirstUserAuthentication, "a setting of the instance, not of the files")
        for name in CacheFiles.entryNames(in: directory) {
            XCTAssertEqual(CacheFiles.mode(directory.appendingPathComponent("entries/" + name).path), 0o600, name)
        }
    }

    private func directorySize() -> Int {
        CacheFiles.totalSize(in: directory)
    }

    /// Puts `response` for `request` in the memory tier alone: a record the disk tier lacks (one
    /// whose write it refused or that it evicted), which a move of memory to disk writes.
    private func putInMemoryAlone(_ response: CachedURLResponse, for request: URLRequest, in cache: CachingURLCache) {
        let key = cache.key(for: request.url!)
        let entry = CachingURLCache.entry(from: response, request: CacheRequest(request, key: key), policy: .heuristic(), now: Date())
        cache.store.memory.store(CacheRecord(key: key, variants: [entry]))
    }

    /// UIKit's memory warning, posted by name as UIKit posts it: memory is written to disk and
    /// emptied (a Linux-built stand-in for the UIKit hook, which observes the same name) — all but
    /// what the app stored for memory only, which is dropped and never reaches a file.
    func testAMemoryWarningMovesTheMemoryTierToDiskButNotWhatIsKeptInMemoryOnly() {
        let cache = makeCache()
        XCTAssertEqual(CachingURLCache.memoryWarningNotification.rawValue, "UIApplicationDidReceiveMemoryWarningNotification")
        cache.observeMemoryWarnings(true)
        let (request, response) = cached("https://example.com/warned", body: Data.pattern(2_000))
        putInMemoryAlone(response, for: request, in: cache)
        let (secretRequest, secretResponse) = cached("https://example.com/private", body: Data("memory-only-s3cr3t".utf8),
                                                     policy: .allowedInMemoryOnly)
        cache.storeCachedResponse(secretResponse, for: secretRequest)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 2)
        XCTAssertEqual(cache.statistics.disk.entryCount, 0, "in memory alone until the warning")
        XCTAssertEqual(cache.cachedResponse(for: secretRequest)?.storagePolicy, .allowedInMemoryOnly)

        NotificationCenter.default.post(name: CachingURLCache.memoryWarningNotification, object: nil)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 0)
        XCTAssertEqual(cache.statistics.disk.entryCount, 1)
        XCTAssertEqual(makeCache().cachedResponse(for: request)?.data, Data.pattern(2_000), "on disk, byte for byte")
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data("memory-only-s3cr3t".utf8)), [])
        XCTAssertNil(makeCache().cachedResponse(for: secretRequest))
    }

    /// The `CachedURLResponse`s kept for the next lookups (each with its body) are let go on a
    /// memory warning and by `flushMemoryToDisk()`.
    func testAMemoryWarningLetsGoOfTheResponsesKeptForTheURLCacheAPI() {
        let cache = makeCache()
        cache.observeMemoryWarnings(true)
        for index in 0..<3 {
            let (request, response) = cached("https://example.com/kept\(index)", body: Data.pattern(10_000))
            cache.storeCachedResponse(response, for: request)
            XCTAssertNotNil(cache.cachedResponse(for: request))
        }
        XCTAssertEqual(cache.keptResponseCount, 3)
        NotificationCenter.default.post(name: CachingURLCache.memoryWarningNotification, object: nil)
        XCTAssertEqual(cache.keptResponseCount, 0, "let go before the post returns")
        cache.waitUntilSettled()

        XCTAssertNotNil(cache.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/kept0")!)))
        XCTAssertEqual(cache.keptResponseCount, 1)
        cache.flushMemoryToDisk()
        XCTAssertEqual(cache.keptResponseCount, 0)
    }

    /// The handler returns without waiting for the disk. With the disk worker held, a warning
    /// whose move has 12 MB of records the disk tier lacks to write (beyond the disk tier's 8 MiB
    /// of staging, so the move itself must wait for the worker) is posted from another thread:
    /// the post returns while the worker is still held, and the move completes once it runs.
    /// Before, the post waited for the held worker (the expectation timed out).
    func testAMemoryWarningReturnsWithoutWaitingForTheDisk() {
        let cache = makeCache(memory: 64 << 20, disk: 256 << 20)
        cache.observeMemoryWarnings(true)
        let requests = (0..<12).map { index -> URLRequest in
            let (request, response) = cached("https://example.com/big\(index)", body: Data(repeating: UInt8(index), count: 1 << 20))
            putInMemoryAlone(response, for: request, in: cache)
            return request
        }
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 12)
        let worker = cache.store.disk.worker
        worker.suspend()
        var held = true
        defer { if held { worker.resume() } }

        let returned = expectation(description: "the memory warning's post returned")
        DispatchQueue.global().async {
            NotificationCenter.default.post(name: CachingURLCache.memoryWarningNotification, object: nil)
            returned.fulfill()
        }
        wait(for: [returned], timeout: 10)
        XCTAssertEqual(cache.statistics.memory.entryCount, 12, "the move waits for the disk worker, the post did not")

        worker.resume()
        held = false
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 0)
        XCTAssertEqual(cache.statistics.disk.entryCount, 12)
        let reopened = makeCache(memory: 64 << 20, disk: 256 << 20)
        for (index, request) in requests.enumerated() {
            XCTAssertEqual(reopened.cachedResponse(for: request)?.data, Data(repeating: UInt8(index), count: 1 << 20), "on disk")
        }
    }

    /// `diskPath: "http-cache"`, the form `Docs/migrating.md` starts from, names a directory under
    /// the user's caches directory (Apple's documentation of the initialiser, for iOS), never one
    /// under the working directory (`/` in an iOS app: nothing could be written, and the cache
    /// would be memory-only without a word). An absolute path is used as it is.
    func testARelativeDiskPathLandsUnderTheCachesDirectory() throws {
        let name = "CachingProtocolTests-relative-\(UUID().uuidString)"
        let caches = try XCTUnwrap(FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first)
        let expected = caches.appendingPathComponent(name, isDirectory: true)
        defer { try? FileManager.default.removeItem(at: expected) }
        let cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 1 << 20, diskPath: name)
        XCTAssertEqual(cache.directory.standardizedFileURL.path, expected.standardizedFileURL.path)
        let (request, response) = cached("https://example.com/relative", body: Data.pattern(3_000))
        cache.storeCachedResponse(response, for: request)
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: expected).count, 1, "the entry is on disk there")
        XCTAssertFalse(FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/" + name))

        let absolute = CachingURLCache(memoryCapacity: 0, diskCapacity: 1 << 20, diskPath: directory.path)
        XCTAssertEqual(absolute.directory.standardizedFileURL.path, directory.standardizedFileURL.path)
        XCTAssertNil(CachingURLCache.directory(forDiskPath: nil), "nil: the default directory")
    }

    /// Caches made the ordinary way answer memory warnings on Apple platforms only (UIKit's
    /// notification, which they observe there; on macOS nothing but this test posts it).
    func testCachesObserveMemoryWarningsOnlyOnApplePlatforms() {
        let cache = makeCache()
        let (request, response) = cached("https://example.com/kept", body: Data.pattern(500), policy: .allowedInMemoryOnly)
        cache.storeCachedResponse(response, for: request)
        NotificationCenter.default.post(name: CachingURLCache.memoryWarningNotification, object: nil)
        cache.waitUntilSettled()   // the move runs off the posting thread
        XCTAssertEqual(cache.statistics.memory.entryCount, CachingURLCache.observesMemoryWarnings ? 0 : 1)
        #if canImport(Darwin)
        XCTAssertTrue(CachingURLCache.observesMemoryWarnings)
        #else
        XCTAssertFalse(CachingURLCache.observesMemoryWarnings)
        #endif
    }

    /// `CachingConfiguration.forTesting()`: each a new, empty cache in a temporary directory of its
    /// own, which goes with the cache, files and all.
    func testATestingConfigurationHasADirectoryOfItsOwnThatGoesWithIt() throws {
        var configuration: CachingConfiguration? = .forTesting()
        let directory = try XCTUnwrap(configuration?.cache.directory)
        XCTAssertNotEqual(directory, CachingURLCache.defaultDirectory)
        XCTAssertTrue(directory.path.hasPrefix(FileManager.default.temporaryDirectory.path), directory.path)
        XCTAssertNotEqual(CachingConfiguration.forTesting().cache.directory, directory, "each its own")
        let (request, response) = cached("https://example.com/stubbed", body: Data("stub".utf8))
        configuration?.cache.storeCachedResponse(response, for: request)
        configuration?.cache.waitUntilSettled()
        XCTAssertEqual(configuration?.cache.statistics.disk.entryCount, 1)
        XCTAssertFalse(CacheFiles.all(in: directory).isEmpty, "written to its directory")
        configuration = nil
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path), "gone with the cache")
    }
}
