import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Redirects at the engine seam: the upstream stops at each one; the engine stores it when the
/// policy allows and goes on for each load as its app would — reported (Apple), asked (Linux,
/// a task with a delegate), or followed through the cache.
final class RedirectEngineTests: EngineTestCase {
    private let events = Locked<[CacheEvent]>([])
    private let old = URL(string: "https://example.com/old")!
    private let new = URL(string: "https://example.com/new")!

    override func configure(_ configuration: inout CachingConfiguration) {
        let events = self.events
        configuration.observer = { event in events.withLock { $0.append(event) } }
    }

    /// Starts a GET of `url` for `client`; returns it once answered (or at once, for a hit).
    @discardableResult
    private func load(_ url: URL, _ client: RecordingLoadClient, waitingFor requests: Int? = nil,
                      then respond: (() -> Void)? = nil) -> RecordingLoadClient {
        if engine.startLoad(CacheRequest(URLRequest(url: url), key: CacheKey.make(method: "GET", url: url)), from: .standard,
                            client: client) != nil {
            if let requests { upstream.waitForRequests(requests) }
            respond?()
        }
        wait(for: [client.answered], timeout: 10)
        return client
    }

    private let movedBody = Data("<a href=\"/new\">moved</a>".utf8)

    func testARedirectIsReportedWithItsBodyStoredAndReportedAgainFromTheCache() throws {
        // Given a client that reports redirects to its app (Apple)
        let first = load(old, RecordingLoadClient(redirects: .report), waitingFor: 1) { [self] in
            upstream.respond(0, status: 302, headers: ["Location": new.absoluteString, "Cache-Control": "max-age=60"], body: movedBody)
        }
        // Then the answer is the redirect, with the 3xx's body, and the 302 with freshness is stored
        XCTAssertEqual(first.summary, "redirect 302 /new")
        XCTAssertEqual(first.redirectBody, movedBody, "the 3xx's body, for a session whose delegate refuses")
        XCTAssertEqual(store.entry(CacheKey.make(method: "GET", url: old))?.statusCode, 302)
        // And the next load is reported the same redirect from the cache, without the origin
        let second = load(old, RecordingLoadClient(redirects: .report))
        XCTAssertEqual(second.summary, "redirect 302 /new")
        XCTAssertEqual(second.redirectBody, movedBody)
        XCTAssertEqual(upstream.sent.count, 1)
    }

    func testAStoredRedirectToAStoredTargetIsFollowedWithoutTheOrigin() throws {
        // Given /old answered 301 and /new answered 200, both stored
        load(old, RecordingLoadClient(), waitingFor: 1) { [self] in
            upstream.respond(0, status: 301, headers: ["Location": "/new"], body: movedBody)
            upstream.waitForRequests(2)
            XCTAssertEqual(upstream.sent[1].request.url, new, "the engine follows")
            upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=600"], body: Data("new".utf8))
        }
        // When a load follows redirects (no delegate)
        let client = load(old, RecordingLoadClient())
        // Then the target's body answers, marked as reached through a stored redirect
        XCTAssertEqual(client.summary, "200 new")
        XCTAssertEqual(client.cacheStatus, "CachingProtocol; hit; detail=via-stored-redirect")
        XCTAssertEqual(upstream.sent.count, 2, "nothing more reached the origin")
        // And each step counts as an answer from the cache: the redirect and the target
        let last = events.withLock { Array($0.suffix(2)) }
        XCTAssertEqual(last.map(\.key), [CacheKey.make(method: "GET", url: old), CacheKey.make(method: "GET", url: new)])
        XCTAssertEqual(last.map(\.outcome), [.hit, .hit])
        XCTAssertEqual(last.map(\.deliveredBytes), [0, 3])
    }

    func testTheAppIsAskedAboutAStoredRedirectAndItsAnswerIsFollowedAsGivenOrRefused() throws {
        load(old, RecordingLoadClient(), waitingFor: 1) { [self] in
            upstream.respond(0, status: 308, headers: ["Location": "/new"], body: movedBody)
            upstream.waitForRequests(2)
            upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=600"], body: Data("new".utf8))
        }
        // An app that refuses gets the stored 308 and its body
        let asked = Locked<[String]>([])
        let refusing = load(old, RecordingLoadClient(redirects: .ask { response, request, decide in
            asked.withLock { $0.append("\(response.statusCode) \(request.url?.path ?? "-")") }
            decide(nil)
        }))
        XCTAssertEqual(refusing.summary, "308 <a href=\"/new\">moved</a>")
        // An app that gives another request gets that request's answer
        let elsewhere = URL(string: "https://example.com/elsewhere")!
        let client = RecordingLoadClient(redirects: .ask { response, request, decide in
            asked.withLock { $0.append("\(response.statusCode) \(request.url?.path ?? "-")") }
            decide(URLRequest(url: elsewhere))
        })
        load(old, client, waitingFor: 3) { [self] in
            XCTAssertEqual(upstream.sent[2].request.url, elsewhere, "the request the app gave")
            upstream.respond(2, status: 200, body: Data("elsewhere".utf8))
        }
        XCTAssertEqual(client.summary, "200 elsewhere")
        XCTAssertEqual(asked.withLock { $0 }, ["308 /new", "308 /new"], "asked each time, as without the cache")
    }

