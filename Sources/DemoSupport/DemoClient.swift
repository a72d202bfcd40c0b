import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One client of the comparison: a session and what it needs torn down afterwards, and the user
/// signed in (``DemoUser/alice`` first): the app puts the user's token on each API request, and
/// the session's own cookie jar holds the user's session cookie.
///
/// The plain and URLCache clients are built from `URLSessionConfiguration.default` without the
/// protocol (the Demo never calls `register`, so nothing puts it there). The protocol clients
/// (header-only and heuristic) install a configuration of their own, with `policy`, a fresh
/// `CachingURLCache` in a fresh directory and the site's clock; several may run at once, each
/// with its own installation.
final class DemoClient: Sendable {
    let kind: ClientKind
    let session: URLSession
    private let directory: URL?
    private let cachingCache: CachingURLCache?
    /// The configuration the session caches with (its counters are this client's).
    let caching: CachingConfiguration?
    private let foundationCache: URLCache?
    private let events = Locked<[CacheEvent]>([])
    private let signedIn = Locked(DemoUser.alice)
    /// The session's cookie jar, its own: clients run side by side in one process.
    private let cookieJar: HTTPCookieStorage?
    /// Set when a session meant to bypass the protocol would have used it.
    let setupProblem: String?

    init(_ kind: ClientKind, site: DemoSite, policy: CachingPolicy) {
        self.kind = kind
        let configuration = URLSessionConfiguration.default
        configuration.timeoutIntervalForRequest = 10
        configuration.httpCookieStorage = URLSessionConfiguration.ephemeral.httpCookieStorage
        cookieJar = configuration.httpCookieStorage
        var setupProblem: String?
        switch kind {
        case .noCache:
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            directory = nil
            cachingCache = nil
            foundationCache = nil
            caching = nil
        case .urlCache:
            let directory = Self.temporaryDirectory("urlcache")
            #if canImport(FoundationNetworking)
            let cache = URLCache(memoryCapacity: 2 << 20, diskCapacity: 100 << 20, diskPath: directory.path)
            #else
            let cache = URLCache(memoryCapacity: 2 << 20, diskCapacity: 100 << 20, directory: directory)
            #endif
            configuration.urlCache = cache
            configuration.requestCachePolicy = .useProtocolCachePolicy
            self.directory = directory
            cachingCache = nil
            foundationCache = cache
            caching = nil
        case .cachingProtocolRFC9111, .cachingProtocolHead, .cachingProtocolConditionalGet:
            let directory = Self.temporaryDirectory("protocol")
            // The same capacities as the URLCache client.
            let cache = CachingURLCache(memoryCapacity: 2 << 20, diskCapacity: 100 << 20, directory: directory)
            let caching = CachingConfiguration(
                cache: cache,
                policy: policy,
                // The header-only client revalidates with conditional GETs (RFC 9111 §4.3.1), like
                // one heuristic client: those two differ by their rules alone.
                revalidation: kind == .cachingProtocolHead ? .head : .conditionalGet,
                now: site.clock.read,
                observer: { [events] event in events.withLock { $0.append(event) } })
            CachingURLProtocol.inject(into: configuration, using: caching, delegate: nil)
            self.caching = caching
            self.directory = directory
            cachingCache = cache
            foundationCache = nil
        }
        let hasProtocol = (configuration.protocolClasses ?? []).contains { $0 is CachingURLProtocol.Type }
        if hasProtocol != kind.usesProtocol {
            setupProblem = "\(kind.name): CachingURLProtocol \(hasProtocol ? "present" : "missing") in protocolClasses"
        }
        self.setupProblem = setupProblem
        session = URLSession(configuration: configuration)
        signIn(.alice, at: site.origin.baseURL)
    }

    /// The user signed in.
    var user: DemoUser { signedIn.withLock { $0 } }

    /// Signs `user` in, as an app does after a login: the last user's session cookie leaves the
    /// jar and the user's goes in, for the whole site at `origin` (`Path=/`, as sites set session
    /// cookies; corelibs' jar ignores a cookie's path anyway, Docs/foundation-facts.md, L16), and
    /// the API requests from here on carry the user's token.
    func signIn(_ user: DemoUser, at origin: URL) {
        for cookie in cookieJar?.cookies ?? [] where cookie.name == "session" {
            cookieJar?.deleteCookie(cookie)
        }
        cookieJar?.setCookie(HTTPCookie(properties: [
            .domain: origin.host ?? "127.0.0.1", .path: "/", .name: "session",
            .value: user.sessionID,
        ])!)
        signedIn.withLock { $0 = user }
    }

    var eventCount: Int { events.withLock { $0.count } }

    func events(from start: Int) -> [CacheEvent] {
        events.withLock { Array($0[min(start, $0.count)...]) }
    }

    /// Bytes the client's cache holds (after pending disk writes landed).
    var cacheBytes: Int {
        if let cachingCache {
            cachingCache.waitUntilSettled()
            return cachingCache.currentMemoryUsage + cachingCache.currentDiskUsage
        }
        if let foundationCache {
            return foundationCache.currentMemoryUsage + foundationCache.currentDiskUsage
        }
        return 0
    }

    /// Ends the session and lets pending cache writes land. The protocol stays installed:
    /// `CachingURLProtocol.unregister()` unbinds every configuration at once, so the comparison
    /// calls it when no client runs any more, then ``removeFiles()``.
    func tearDown() {
        session.finishTasksAndInvalidate()
        cachingCache?.waitUntilSettled()
    }

    /// Deletes the cache directory (after ``tearDown()`` and the protocol's unregistration).
    func removeFiles() {
        if let directory {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    private static func temporaryDirectory(_ name: String) -> URL {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("CachingProtocol-Demo-\(name)-\(UUID().uuidString)", isDirectory: true)
    }
}
