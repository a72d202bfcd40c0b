#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation fact A6 on an Apple platform: a protocol is given the request before the system
/// adds the session's cookies, so the layer adds them itself (`SessionSettings.addsSessionCookies`);
/// and the cache's upstream session, made from a copy of the app's configuration, shares the
/// app's cookie jar — which holds only if `copy()` of a configuration keeps its cookie storage,
/// the ephemeral configuration's in-memory jar included. Pairs: the same app code without and
/// with the layer.
final class CookieClaimTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        origin.handle("/login") { _ in
            .text("welcome", headers: [HTTPField("Set-Cookie", "session=abc; Path=/"), HTTPField("Cache-Control", "no-store")])
        }
        origin.handle("/profile") { request in
            .text("cookie: \(request.header("Cookie") ?? "none")", headers: [HTTPField("Cache-Control", "no-store")])
        }
    }

    private func cookie(_ name: String, _ value: String) -> HTTPCookie {
        HTTPCookie(properties: [.name: name, .value: value, .domain: "127.0.0.1", .path: "/"])!
    }

    /// A cookie in the session's jar: the request the protocols are asked about carries no
    /// `Cookie` field, and the origin still gets the cookie through the layer, as without it.
    func testA6_theProtocolIsGivenTheRequestBeforeTheSystemAddsCookies() async throws {
        var answers: [String] = []
        for withLayer in [false, true] {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpCookieStorage?.setCookie(cookie("claim", "1"))
            if withLayer {
                CachingURLProtocol.inject(into: configuration, using: makeConfiguration())
                RequestWatcher.reset()
                // Asked first, takes nothing: it sees what the layer is given next.
                configuration.protocolClasses = [RequestWatcher.self] + (configuration.protocolClasses ?? [])
            }
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            let (data, _) = try await session.data(for: request("/profile"))
            answers.append(String(decoding: data, as: UTF8.self))
        }
        XCTAssertEqual(answers, ["cookie: claim=1", "cookie: claim=1"], "the origin gets the session's cookie either way")
        let cookies = RequestWatcher.values(of: "Cookie")
        XCTAssertFalse(cookies.isEmpty, "the watcher was asked")
        XCTAssertEqual(cookies.compactMap { $0 }, [], "a protocol is given the request without the session's cookies")
    }

    /// `copy()` keeps an ephemeral configuration's cookie jar (and credential storage): the
    /// same objects, not copies.
    func testA6_theCookieStorageOfAnEphemeralConfigurationSurvivesCopy() throws {
        let configuration = URLSessionConfiguration.ephemeral
        let copy = try XCTUnwrap(configuration.copy() as? URLSessionConfiguration)
        XCTAssertNotNil(configuration.httpCookieStorage)
        XCTAssertTrue(copy.httpCookieStorage === configuration.httpCookieStorage, "the same jar")
        XCTAssertTrue(copy.urlCredentialStorage === configuration.urlCredentialStorage, "the same credential storage")
        XCTAssertFalse(configuration.httpCookieStorage === HTTPCookieStorage.shared, "an ephemeral jar of its own")
    }

    /// An ephemeral session with the layer: a `Set-Cookie` the origin sends lands in the app
    /// session's own jar (through the upstream session, made from a copy of the configuration),
    /// not in the shared one, and the next request carries it — as without the layer.
    func testA6_aCookieSetThroughTheLayerLandsInTheEphemeralSessionsJar() async throws {
        var observed: [[String]] = []
        for withLayer in [false, true] {
            let configuration = URLSessionConfiguration.ephemeral
            if withLayer { CachingURLProtocol.inject(into: configuration, using: makeConfiguration()) }
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            var results: [String] = []
            for path in ["/login", "/profile"] {
                let (data, _) = try await session.data(for: request(path))
                results.append(String(decoding: data, as: UTF8.self))
            }
            let jar = (configuration.httpCookieStorage?.cookies ?? []).map { "\($0.name)=\($0.value)" }
            let shared = (HTTPCookieStorage.shared.cookies ?? []).filter { $0.domain == "127.0.0.1" }.map(\.name)
            observed.append(results + ["jar: \(jar)", "shared: \(shared)"])
        }
        XCTAssertEqual(observed[0], ["welcome", "cookie: session=abc", "jar: [\"session=abc\"]", "shared: []"])
        XCTAssertEqual(observed[1], observed[0])
    }

    // MARK: A25: a Cookie field the app set itself

    /// What the origin receives at `/profile` for `request` from an ephemeral session whose jar
    /// holds `claim=1`, without and then with the layer; `configure` changes the configuration.
    private func originReceives(_ request: URLRequest, configure: (URLSessionConfiguration) -> Void = { _ in }) async throws -> [String] {
        var answers: [String] = []
        for withLayer in [false, true] {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpCookieStorage?.setCookie(cookie("claim", "1"))
            configure(configuration)
            if withLayer { CachingURLProtocol.inject(into: configuration, using: makeConfiguration()) }
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            let (data, _) = try await session.data(for: request)
            answers.append(String(decoding: data, as: UTF8.self))
        }
        return answers
    }

    private func request(_ path: String, cookie: String?) -> URLRequest {
        request(path, headers: cookie.map { ["Cookie": $0] } ?? [:])
    }

    /// Apple's documentation of `httpShouldHandleCookies`: a `Cookie` header the app sets on the
    /// request overrides all cookies from the cookie store. Without the layer the origin gets the
    /// app's field alone; with it, the same.
    func testA25_aCookieTheAppSetsIsSentInsteadOfTheJars() async throws {
        let answers = try await originReceives(request("/profile", cookie: "app=2"))
        XCTAssertEqual(answers, ["cookie: app=2", "cookie: app=2"])
    }

    /// A `Cookie` in the session's additional headers is not the request's own: the jar's cookies
    /// are sent instead (couchbase-lite-ios pull request 1913).
    func testA25_theJarsCookiesReplaceACookieInTheSessionsAdditionalHeaders() async throws {
        let answers = try await originReceives(request("/profile", cookie: nil)) { $0.httpAdditionalHeaders = ["Cookie": "extra=3"] }
        XCTAssertEqual(answers, ["cookie: claim=1", "cookie: claim=1"])
    }

    /// Reasoned from A19 (a hop's request copies the fields other than `Authorization`) and the
    /// documentation above: the app's own `Cookie` reaches the redirect's target too, instead of
    /// the jar's for the target's URL.
    func testA25_aCookieTheAppSetIsCopiedToARedirectHop() async throws {
        origin.handle("/hop") { _ in OriginResponse(status: 302, headers: [HTTPField("Location", "/profile")]) }
        let answers = try await originReceives(request("/hop", cookie: "app=2"))
        XCTAssertEqual(answers, ["cookie: app=2", "cookie: app=2"])
    }
}
#endif
