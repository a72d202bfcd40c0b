import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Redirects stored and answered from the cache, over loopback: 301 and 308 by default, 302,
/// 303 and 307 with explicit freshness; a stored redirect reaches the app as one from the
/// origin (the task's delegate is asked, a task without one follows), and a stored chain to a
/// stored target answers with the origin gone.
final class RedirectsFromCacheTests: CachingTestCase {
    private let movedBody = Data("<a href=\"/new\">moved</a>".utf8)

    private func serveRedirect(_ path: String, _ status: Int, to location: String, headers: [HTTPField] = []) {
        origin.handle(path) { [movedBody] _ in
            OriginResponse(status: status, headers: [HTTPField("Location", location)] + headers, body: movedBody)
        }
    }

    private var originTargets: [String] { origin.requests.map { "\($0.method) \($0.target)" } }

    // MARK: The app's delegate, as without the layer

    /// The same app code — a delegate task for `/old`, twice — on a session without the layer and
    /// on one with it: the delegate is asked about the redirect both times on both, and the app
    /// gets the same answers; with the layer the second time costs the origin nothing.
    func testA301AndA308AreAnsweredFromTheCacheWithTheDelegateAskedAsWithoutTheLayer() async throws {
        for status in [301, 308] {
            serveRedirect("/old", status, to: "/new")
            origin.handle("/new") { _ in .text("new", headers: [HTTPField("Cache-Control", "max-age=600")]) }
            let pair = TransparencyPair(origin: origin)
            let (without, with) = try await pair.observe(caching: makeConfiguration()) { session, delegate in
                var results: [String] = []
                for _ in 0..<2 {
                    let response = await runDelegateTask(URLRequest(url: origin.url("/old")), in: session, delegate: delegate)
                    results.append("\(response?.statusCode ?? 0) \(response?.url?.path ?? "-")")
                }
                return results.joined(separator: ", ") + " " + String(decoding: delegate.received, as: UTF8.self)
            }
            XCTAssertEqual(without.result, "200 /new, 200 /new newnew", "\(status): \(without)")
            XCTAssertEqual(without.delegateCalls.filter { $0.hasPrefix("redirect \(status) to \(origin.url("/new"))") }.count, 2,
                           "\(status): asked both times: \(without)")
            XCTAssertEqual(with.result, without.result, "\(status)")
            XCTAssertEqual(with.delegateCalls, without.delegateCalls, "\(status): the delegate asked the same way")
            XCTAssertEqual(without.originTraffic, ["GET /old", "GET /new", "GET /old", "GET /new"], "\(status)")
            XCTAssertEqual(with.originTraffic, ["GET /old", "GET /new"], "\(status): the second time came from the cache")
            XCTAssertEqual(storedEntry("/old")?.statusCode, status, "the redirect itself is stored under its URL")
            cache.removeAllCachedResponses()
        }
    }

    func testARedirectTheDelegateRefusesStaysRefusedWhenStored() async throws {
        serveRedirect("/old", 301, to: "/new")
        origin.handle("/new") { _ in .text("new") }
        let pair = TransparencyPair(origin: origin)
        let (without, with) = try await pair.observe(delegate: { AppDelegate(followsRedirects: false) },
                                                     caching: makeConfiguration()) { session, delegate in
            var results: [String] = []
            for _ in 0..<2 {
                let response = await runDelegateTask(URLRequest(url: origin.url("/old")), in: session, delegate: delegate)
                results.append("\(response?.statusCode ?? 0) \(response?.url?.path ?? "-")")
            }
            return results.joined(separator: ", ") + " " + String(decoding: delegate.received, as: UTF8.self)
        }
        let moved = String(decoding: movedBody, as: UTF8.self)
        XCTAssertEqual(without.result, "301 /old, 301 /old \(moved)\(moved)", "\(without)")
        XCTAssertEqual(with.result, without.result, "the 301 and its body, from the cache the second time")
        XCTAssertEqual(with.delegateCalls, without.delegateCalls)
        XCTAssertEqual(with.originTraffic, ["GET /old"], "refused, and then answered from the cache")
    }

    // MARK: Tasks without a delegate