    func testALoopOfStoredRedirectsFailsAfterTwentyAsFoundationDoes() throws {
        // Given /old redirects to itself, stored
        let client = load(old, RecordingLoadClient(), waitingFor: 1) { [self] in
            upstream.respond(0, status: 301, headers: ["Location": "/old", "Cache-Control": "max-age=600"])
        }
        // Then the load follows it twenty times (once from the origin, then from the cache) and
        // fails at the 21st
        XCTAssertEqual(client.summary, "error \(URLError.Code.httpTooManyRedirects.rawValue)")
        XCTAssertEqual(upstream.sent.count, 1)
        XCTAssertEqual(events.withLock { $0.map(\.outcome) }, [.fetched] + Array(repeating: .hit, count: 19) + [.failed])
    }

    func testAHeadRevalidationThatMeetsARedirectFetchesWithAGet() throws {
        // Given a stored 200 for /old, stale
        load(old, RecordingLoadClient(), waitingFor: 1) { [self] in
            upstream.respond(0, status: 200, headers: ["ETag": "\"a\"", "Cache-Control": "max-age=60"], body: Data("old".utf8))
        }
        clock.advance(by: 120)
        // When the origin now redirects it
        let client = load(old, RecordingLoadClient(), waitingFor: 2) { [self] in
            XCTAssertEqual(upstream.sent[1].request.httpMethod, "HEAD")
            upstream.respond(1, status: 301, headers: ["Location": "/new"])
            upstream.waitForRequests(3)
            XCTAssertEqual(upstream.sent[2].request.httpMethod, "GET", "a HEAD's redirect leads to a HEAD: fetched as a GET")
            XCTAssertEqual(upstream.sent[2].request.url, old)
            upstream.respond(2, status: 301, headers: ["Location": "/new"], body: movedBody)
            upstream.waitForRequests(4)
            XCTAssertEqual(upstream.sent[3].request.url, new)
            XCTAssertEqual(upstream.sent[3].request.httpMethod, "GET")
            upstream.respond(3, status: 200, body: Data("new".utf8))
        }
        // Then the app gets the target, and the 301 replaced the stored 200
        XCTAssertEqual(client.summary, "200 new")
        XCTAssertEqual(store.entry(CacheKey.make(method: "GET", url: old))?.statusCode, 301)
    }

    // MARK: Another origin (Apple's rules)

    private let api = URL(string: "https://api.example.com/files/42")!
    private let storage = URL(string: "https://storage.example.net/blob/42?signature=abc")!

    /// A session with a jar of its own holding a cookie for the API and one for the storage host.
    private func sessionWithCookies() -> SessionSettings {
        let configuration = URLSessionConfiguration.ephemeral
        let jar = configuration.httpCookieStorage!
        for (domain, value) in [("api.example.com", "api-session"), ("storage.example.net", "storage-token")] {
            jar.setCookie(HTTPCookie(properties: [.domain: domain, .path: "/", .name: "c", .value: value, .secure: "TRUE"])!)
        }
        return SessionSettings(configuration)
    }

