#if canImport(Darwin)
import Foundation
import XCTest
@testable import CachingProtocol

/// Foundation fact A1, on an Apple platform: `URLCache.init(memoryCapacity:diskCapacity:directory:)`
/// is a convenience initialiser of the Swift overlay, which a subclass inherits by implementing
/// `URLCache`'s designated initialisers; `CachingURLCache` does, so the same call runs its own
/// initialiser on every platform. And NSURLCache's initialisers, which the cache's call through
/// `super`, do not come back into its overrides (capacities, storage, the initialisers themselves):
/// a call back would reach a cache half made, or start it twice.
final class URLCacheInitialiserClaimTests: ScratchDirectoryTestCase {
    /// The overlay's initialiser runs the cache's own: the capacities and directory given are the
    /// cache's, and an entry stored through `URLCache`'s API is written to that directory by the
    /// cache's disk tier (a cache opened there later reads it back), not to Foundation's store.
    func testA1_theOverlaysConvenienceInitialiserRunsTheCachesOwn() throws {
        let cache = CachingURLCache(memoryCapacity: 3 << 20, diskCapacity: 17 << 20, directory: directory)
        XCTAssertEqual(cache.directory, directory)
        XCTAssertEqual(cache.memoryCapacity, 3 << 20)
        XCTAssertEqual(cache.diskCapacity, 17 << 20)

        let (request, response) = storable("https://example.com/a1", body: Data.pattern(5_000))
        cache.storeCachedResponse(response, for: request)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.disk.entryCount, 1, "in the cache's own disk tier")
        let reopened = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 17 << 20, directory: directory)
        XCTAssertEqual(reopened.cachedResponse(for: request)?.data, Data.pattern(5_000), "read back from the directory")
    }

    /// Each of the ways to make a cache on Apple — the overlay's labels, the `diskPath:`
    /// initialiser and `init()` — runs the cache's designated initialiser exactly once, and
    /// NSURLCache's initialiser, called from it, reaches none of the overrides (a capacity set
    /// back to the zero the base class is given, a store, a removal). The capacities are the
    /// ones asked for.
    func testA1_nsURLCachesInitialisersDoNotReenterTheOverrides() throws {
        let overlay = ReentryProbe(memoryCapacity: 2 << 20, diskCapacity: 9 << 20, directory: directory)
        XCTAssertEqual(overlay.calls.withLock { $0 }, ["designated init"], "overlay's initialiser")
        XCTAssertEqual(overlay.memoryCapacity, 2 << 20)
        XCTAssertEqual(overlay.diskCapacity, 9 << 20)

        let path = ReentryProbe(memoryCapacity: 1 << 20, diskCapacity: 5 << 20,
                                diskPath: directory.appendingPathComponent("by-path").path)
        XCTAssertEqual(path.calls.withLock { $0 }, ["designated init"], "diskPath: initialiser")
        XCTAssertEqual(path.directory.standardizedFileURL.path, directory.appendingPathComponent("by-path").standardizedFileURL.path)
        XCTAssertEqual(path.memoryCapacity, 1 << 20)
        XCTAssertEqual(path.diskCapacity, 5 << 20)

        // init(): the capacities of `CachingURLCache.standard`, in the default directory (which
        // this creates, as the app's first use of the standard cache would).
        let plain = ReentryProbe()
        XCTAssertEqual(plain.calls.withLock { $0 }, ["designated init"], "init()")
        XCTAssertEqual(plain.memoryCapacity, 4 << 20)
        XCTAssertEqual(plain.diskCapacity, 100 << 20)
        XCTAssertEqual(plain.directory, CachingURLCache.defaultDirectory)
    }
}

/// A cache that records every override NSURLCache could call while it is being made, and each
/// run of its designated initialiser (recorded once `super.init` returned: a second entry means
/// the base class started the cache again).
private final class ReentryProbe: CachingURLCache, @unchecked Sendable {
    // @unchecked: as its superclass's; its one stored property is a `Locked`.
    let calls = Locked<[String]>([])

    override init(__memoryCapacity memoryCapacity: Int, diskCapacity: Int, directoryURL: URL?) {
        super.init(__memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directoryURL: directoryURL)
        calls.withLock { $0.append("designated init") }
    }

    override var memoryCapacity: Int {
        get { super.memoryCapacity }
        set {
            calls.withLock { $0.append("memoryCapacity = \(newValue)") }
            super.memoryCapacity = newValue
        }
    }

    override var diskCapacity: Int {
        get { super.diskCapacity }
        set {
            calls.withLock { $0.append("diskCapacity = \(newValue)") }
            super.diskCapacity = newValue
        }
    }

    override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) {
        calls.withLock { $0.append("storeCachedResponse") }
        super.storeCachedResponse(cachedResponse, for: request)
    }

    override func removeAllCachedResponses() {
        calls.withLock { $0.append("removeAllCachedResponses") }
        super.removeAllCachedResponses()
    }

    override func removeCachedResponse(for request: URLRequest) {
        calls.withLock { $0.append("removeCachedResponse") }
        super.removeCachedResponse(for: request)
    }

    override func removeCachedResponses(since date: Date) {
        calls.withLock { $0.append("removeCachedResponses(since:)") }
        super.removeCachedResponses(since: date)
    }
}
#endif
