import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Who a request is for (`CachingConfiguration.userIdentity`): named, an answer stays a hit across
/// a token refresh and across a cookie that changes on every response, and a user switch is
/// still a miss; by default every credential is a user of its own, which is safe and costs a
/// fetch after each refresh. Pairs: the same app code without and with the layer.
final class UserIdentityTests: CachingTestCase {
    private var pair: TransparencyPair { TransparencyPair(origin: origin) }

    /// The user the origin serves: from `X-Account`, the `session` cookie or `Bearer <name>.<n>`.
    private static func user(of request: OriginRequest) -> String {
        if let account = request.header("X-Account") { return account }
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let trimmed = pair.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("session=") { return String(trimmed.dropFirst(8)) }
        }
        if let authorization = request.header("Authorization"), authorization.hasPrefix("Bearer ") {
            return String(authorization.dropFirst(7).prefix { $0 != "." })
        }
        return "nobody"
    }

    /// The user a `Bearer <name>.<n>` token names, as an app that decodes its tokens knows it.
    private static let userOfToken = CachingUserIdentity.custom { request in
        request.value(forHTTPHeaderField: "Authorization").map { String($0.dropFirst(7).prefix { $0 != "." }) }
    }

    private func caching(_ identity: CachingUserIdentity) -> CachingConfiguration {
        var configuration = makeConfiguration()
        configuration.userIdentity = identity
        return configuration
    }

    private func body(_ session: URLSession, _ path: String) async throws -> String {
        String(decoding: try await session.data(from: origin.url(path)).0, as: UTF8.self)
    }

    /// The app keeps a session cookie; a load balancer sets a stickiness cookie on every response
    /// (so every request carries another `Cookie` field). Named as the identity, the session
    /// cookie keeps the answers hits; a user switch (another session cookie) is still a miss.
    /// With the default identity every request is a user of its own: each goes to the origin.
    func testWithTheSessionCookieNamedAStickinessCookieDoesNotMakeANewUser() async throws {
        let served = Locked(0)
        origin.handle("/feed") { request in
            let number = served.withLock { $0 += 1; return $0 }
            return .text("feed of \(Self.user(of: request))", headers: [
                HTTPField("Cache-Control", "private, max-age=600"), HTTPField("Set-Cookie", "lb=node-\(number); Path=/"),
            ])
        }
        func signIn(_ user: String, in session: URLSession) {
            let cookie = HTTPCookie(properties: [.name: "session", .value: user, .domain: "127.0.0.1", .path: "/"])!
            session.configuration.httpCookieStorage?.setCookie(cookie)
        }
        func run(_ session: URLSession) async throws -> String {
            signIn("alice", in: session)
            var answers: [String] = []
            for _ in 0..<3 { answers.append(try await body(session, "/feed")) }
            signIn("bob", in: session)
            for _ in 0..<2 { answers.append(try await body(session, "/feed")) }
            return answers.joined(separator: " | ")
        }
        let named = try await pair.observe(sessionHasDelegate: false, caching: caching(.cookie(named: "session"))) { session, _ in
            try await run(session)
        }
        XCTAssertEqual(named.without.result, "feed of alice | feed of alice | feed of alice | feed of bob | feed of bob")
        XCTAssertEqual(named.with.result, named.without.result)
        XCTAssertEqual(named.without.originTraffic.count, 5)
        XCTAssertEqual(named.with.originTraffic, ["GET /feed", "GET /feed"], "one fetch per user, the rest hits")

        cache.removeAll()
        let byDefault = try await pair.observe(sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            try await run(session)
        }
        XCTAssertEqual(byDefault.with.result, named.without.result)
        XCTAssertEqual(byDefault.with.originTraffic.count, 5, "every Cookie field is a user of its own: nothing to reuse")
    }

    /// An app that makes a session for each token refresh (the token in `httpAdditionalHeaders`):
    /// with an identity that names the token's user, the refreshed session's request is a hit
    /// on what the first session stored; another user's token is a miss. With the default
    /// identity the refresh costs one fetch per URL.
    func testWithACustomIdentityATokenRefreshStaysAHit() async throws {
        origin.handle("/inbox") { request in
            .text("inbox of \(Self.user(of: request))", headers: [HTTPField("ETag", "\"shared\""), HTTPField("Cache-Control", "max-age=600")])
        }
        func run(_ caching: CachingConfiguration?) async throws -> [String] {
            var answers: [String] = []
            for token in ["alice.1", "alice.2", "bob.1", "alice.3"] {
                let configuration = URLSessionConfiguration.ephemeral
                configuration.httpAdditionalHeaders = ["Authorization": "Bearer \(token)"]
                if let caching { CachingURLProtocol.inject(into: configuration, using: caching) }
                let session = URLSession(configuration: configuration)
                defer { session.finishTasksAndInvalidate() }
                answers.append(try await body(session, "/inbox"))
            }
            return answers
        }
        let expected = ["inbox of alice", "inbox of alice", "inbox of bob", "inbox of alice"]
        origin.resetLog()
        let plain = try await run(nil)
        XCTAssertEqual(plain, expected)
        XCTAssertEqual(originMethods("/inbox").count, 4)

        origin.resetLog()
        let named = try await run(caching(Self.userOfToken))
        XCTAssertEqual(named, expected)
        XCTAssertEqual(originMethods("/inbox").count, 2, "alice's refreshed tokens were hits; bob's was his own miss")

        cache.removeAll()
        origin.resetLog()
        let byDefault = try await run(makeConfiguration())
        XCTAssertEqual(byDefault, expected)
        XCTAssertEqual(originMethods("/inbox").count, 4, "by default, each token is a user of its own")
    }

    /// `.header(_:)`: an account header names the user; the token beside it may change.
    func testAHeaderCanNameTheUser() async throws {
        origin.handle("/me") { request in .text("me: \(Self.user(of: request))", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        installSession(caching(.header("X-Account")))
        var answers: [String] = []
        for (account, token) in [("alice", "a.1"), ("alice", "a.2"), ("bob", "b.1"), ("alice", "a.3")] {
            let (data, _) = try await get("/me", headers: ["X-Account": account, "Authorization": "Bearer \(token)"])
            answers.append(String(decoding: data, as: UTF8.self))
        }
        XCTAssertEqual(answers, ["me: alice", "me: alice", "me: bob", "me: alice"])
        XCTAssertEqual(originMethods("/me").count, 2)
    }

    /// When a named identity names nobody, the request's `Authorization` is the user: a token is
    /// never served another token's answers unless the app said they are one user; and the
    /// cookies the identity does not name never make a user.
    func testAnIdentityThatNamesNobodyFallsBackToTheToken() {
        let identity = CachingUserIdentity.cookie(named: "session")
        func user(_ fields: [String: String]) -> UInt64? {
            var request = URLRequest(url: URL(string: "https://example.com/x")!)
            for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
            return CacheRequest(request, key: "GET https://example.com/x").identified(by: identity).partition.user
        }
        XCTAssertNil(user([:]))
        XCTAssertNil(user(["Cookie": "lb=1; theme=dark"]), "only the named cookie makes a user")
        XCTAssertNil(user(["Cookie": "session=; lb=1"]), "an empty session cookie (a logout) is nobody")
        XCTAssertEqual(user(["Cookie": "lb=1; session=alice"]), user(["Cookie": "session=alice; lb=2"]))
        XCTAssertNotEqual(user(["Cookie": "session=alice"]), user(["Cookie": "session=bob"]))
        // The cookie's name is matched whole, its value read without the spaces around it.
        XCTAssertEqual(CachingUserIdentity.value(ofCookie: "session", in: "xsession=1;  session=alice \t; lb=2"), "alice")
        XCTAssertEqual(CachingUserIdentity.value(ofCookie: "session", in: "session=a=b"), "a=b")
        XCTAssertNil(CachingUserIdentity.value(ofCookie: "session", in: "sessions=1; Session=2; session"))
        XCTAssertNotNil(user(["Authorization": "Bearer t1"]))
        XCTAssertNotEqual(user(["Authorization": "Bearer t1"]), user(["Authorization": "Bearer t2"]))
        XCTAssertNotEqual(user(["Authorization": "Bearer t1"]), user([:]))
        XCTAssertEqual(user(["Authorization": "Bearer t1", "Cookie": "session=alice"]), user(["Cookie": "session=alice"]),
                       "the named cookie decides when it is there")
        // The default: the credentials, every cookie included, as the digest entries always had.
        let plain = CacheRequest(URLRequest(url: URL(string: "https://example.com/x")!), key: "k")
        XCTAssertNil(plain.identified(by: .credentials).partition.user)
        XCTAssertNil(CacheRequest(URLRequest(url: URL(string: "https://example.com/x")!), key: "k")
            .identified(by: .custom { _ in "" }).partition.user, "an empty name is nobody")
    }

    /// `Vary: Cookie` is the origin's own statement: a variant is served only to the same
    /// `Cookie` field, whatever the identity says (RFC 9111 §4.1), so a stickiness cookie that
    /// changes makes it a miss — as the README says.
    func testVaryOnCookieIsHonouredWhateverTheIdentity() async throws {
        origin.handle("/varies") { request in
            .text("for \(Self.user(of: request))", headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("Vary", "Cookie")])
        }
        installSession(caching(.cookie(named: "session")))
        _ = try await get("/varies", headers: ["Cookie": "session=alice; lb=1"])
        _ = try await get("/varies", headers: ["Cookie": "session=alice; lb=1"])
        _ = try await get("/varies", headers: ["Cookie": "session=alice; lb=2"])
        XCTAssertEqual(originMethods("/varies").count, 2, "a hit for the same Cookie field, a miss for another")
    }

    /// Only a digest of what names a user reaches a file: not the session cookie, not the token,
    /// not the name a custom identity gives.
    func testNothingThatNamesAUserIsWrittenToDisk() async throws {
        origin.handle("/private") { _ in .text("some body", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let secret = "secret-\(UUID().uuidString)"
        installSession(caching(.custom { request in request.value(forHTTPHeaderField: "X-Name") }))
        _ = try await get("/private", headers: ["X-Name": "name-\(secret)", "Authorization": "Bearer token-\(secret)",
                                                "Cookie": "session=cookie-\(secret)"])
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, 1)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(secret.utf8)), [])
    }
}