    /// The API's request as Apple's loader hands it to the layer and the layer makes it
    /// (`SessionSettings.apply`, cookies added as Apple would add them when sending).
    private func apiRequest(from settings: SessionSettings) -> CacheRequest {
        var request = URLRequest(url: api)
        request.setValue("Bearer app-token", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let applied = settings.apply(to: request, addingCookies: true)
        XCTAssertEqual(applied.value(forHTTPHeaderField: "Cookie"), "c=api-session", "the layer added the jar's cookie")
        return CacheRequest(applied, key: CacheKey.make(method: "GET", url: api),
                            cookieIsSessions: SessionSettings.cookieIsSessions(in: applied, madeFrom: request, addingCookies: true))
    }

    private func reported(_ client: RecordingLoadClient) -> URLRequest? {
        guard case .redirect(_, _, let request)? = client.receivedAnswer else { return nil }
        return request
    }

    /// An API answers 302 to a presigned storage URL (fetched, then again from the cache). The
    /// request reported to Apple's loader — what the app's delegate sees and what the next load
    /// starts from — carries neither the API's cookie the layer added nor the app's
    /// `Authorization`, keeps the app's other fields, and its next load gets the jar's cookie for
    /// the storage host. Before, it carried both, and only a jar cookie for the storage host would
    /// have replaced the API's.
    func testACrossOriginRedirectReportedToApplesLoaderCarriesNoCookieTheLayerAddedAndNoAuthorization() throws {
        let settings = sessionWithCookies()
        for fromCache in [false, true] {
            let client = RecordingLoadClient(redirects: .report)
            engine.startLoad(apiRequest(from: settings), from: settings, client: client)
            if !fromCache {
                upstream.waitForRequests(1)
                XCTAssertEqual(upstream.sent[0].header("Authorization"), "Bearer app-token", "the API gets the app's request")
                upstream.respond(0, status: 302, headers: ["Location": storage.absoluteString, "Cache-Control": "public, max-age=60"])
            }
            wait(for: [client.answered], timeout: 10)
            let next = try XCTUnwrap(reported(client), "stored and reported again: \(fromCache)")
            XCTAssertEqual(next.url, storage)
            XCTAssertNil(next.value(forHTTPHeaderField: "Authorization"), "not for another origin")
            XCTAssertNil(next.value(forHTTPHeaderField: "Cookie"), "the API's cookie stays with the API")
            XCTAssertEqual(next.value(forHTTPHeaderField: "Accept"), "application/json")
            XCTAssertEqual(settings.apply(to: next, addingCookies: true).value(forHTTPHeaderField: "Cookie"), "c=storage-token",
                           "the next load has the jar's cookies for the storage host")
        }
        XCTAssertEqual(upstream.sent.count, 1, "the second redirect came from the cache")
    }

    /// The same origin keeps the app's `Authorization`; the layer's cookie is still the next
    /// load's to add.
    func testASameOriginRedirectReportedToApplesLoaderKeepsTheAuthorization() throws {
        let settings = sessionWithCookies()
        let client = RecordingLoadClient(redirects: .report)
        guard engine.startLoad(apiRequest(from: settings), from: settings, client: client) != nil else { return XCTFail("a miss") }
        upstream.waitForRequests(1)
        upstream.respond(0, status: 307, headers: ["Location": "/files/42/v2"])
        wait(for: [client.answered], timeout: 10)
        let next = try XCTUnwrap(reported(client))
        XCTAssertEqual(next.url?.path, "/files/42/v2")
        XCTAssertEqual(next.value(forHTTPHeaderField: "Authorization"), "Bearer app-token")
        XCTAssertNil(next.value(forHTTPHeaderField: "Cookie"))
    }

    /// A redirect the engine follows (a load nobody is asked about): with Apple's rules the
    /// next request has the jar's cookies for the target and no `Authorization` for another
    /// origin; with corelibs' rules every field is copied, as corelibs copies them (the Linux
    /// pair, `SessionBehaviourPairTests`, shows it equal to Foundation).
    func testAFollowedCrossOriginRedirectIsMadeAsThePlatformsLoaderMakesIt() {
        let settings = sessionWithCookies()
        let request = apiRequest(from: settings)
        let target = CachingPolicy.redirectTarget(of: request.urlRequest, status: 302, location: storage.absoluteString)!
        XCTAssertEqual(target.value(forHTTPHeaderField: "Authorization"), "Bearer app-token", "the policy copies every field")

        let apple = settings.followingRedirect(settings.redirected(target, from: request, perHop: true), perHop: true)
        XCTAssertNil(apple.value(forHTTPHeaderField: "Authorization"))
        XCTAssertEqual(apple.value(forHTTPHeaderField: "Cookie"), "c=storage-token")
        XCTAssertEqual(apple.value(forHTTPHeaderField: "Accept"), "application/json")

        let corelibs = settings.followingRedirect(settings.redirected(target, from: request, perHop: false), perHop: false)
        XCTAssertEqual(corelibs.value(forHTTPHeaderField: "Authorization"), "Bearer app-token")
        XCTAssertEqual(corelibs.value(forHTTPHeaderField: "Cookie"), "c=storage-token", "the jar's for the target replace it")
        XCTAssertEqual(SessionSettings.redirectsPerHop, LoaderRules.current.addsCookiesAfterProtocols, "the loader rules in force")
        #if canImport(FoundationNetworking)
        XCTAssertFalse(LoaderRules.native.addsCookiesAfterProtocols, "Linux: as corelibs")
        #else
        XCTAssertTrue(LoaderRules.native.addsCookiesAfterProtocols)
        #endif
    }

    /// Who may refuse a redirect: a delegate that implements the redirect method (on Apple; on
    /// Linux the protocol asks the task's delegate itself, so the traits say nothing).
    func testADelegateDecidesRedirectsWhenItImplementsTheRedirectMethod() {
        #if canImport(FoundationNetworking)
        XCTAssertFalse(DelegateTraits.of(RedirectDecidingDelegate()).decidesRedirects)
        #else
        XCTAssertTrue(DelegateTraits.of(RedirectDecidingDelegate()).decidesRedirects)
        XCTAssertNil(DelegateTraits.of(RedirectDecidingDelegate()).trustJudge, "it answers no challenge")
        XCTAssertFalse(DelegateTraits.of(SilentDelegate()).decidesRedirects)
        #endif
        XCTAssertNotEqual(SessionSettings(URLSessionConfiguration.default, delegate: DelegateTraits(decidesRedirects: true)), .standard,
                          "a protocol class of its own, so its loads know")
    }
}

/// A delegate that refuses every redirect.
private final class RedirectDecidingDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}

/// A delegate that decides nothing.
private final class SilentDelegate: NSObject, URLSessionDataDelegate, Sendable {}
