import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A `Cookie` field the app set on its request, with Apple's rules at the engine seam
/// (`addingCookies`, `perHop`; Docs/foundation-facts.md, A25): Apple's loader sends the app's
/// field instead of the jar's cookies, copies it to a redirect hop like the app's other fields,
/// and the answer is stored under the cookie the origin received. The Apple claim kit checks the
/// loader itself (`CookieClaimTests`, A25); the Linux pair is in `SessionBehaviourPairTests`.
final class AppCookieTests: EngineTestCase {
    private let url = URL(string: "https://api.example.com/feed")!

    /// A session whose jar holds `jar=1` for the API, with `additionalHeaders`.
    private func settings(additionalHeaders: [String: String] = [:], jarCookie: Bool = true) -> SessionSettings {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = additionalHeaders
        if jarCookie {
            configuration.httpCookieStorage?.setCookie(
                HTTPCookie(properties: [.domain: "api.example.com", .path: "/", .name: "jar", .value: "1", .secure: "TRUE"])!)
        }
        return SessionSettings(configuration)
    }

    private func appRequest(cookie: String?, url: URL? = nil) -> URLRequest {
        var request = URLRequest(url: url ?? self.url)
        request.setValue(cookie, forHTTPHeaderField: "Cookie")
        return request
    }

    /// The request as the layer makes it with Apple's rules, and as the store sees it.
    private func sent(_ request: URLRequest, from settings: SessionSettings) -> CacheRequest {
        let applied = settings.apply(to: request, addingCookies: true)
        return CacheRequest(applied, key: CacheKey.make(method: "GET", url: request.url!),
                            cookieIsSessions: SessionSettings.cookieIsSessions(in: applied, madeFrom: request, addingCookies: true))
    }

    func testTheAppsOwnCookieIsSentInsteadOfTheJars() {
        let session = settings()
        let cases: [(name: String, request: URLRequest, expected: String?, isSessions: Bool)] = [
            ("the app's own field", appRequest(cookie: "app=2"), "app=2", false),
            ("no field: the jar's", appRequest(cookie: nil), "jar=1", true),
        ]
        for item in cases {
            let request = sent(item.request, from: session)
            XCTAssertEqual(request.urlRequest.value(forHTTPHeaderField: "Cookie"), item.expected, item.name)
            XCTAssertEqual(request.cookieIsSessions, item.isSessions, item.name)
        }
        var unhandled = appRequest(cookie: nil)
        unhandled.httpShouldHandleCookies = false
        XCTAssertNil(session.apply(to: unhandled, addingCookies: true).value(forHTTPHeaderField: "Cookie"),
                     "a request that handles no cookies gets none")
    }

    /// A `Cookie` in the session's additional headers is not the request's own: the jar's
    /// cookies replace it when the jar has some for the URL, as couchbase-lite-ios found of
    /// Apple's loader (A25).
    func testTheJarsCookiesReplaceACookieInTheSessionsAdditionalHeaders() {
        let withJar = sent(appRequest(cookie: nil), from: settings(additionalHeaders: ["Cookie": "extra=3"]))
        XCTAssertEqual(withJar.urlRequest.value(forHTTPHeaderField: "Cookie"), "jar=1")
        XCTAssertTrue(withJar.cookieIsSessions)
        let emptyJar = sent(appRequest(cookie: nil), from: settings(additionalHeaders: ["Cookie": "extra=3"], jarCookie: false))
        XCTAssertEqual(emptyJar.urlRequest.value(forHTTPHeaderField: "Cookie"), "extra=3")
        XCTAssertTrue(emptyJar.cookieIsSessions, "the session's, not the request's")
        let own = sent(appRequest(cookie: "app=2"), from: settings(additionalHeaders: ["Cookie": "extra=3"]))
        XCTAssertEqual(own.urlRequest.value(forHTTPHeaderField: "Cookie"), "app=2", "the request's own field wins over both")
    }

    /// The answer is stored under the credential the origin received (the app's cookie), and
    /// only a request that sends the same cookie gets it.
    func testTheAnswerIsStoredUnderTheCookieTheOriginReceives() {
        let session = settings()
        let request = sent(appRequest(cookie: "app=2"), from: session)
        XCTAssertEqual(request.partition.user, CachingUserIdentity.digest(authorization: nil, cookie: "app=2"))
        let client = RecordingLoadClient()
        guard engine.startLoad(request, from: session, client: client) != nil else { return XCTFail("a miss") }
        upstream.waitForRequests(1)
        XCTAssertEqual(upstream.sent[0].header("Cookie"), "app=2", "the origin gets the app's cookie, not the jar's")
        upstream.respond(0, status: 200, headers: ["Cache-Control": "public, max-age=600"], body: Data("app's".utf8))
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(store.entry(request.key)?.partition, request.partition)

        guard case .answered = engine.lookUp(sent(appRequest(cookie: "app=2"), from: session), from: session) else {
            return XCTFail("the same cookie is a hit")
        }
        guard case .goesOn = engine.lookUp(sent(appRequest(cookie: nil), from: session), from: session) else {
            return XCTFail("the jar's cookie is another credential")
        }
    }

    /// Reported to Apple's loader, a redirect's target keeps the app's own `Cookie`, to the same
    /// origin or another (Apple copies the fields other than `Authorization`, A19), while the
    /// jar's cookie the layer added is left for the next hop to add for its own URL.
    func testARedirectReportedToApplesLoaderKeepsTheAppsOwnCookie() throws {
        let session = settings()
        let cases: [(location: String, cookie: String?, expected: String?)] = [
            ("/feed/v2", "app=2", "app=2"), ("https://cdn.example.net/feed", "app=2", "app=2"), ("/feed/v2", nil, nil),
        ]
        for (index, item) in cases.enumerated() {
            let (location, cookie, expected) = item
            let client = RecordingLoadClient(redirects: .report)
            let request = appRequest(cookie: cookie, url: URL(string: "https://api.example.com/feed/\(index)")!)
            guard engine.startLoad(sent(request, from: session), from: session, client: client) != nil else {
                return XCTFail("a miss")
            }
            upstream.waitForRequests(index + 1)
            upstream.respond(index, status: 302, headers: ["Location": location])
            wait(for: [client.answered], timeout: 10)
            guard case .redirect(_, _, let next)? = client.receivedAnswer else { return XCTFail("reported") }
            XCTAssertEqual(next.value(forHTTPHeaderField: "Cookie"), expected, "\(location), app's cookie \(cookie ?? "none")")
        }
    }

    /// A redirect the engine follows: with Apple's rules the app's own cookie goes on to the
    /// next hop and the jar's are not added; with corelibs' rules the jar's replace it
    /// (`URLSession._Configuration.configure`, Docs/foundation-facts.md, L16).
    func testAFollowedRedirectKeepsTheAppsCookieOnAppleAndTakesTheJarsOnLinux() {
        let session = settings()
        let request = sent(appRequest(cookie: "app=2"), from: session)
        let target = CachingPolicy.redirectTarget(of: request.urlRequest, status: 302, location: "/feed/v2")!
        let apple = session.followingRedirect(session.redirected(target, from: request, perHop: true), perHop: true)
        XCTAssertEqual(apple.value(forHTTPHeaderField: "Cookie"), "app=2")
        let corelibs = session.followingRedirect(session.redirected(target, from: request, perHop: false), perHop: false)
        XCTAssertEqual(corelibs.value(forHTTPHeaderField: "Cookie"), "jar=1")
    }
}
