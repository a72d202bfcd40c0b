import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Several sessions, each with a configuration of its own, and rules per host and path: checked
/// in the origin's log, on disk and in each configuration's counters.
final class SessionsAndRulesTests: CachingTestCase {
    private var sessions: [URLSession] = []

    override func tearDownWithError() throws {
        for session in sessions { session.invalidateAndCancel() }
        try super.tearDownWithError()
    }

    /// A session whose configuration was injected with `caching`.
    private func makeSession(_ caching: CachingConfiguration) -> URLSession {
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.timeoutIntervalForRequest = 10
        CachingURLProtocol.inject(into: sessionConfiguration, using: caching, delegate: nil)
        let made = URLSession(configuration: sessionConfiguration)
        sessions.append(made)
        return made
    }

    /// A cache on a directory of its own under the test's directory.
    private func makeCache(_ name: String) -> CachingURLCache {
        CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 16 << 20, directory: directory.appendingPathComponent(name))
    }

    private func text(_ session: URLSession, _ url: URL) async throws -> (String, HTTPURLResponse) {
        let (data, response) = try await session.data(from: url)
        return (String(decoding: data, as: UTF8.self), try XCTUnwrap(response as? HTTPURLResponse))
    }

    private func entryFileCount(_ cache: CachingURLCache) -> Int {
        cache.waitUntilSettled()
        let entries = cache.directory.appendingPathComponent("entries")
        return ((try? FileManager.default.contentsOfDirectory(atPath: entries.path)) ?? []).count
    }

    /// The same origin under another host name, so host rules can tell the two apart.
    private func localhostURL(_ path: String) -> URL {
        URL(string: "http://localhost:\(origin.port)\(path)")!
    }

    // MARK: One configuration per session

    func testTwoSessionsWithTwoCachesNeverSeeEachOthersEntries() async throws {
        // Given an image session (heuristic policy) and an API session (RFC 9111), each with its
        // own cache on its own directory
        let imageEvents = Locked<[CacheEvent]>([])
        let images = CachingConfiguration(cache: makeCache("images"), policy: .heuristic(), now: clock.read,
                                          observer: { event in imageEvents.withLock { $0.append(event) } })
        let api = CachingConfiguration(cache: makeCache("api"), policy: .rfc9111, now: clock.read)
        let imageSession = makeSession(images)
        let apiSession = makeSession(api)
        origin.handle("/logo.png") { _ in
            OriginResponse(headers: [HTTPField("Content-Type", "image/png")], body: Data(repeating: 0x89, count: 3_000))
        }
        origin.handle("/data") { _ in .text("data", headers: [HTTPField("Cache-Control", "max-age=60")]) }

        // When each asks twice for an image with no caching headers, and for a response both may store
        for _ in 0..<2 {
            _ = try await imageSession.data(from: origin.url("/logo.png"))
            _ = try await apiSession.data(from: origin.url("/logo.png"))
        }
        _ = try await text(apiSession, origin.url("/data"))
        let (again, apiHit) = try await text(apiSession, origin.url("/data"))
        let (fromImages, imageMiss) = try await text(imageSession, origin.url("/data"))

        // Then the image policy kept the image (7 days) and the RFC preset did not; the API's
        // stored /data did not answer the image session
        XCTAssertEqual(origin.requests(to: "/logo.png").count, 3, "one for the image session, two for the API session")
        XCTAssertEqual(origin.requests(to: "/data").count, 2, "each session's cache fetched it once")
        XCTAssertEqual([again, fromImages], ["data", "data"])
        XCTAssertEqual(apiHit.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(imageMiss.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd=uri-miss"), true)
        // On disk: two entries in the image directory, one in the API directory
        XCTAssertEqual(entryFileCount(images.cache), 2)
        XCTAssertEqual(entryFileCount(api.cache), 1)
        // And counters and events are each configuration's own
        XCTAssertEqual([images.statistics.hits, images.statistics.fetched], [1, 2])
        XCTAssertEqual([api.statistics.hits, api.statistics.fetched], [1, 3])
        XCTAssertEqual(imageEvents.withLock { $0.count }, 3)
        XCTAssertEqual(configuration.statistics.fetched + configuration.statistics.hits, 0, "the test's own session was never used")
    }

    func testOneConfigurationInjectedTwiceIsOneCache() async throws {
        let shared = CachingConfiguration(cache: makeCache("shared"), now: clock.read)
        let first = makeSession(shared)
        let second = makeSession(shared)
        origin.handle("/common") { _ in .text("common", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        _ = try await text(first, origin.url("/common"))
        let (body, response) = try await text(second, origin.url("/common"))
        XCTAssertEqual(body, "common")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(origin.requests(to: "/common").count, 1)
        XCTAssertEqual([shared.statistics.fetched, shared.statistics.hits], [1, 1])
    }

    func testTheOfflineSwitchIsPerConfiguration() async throws {
        let offline = CachingConfiguration(cache: makeCache("offline"), now: clock.read)
        let online = CachingConfiguration(cache: makeCache("online"), now: clock.read)
        let offlineSession = makeSession(offline)
        let onlineSession = makeSession(online)
        origin.handle("/news") { _ in .text("news", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        offline.isOffline = true
        do {
            _ = try await offlineSession.data(from: origin.url("/news"))
            XCTFail("offline and nothing stored")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .resourceUnavailable)
        }
        let (news, _) = try await text(onlineSession, origin.url("/news"))
        XCTAssertEqual(news, "news")
        XCTAssertEqual(origin.requests(to: "/news").count, 1, "only the online session reached the origin")
        XCTAssertFalse(online.isOffline)
        XCTAssertFalse(CachingURLProtocol.isOffline)
    }

    /// The binding is made by `inject`: a session made from the configuration before it never
    /// sees the protocol.
    func testASessionMadeBeforeInjectDoesNotCache() async throws {
        let sessionConfiguration = URLSessionConfiguration.default
        let early = URLSession(configuration: sessionConfiguration)
        sessions.append(early)
        let caching = CachingConfiguration(cache: makeCache("late"), now: clock.read)
        CachingURLProtocol.inject(into: sessionConfiguration, using: caching)
        let late = URLSession(configuration: sessionConfiguration)
        sessions.append(late)
        origin.handle("/x") { _ in .text("x", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        for _ in 0..<2 { _ = try await text(early, origin.url("/x")) }
        for _ in 0..<2 { _ = try await text(late, origin.url("/x")) }
        XCTAssertEqual(origin.requests(to: "/x").count, 3, "two from the early session, one from the late one")
        XCTAssertEqual([caching.statistics.fetched, caching.statistics.hits], [1, 1])
    }

    /// Changing a copy makes a new configuration: its counters start at zero.
    func testAChangedCopyIsAnotherConfiguration() async throws {
        let original = CachingConfiguration(cache: makeCache("copy"), now: clock.read)
        var changed = original
        changed.revalidation = .conditionalGet
        let unchanged = original
        let session = makeSession(original)
        origin.handle("/y") { _ in .text("y", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        _ = try await text(session, origin.url("/y"))
        XCTAssertEqual(unchanged.statistics.fetched, 1, "an unchanged copy is the same installation")
        XCTAssertEqual(changed.statistics.fetched, 0)
    }

    /// `cachedThenFresh` of a configuration uses that configuration's cache and rules, not the
    /// registered one's.
    func testCachedThenFreshOfAConfigurationUsesItsOwnCacheAndRules() async throws {
        let own = CachingConfiguration(cache: makeCache("own"), now: clock.read, rules: [.bypass(pathPrefix: "/live/")])
        origin.handle("/feed") { _ in .text("feed", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        func sources(_ path: String) async throws -> [CachedThenFreshResponse.Source] {
            var seen: [CachedThenFreshResponse.Source] = []
            for try await answer in own.cachedThenFresh(for: URLRequest(url: origin.url(path))) { seen.append(answer.source) }
            return seen
        }
        let first = try await sources("/feed")
        let second = try await sources("/feed")
        XCTAssertEqual(first, [.origin])
        XCTAssertEqual(second, [.cache(isStale: false)], "stored in its own cache")
        XCTAssertNotNil(own.cache.cachedResponse(for: URLRequest(url: origin.url("/feed"))))
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: origin.url("/feed"))), "not in the registered configuration's")
        do {
            _ = try await sources("/live/score")
            XCTFail("a bypassed URL is not the cache's")
        } catch let error as CachingError {
            XCTAssertEqual(error.code, .notCacheable)
        }
    }

    // MARK: Rules

    func testEachRuleKindWithAMatchingAndANonMatchingRequestAndTheFirstMatchWins() async throws {
        // Given rules in this order: a bypassed path, a fixed lifetime for /catalog/, RFC 9111 for
        // the host 127.0.0.1 (so /catalog/ there gets the lifetime: the first match wins), and a
        // predicate on the query
        let caching = CachingConfiguration(cache: makeCache("rules"), policy: .heuristic(), now: clock.read, rules: [
            .bypass(pathPrefix: "/live/"),
            .freshFor(300, pathPrefix: "/catalog/"),
            .policy(.rfc9111, host: "127.0.0.1"),
            .bypass(where: { $0.url?.query?.contains("nocache") == true }),
        ])
        let session = makeSession(caching)
        let cacheable = [HTTPField("Cache-Control", "max-age=600")]
        let noCache = [HTTPField("Cache-Control", "no-cache"), HTTPField("ETag", "\"v1\"")]
        for path in ["/live/score", "/other", "/thing"] {
            origin.handle(path) { _ in .text(path, headers: cacheable) }
        }
        for path in ["/catalog/shoes", "/feed"] {
            origin.handle(path) { request in
                request.header("If-None-Match") == "\"v1\"" ? OriginResponse(status: 304, headers: noCache)
                                                            : .text(path, headers: noCache)
            }
        }
        origin.handle("/catalog/secret") { _ in .text("secret", headers: [HTTPField("Cache-Control", "no-store")]) }

        // bypass(pathPrefix:): matching → every request reaches the origin, untouched by the layer
        for _ in 0..<2 {
            let (_, response) = try await text(session, origin.url("/live/score"))
            XCTAssertNil(response.value(forHTTPHeaderField: "Cache-Status"), "the layer did not answer it")
        }
        XCTAssertEqual(origin.requests(to: "/live/score").count, 2)
        // … not matching (the host rule's RFC 9111 applies, and max-age=600 is fresh)
        for _ in 0..<2 { _ = try await text(session, localhostURL("/other")) }
        XCTAssertEqual(origin.requests(to: "/other").count, 1)

        // freshFor: matching → a no-cache response is fresh for 300 s, then revalidated
        _ = try await text(session, origin.url("/catalog/shoes"))
        clock.advance(by: 200)
        _ = try await text(session, origin.url("/catalog/shoes"))
        XCTAssertEqual(originMethods("/catalog/shoes"), ["GET"], "fresh for 300 s although no-cache")
        clock.advance(by: 101)
        _ = try await text(session, origin.url("/catalog/shoes"))
        XCTAssertEqual(originMethods("/catalog/shoes"), ["GET", "HEAD"], "stale after 300 s: revalidated")
        // … it never overrides no-store
        for _ in 0..<2 { _ = try await text(session, origin.url("/catalog/secret")) }
        XCTAssertEqual(origin.requests(to: "/catalog/secret").count, 2)

        // policy(host:): matching host → RFC 9111 revalidates a no-cache response at once;
        // the same path on another host follows the heuristic policy (no-cache reused for 60 s)
        _ = try await text(session, origin.url("/feed"))
        _ = try await text(session, origin.url("/feed"))
        XCTAssertEqual(originMethods("/feed"), ["GET", "HEAD"], "RFC 9111: no-cache is always revalidated")
        _ = try await text(session, localhostURL("/feed"))
        _ = try await text(session, localhostURL("/feed"))
        XCTAssertEqual(originMethods("/feed"), ["GET", "HEAD", "GET"], "heuristic on localhost: reused within 60 s")

        // bypass(where:): matching query → both reach the origin; without it → stored
        for _ in 0..<2 { _ = try await text(session, localhostURL("/thing?nocache=1")) }
        for _ in 0..<2 { _ = try await text(session, localhostURL("/thing")) }
        XCTAssertEqual(origin.requests(to: "/thing").map(\.target), ["/thing?nocache=1", "/thing?nocache=1", "/thing"])
    }

    func testHostPatternsMatchExactlyOrBySubdomain() {
        func matches(_ pattern: String, _ url: String) -> Bool {
            CachingRule.bypass(host: pattern).matches(URLRequest(url: URL(string: url)!))
        }
        XCTAssertTrue(matches("api.example.com", "https://API.example.com/x"))
        XCTAssertFalse(matches("api.example.com", "https://example.com/x"))
        XCTAssertFalse(matches("api.example.com", "https://www.api.example.com/x"))
        XCTAssertTrue(matches("*.example.com", "https://img.example.com/x"))
        XCTAssertTrue(matches("*.example.com", "https://a.b.example.com/x"))
        XCTAssertFalse(matches("*.example.com", "https://example.com/x"))
        XCTAssertFalse(matches("*.example.com", "https://badexample.com/x"))
        let both = CachingRule.bypass(pathPrefix: "/api/", host: "api.example.com")
        XCTAssertTrue(both.matches(URLRequest(url: URL(string: "https://api.example.com/api/v1")!)))
        XCTAssertFalse(both.matches(URLRequest(url: URL(string: "https://api.example.com/apis")!)))
        XCTAssertFalse(both.matches(URLRequest(url: URL(string: "https://cdn.example.com/api/v1")!)))
    }

    func testAFixedLifetimeFeedsTheSameDecisionCore() {
        var policy = CachingPolicy.heuristic()
        policy.fixedLifetime = 300
        let request = CacheRequest(URLRequest(url: URL(string: "https://a.example/x")!), key: "GET https://a.example/x")
        let now = Date(timeIntervalSinceReferenceDate: 0)
        func decision(_ headers: [String: String], status: Int = 200) -> StorageDecision {
            policy.storageDecision(for: request, status: status, headers: HTTPHeaders(headers), requestDate: now, responseDate: now)
        }
        XCTAssertEqual(decision(["Cache-Control": "max-age=5", "Age": "100"]), .store(freshnessLifetime: 300, initialAge: 0))
        XCTAssertEqual(decision(["Cache-Control": "no-cache"]), .store(freshnessLifetime: 300, initialAge: 0))
        XCTAssertEqual(decision([:]), .store(freshnessLifetime: 300, initialAge: 0))
        XCTAssertEqual(decision(["Cache-Control": "no-store"]), .doNotStore(reason: "no-store"))
        XCTAssertEqual(decision(["Vary": "*"]), .doNotStore(reason: "Vary: *"))
        XCTAssertEqual(decision([:], status: 500), .doNotStore(reason: "status 500"))
    }

    /// A bypassed request is Foundation's: its body reaches a delegate piece by piece as it
    /// arrives, as without the layer — here the pieces an origin sent before dying mid-body.
    func testABypassedBodyReachesTheAppAsItArrives() throws {
        origin.handle("/live/feed") { _ in
            OriginResponse(body: Data(repeating: 0x2A, count: 64 << 10), transfer: .chunked(chunkSize: 1_024),
                           fault: .closeAfterBodyBytes(8 << 10))
        }
        func load(layered: Bool) -> (bytes: Int, chunks: Int, failed: Bool) {
            let collector = DelegateCollector()
            let sessionConfiguration = URLSessionConfiguration.default
            if layered {
                CachingURLProtocol.inject(into: sessionConfiguration, using: CachingConfiguration(
                    cache: makeCache("bypass"), now: clock.read, rules: [.bypass(pathPrefix: "/live/")]))
            }
            let delegateSession = URLSession(configuration: sessionConfiguration, delegate: collector, delegateQueue: nil)
            defer { delegateSession.finishTasksAndInvalidate() }
            delegateSession.dataTask(with: origin.url("/live/feed")).resume()
            wait(for: [collector.done], timeout: 10)
            let (data, _, error, chunks) = collector.result
            return (data.count, chunks, error != nil)
        }
        let without = load(layered: false)
        let bypassed = load(layered: true)
        XCTAssertTrue(bypassed.failed, "the origin died mid-body")
        XCTAssertGreaterThan(bypassed.bytes, 0, "the pieces before the failure reached the app")
        XCTAssertEqual(bypassed.bytes, without.bytes)
        XCTAssertEqual(bypassed.failed, without.failed)
    }

    // MARK: Cache management

    func testPurgeByHostAndByPathPrefixAndUsagePerHost() async throws {
        let cache = makeCache("manage")
        let session = makeSession(CachingConfiguration(cache: cache, now: clock.read))
        for path in ["/img/1", "/img/2", "/api/1", "/img/3"] {
            origin.handle(path) { _ in
                OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: Data(repeating: 0x31, count: 10_000))
            }
        }
        for path in ["/img/1", "/img/2", "/api/1"] { _ = try await session.data(from: origin.url(path)) }
        _ = try await session.data(from: localhostURL("/img/3"))

        // Usage per host: entry counts, and bytes at least the bodies'
        let usage = cache.usageByHost()
        XCTAssertEqual(usage.mapValues(\.entryCount), ["127.0.0.1": 3, "localhost": 1])
        XCTAssertGreaterThan(usage["127.0.0.1"]?.totalBytes ?? 0, 30_000)
        XCTAssertEqual(entryFileCount(cache), 4)

        // purge(pathPrefix:host:) removes the matching entries from memory and disk, nothing else
        cache.purge(pathPrefix: "/img/", host: "127.0.0.1")
        XCTAssertEqual(entryFileCount(cache), 2)
        XCTAssertEqual(cache.usageByHost().mapValues(\.entryCount), ["127.0.0.1": 1, "localhost": 1])
        _ = try await session.data(from: origin.url("/img/1"))
        _ = try await session.data(from: origin.url("/api/1"))
        XCTAssertEqual(origin.requests(to: "/img/1").count, 2, "purged: fetched again")
        XCTAssertEqual(origin.requests(to: "/api/1").count, 1, "kept: a hit")

        // purge(host:) removes one host's entries
        cache.purge(host: "localhost")
        XCTAssertNil(cache.usageByHost()["localhost"])
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: localhostURL("/img/3"))))
        XCTAssertNotNil(cache.cachedResponse(for: URLRequest(url: origin.url("/api/1"))))
    }
}