    func testATaskWithoutADelegateFollowsAStoredRedirectFromTheCache() async throws {
        serveRedirect("/latest", 301, to: "/v3/feed.json")
        origin.handle("/v3/feed.json") { _ in .text("feed v3", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (first, firstResponse) = try loadWithCompletionHandler(request("/latest"))
        XCTAssertEqual(String(decoding: first, as: UTF8.self), "feed v3")
        XCTAssertEqual(firstResponse.url?.path, "/v3/feed.json")
        XCTAssertEqual(firstResponse.value(forHTTPHeaderField: "Cache-Status"),
                       "CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=600")

        let (second, secondResponse) = try loadWithCompletionHandler(request("/latest"))
        XCTAssertEqual(second, first, "byte for byte")
        XCTAssertEqual(secondResponse.url?.path, "/v3/feed.json", "the target's URL, as when followed at the origin")
        XCTAssertEqual(secondResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit; detail=via-stored-redirect")
        XCTAssertEqual(originTargets, ["GET /latest", "GET /v3/feed.json"])
    }

    func testTemporaryRedirectsAreStoredOnlyWithExplicitFreshness() async throws {
        serveRedirect("/short", 302, to: "/target")
        serveRedirect("/fresh", 302, to: "/target", headers: [HTTPField("Cache-Control", "max-age=60")])
        serveRedirect("/expires", 307, to: "/target", headers: [HTTPField("Expires", HTTPDate.format(clock.now.addingTimeInterval(60)))])
        origin.handle("/target") { _ in .text("target", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        for path in ["/short", "/fresh", "/expires"] {
            for _ in 0..<2 { _ = try await get(path) }
        }
        XCTAssertEqual(originTargets, ["GET /short", "GET /target", "GET /short", "GET /fresh", "GET /expires"],
                       "a 302 without freshness goes to the origin each time (its target is a hit); the others are stored")
        XCTAssertNil(cache.cachedResponse(for: request("/short")), "not stored")
        XCTAssertEqual((cache.cachedResponse(for: request("/fresh"))?.response as? HTTPURLResponse)?.statusCode, 302)
        XCTAssertEqual((cache.cachedResponse(for: request("/expires"))?.response as? HTTPURLResponse)?.statusCode, 307)
    }

    func testARedirectThatSetsACookieIsNotStored() async throws {
        serveRedirect("/login", 301, to: "/home", headers: [HTTPField("Set-Cookie", "visited=1; Path=/")])
        // (public: /home is asked for with the cookie, and a credentialed answer is stored only so)
        origin.handle("/home") { _ in .text("home", headers: [HTTPField("Cache-Control", "public, max-age=600")]) }
        for _ in 0..<2 { _ = try await get("/login") }
        XCTAssertEqual(originTargets, ["GET /login", "GET /home", "GET /login"], "the cookie is set each time; /home is a hit")
        XCTAssertEqual(origin.requests(to: "/home").first?.header("Cookie"), "visited=1", "the hop's cookie went to /home")
    }

    func testARedirectLoopFailsAsWithoutTheLayer() async throws {
        serveRedirect("/loop", 301, to: "/loop")
        let observed = await withoutAndWithTheLayer { plain in
            do {
                _ = try await plain.data(from: origin.url("/loop"))
                return "answered"
            } catch {
                return "URLError \((error as? URLError)?.code.rawValue ?? 0)"
            }
        }
        XCTAssertEqual(observed.without, "URLError \(URLError.Code.httpTooManyRedirects.rawValue)")
        XCTAssertEqual(observed.with, observed.without)
        XCTAssertEqual(origin.requests.count, 1, "with the layer the loop is followed from the cache")
    }

    // MARK: Offline

    func testAStoredRedirectChainToAStoredTargetAnswersWithTheOriginGone() async throws {
        // Given /a → 301 /b → 308 /c, and /c with an ETag (fresh for the heuristic day)
        serveRedirect("/a", 301, to: "/b")
        serveRedirect("/b", 308, to: "/c")
        origin.handle("/c") { _ in .text("the article", headers: [HTTPField("ETag", "\"c1\"")]) }
        let (first, _) = try await get("/a")
        XCTAssertEqual(String(decoding: first, as: UTF8.self), "the article")
        XCTAssertEqual(originTargets, ["GET /a", "GET /b", "GET /c"])

        // When the origin is gone
        origin.stop()
        let (offline, response) = try await get("/a")
        // Then the chain answers from the cache, and Cache-Status says so
        XCTAssertEqual(offline, first, "byte for byte")
        XCTAssertEqual(response.url?.path, "/c")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit; detail=via-stored-redirect")

        // And two days later, with every step stale, each is served stale after the failed attempt
        clock.advance(by: 2 * 86_400)
        let (stale, staleResponse) = try await get("/a")
        XCTAssertEqual(stale, first)
        XCTAssertEqual(staleResponse.value(forHTTPHeaderField: "Cache-Status"),
                       "CachingProtocol; fwd=stale; ttl=-86400; detail=\"stale-if-error via-stored-redirect\"")
        let outcomes = events.suffix(3).map { "\($0.outcome)" }
        XCTAssertEqual(outcomes, ["staleAfterError", "staleAfterError", "staleAfterError"])
    }
}
