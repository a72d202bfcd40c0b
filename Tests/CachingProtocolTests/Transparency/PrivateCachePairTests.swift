import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An app that signs its requests — a bearer token in `httpAdditionalHeaders` or on each request,
/// a session cookie in its jar — run without and with the layer: with it, its answers are reused
/// as any other (the layer is a private cache), and each user gets exactly what the origin gave
/// that user without the layer, on every path an answer can take out of the cache. The origin
/// gives every user the same validator (`ETag: "shared"`, one `Last-Modified`), so a validator
/// can never tell users apart.
final class PrivateCachePairTests: CachingTestCase {
    private var pair: TransparencyPair { TransparencyPair(origin: origin, loggedHeaders: ["If-None-Match", "If-Modified-Since", "Range"]) }

    /// The user a request is for, as the origin tells it: the name in `Authorization: Bearer
    /// <name>-token…`, else in the `session` cookie; "nobody" without either.
    private static func user(of request: OriginRequest) -> String {
        if let authorization = request.header("Authorization"), authorization.hasPrefix("Bearer ") {
            return String(authorization.dropFirst(7).prefix { $0 != "-" })
        }
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let trimmed = pair.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("session=") { return String(trimmed.dropFirst(8)) }
        }
        return "nobody"
    }

    /// Serves `path` with `headers` and a body naming the request's user; a conditional request
    /// whose `If-None-Match` or `If-Modified-Since` matches the shared validator gets a `304`.
    private func servePerUser(_ path: String, headers: [HTTPField]) {
        origin.handle(path) { request in
            if request.header("If-None-Match") == "\"shared\"" || request.header("If-Modified-Since") == Self.lastModified {
                return OriginResponse(status: 304, headers: headers, body: Data())
            }
            return .text("\(path) of \(Self.user(of: request))", headers: headers)
        }
    }

    private static let lastModified = "Tue, 14 Nov 2023 22:00:00 GMT"
    private static let sharedETag = HTTPField("ETag", "\"shared\"")

    /// A GET of `path` for `user` (its one token on the request; none for nil), as text: the
    /// status and the body.
    private func text(_ session: URLSession, _ path: String, as user: String?, headers: [String: String] = [:]) async throws -> String {
        var request = URLRequest(url: origin.url(path))
        if let user { request.setValue("Bearer \(user)-token", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        return "\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))"
    }

    /// `user`'s token in the session's `httpAdditionalHeaders`, as many apps set it.
    private func signedIn(_ user: String) -> (URLSessionConfiguration) -> Void {
        { $0.httpAdditionalHeaders = ["Authorization": "Bearer \(user)-token"] }
    }

    // MARK: 1: signed requests are cached

    /// An `ETag`-only answer, a `private, max-age` answer (token in `httpAdditionalHeaders`, and
    /// on each request) and a cookie session's answer: each asked for twice, the second time
    /// answered by the layer without the origin, with the same body the app got without it.
    func testRepeatsOfAnETagOnlyAPrivateMaxAgeAndACookieSessionAnswerAreServedWithoutTheOrigin() async throws {
        servePerUser("/config", headers: [Self.sharedETag])
        servePerUser("/inbox", headers: [HTTPField("Cache-Control", "private, max-age=300")])
        servePerUser("/profile", headers: [HTTPField("Cache-Control", "private, max-age=300")])
        servePerUser("/feed", headers: [HTTPField("Cache-Control", "private, max-age=300"), HTTPField("Last-Modified", Self.lastModified)])

        // A bearer token in the session's additional headers.
        let tokenInSession = try await pair.observe(configure: signedIn("alice"), sessionHasDelegate: false,
                                                    caching: makeConfiguration()) { session, _ in
            var answers: [String] = []
            for path in ["/config", "/inbox", "/config", "/inbox"] { answers.append(try await text(session, path, as: nil)) }
            return answers.joined(separator: " | ")
        }
        XCTAssertEqual(tokenInSession.without.result, "200 /config of alice | 200 /inbox of alice | 200 /config of alice | 200 /inbox of alice")
        XCTAssertEqual(tokenInSession.with.result, tokenInSession.without.result)
        XCTAssertEqual(tokenInSession.without.originTraffic.count, 4)
        XCTAssertEqual(tokenInSession.with.originTraffic, ["GET /config", "GET /inbox"], "the repeats were the layer's")

        // A token on each request (the same one twice).
        let tokenOnRequests = try await pair.observe(sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            var request = URLRequest(url: origin.url("/profile"))
            request.setValue("Bearer alice-token", forHTTPHeaderField: "Authorization")
            var answers: [String] = []
            for _ in 0..<2 { answers.append(String(decoding: try await session.data(for: request).0, as: UTF8.self)) }
            return answers.joined(separator: " | ")
        }
        XCTAssertEqual(tokenOnRequests.with.result, "/profile of alice | /profile of alice")
        XCTAssertEqual(tokenOnRequests.with.result, tokenOnRequests.without.result)
        XCTAssertEqual(tokenOnRequests.without.originTraffic.count, 2)
        XCTAssertEqual(tokenOnRequests.with.originTraffic, ["GET /profile"])

        // A session cookie the session's own jar holds (and puts on each request).
        let cookieSession = try await pair.observe(configure: { configuration in
            let cookie = HTTPCookie(properties: [.name: "session", .value: "alice", .domain: "127.0.0.1", .path: "/"])!
            configuration.httpCookieStorage?.setCookie(cookie)
        }, sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            var answers: [String] = []
            for _ in 0..<2 { answers.append(try await text(session, "/feed", as: nil)) }
            return answers.joined(separator: " | ")
        }
        XCTAssertEqual(cookieSession.with.result, "200 /feed of alice | 200 /feed of alice")
        XCTAssertEqual(cookieSession.with.result, cookieSession.without.result)
        XCTAssertEqual(cookieSession.without.originTraffic.count, 2)
        XCTAssertEqual(cookieSession.with.originTraffic, ["GET /feed"])
    }

    // MARK: 2: never one user's body to another

    /// Fresh hits: two users (and nobody) asking in turn each get their own answer, every time;
    /// each is fetched once.
    func testAFreshHitIsServedToItsUserOnly() async throws {
        servePerUser("/me", headers: [Self.sharedETag, HTTPField("Cache-Control", "private, max-age=600")])
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            var answers: [String] = []
            for user in ["alice", "bob", nil, "alice", "bob", nil] { answers.append(try await text(session, "/me", as: user)) }
            return answers.joined(separator: " | ")
        }
        XCTAssertEqual(without.result, "200 /me of alice | 200 /me of bob | 200 /me of nobody | 200 /me of alice | 200 /me of bob | 200 /me of nobody")
        XCTAssertEqual(with.result, without.result)
        XCTAssertEqual(with.originTraffic, ["GET /me", "GET /me", "GET /me"], "each user's answer was a hit for that user")
    }

    /// Revalidation with a validator every user shares: a user with nothing stored sends no
    /// condition (the other user's validator would get a `304` and the other's body), and a `304`
    /// to one user's conditional request confirms that user's own stored body only. With HEAD
    /// and with conditional GET revalidation, `ETag` and `Last-Modified`.
    func testA304ToOneUserNeverConfirmsAnotherUsersBody() async throws {
        servePerUser("/etag", headers: [Self.sharedETag, HTTPField("Cache-Control", "max-age=60")])
        servePerUser("/dated", headers: [HTTPField("Last-Modified", Self.lastModified), HTTPField("Cache-Control", "max-age=60")])
        for revalidation in [RevalidationStrategy.head, .conditionalGet] {
            cache.removeAll()
            var caching = makeConfiguration()
            caching.revalidation = revalidation
            let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: caching) { session, _ in
                var answers: [String] = []
                for path in ["/etag", "/dated"] {
                    answers.append(try await text(session, path, as: "alice"))
                    clock.advance(by: 120)   // alice's answer is stale: a revalidation is due
                    answers.append(try await text(session, path, as: "bob"))
                    answers.append(try await text(session, path, as: "alice"))
                    clock.advance(by: 120)
                    answers.append(try await text(session, path, as: "bob"))
                    answers.append(try await text(session, path, as: nil))
                }
                return answers.joined(separator: " | ")
            }
            XCTAssertEqual(without.result, ["/etag", "/dated"].map { path in
                ["alice", "bob", "alice", "bob", "nobody"].map { "200 \(path) of \($0)" }.joined(separator: " | ")
            }.joined(separator: " | "), "\(revalidation)")
            XCTAssertEqual(with.result, without.result, "\(revalidation)")
            // bob's first request and nobody's carry no condition (nothing of theirs was stored);
            // alice's and bob's revalidations each carry the validator of their own stored answer.
            let method = revalidation == .head ? "HEAD" : "GET"
            XCTAssertEqual(with.originTraffic, [
                "GET /etag", "GET /etag", "\(method) /etag If-None-Match: \"shared\"", "\(method) /etag If-None-Match: \"shared\"", "GET /etag",
                "GET /dated", "GET /dated", "\(method) /dated If-Modified-Since: \(Self.lastModified)",
                "\(method) /dated If-Modified-Since: \(Self.lastModified)", "GET /dated",
            ], "\(revalidation)")
        }
    }

    /// Stale answers a request may accept — `max-stale`, `stale-while-revalidate`, `stale-if-error`
    /// after a 5xx — are its own user's only.
    func testAStaleAnswerIsServedToItsUserOnly() async throws {
        let failing = Locked(false)
        for (path, cacheControl) in [("/max-stale", "max-age=60"), ("/swr", "max-age=60, stale-while-revalidate=600"),
                                     ("/sie", "max-age=60, stale-if-error=600")] {
            origin.handle(path) { request in
                if failing.withLock({ $0 }), path == "/sie" { return .text("down", status: 503) }
                return .text("\(path) of \(Self.user(of: request))", headers: [Self.sharedETag, HTTPField("Cache-Control", cacheControl)])
            }
        }
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            failing.withLock { $0 = false }
            for path in ["/max-stale", "/swr", "/sie"] { _ = try await text(session, path, as: "alice") }
            clock.advance(by: 120)
            failing.withLock { $0 = true }
            return [
                try await text(session, "/max-stale", as: "bob", headers: ["Cache-Control": "max-stale"]),
                try await text(session, "/swr", as: "bob"),
                try await text(session, "/sie", as: "bob"),
                try await text(session, "/max-stale", as: "alice", headers: ["Cache-Control": "max-stale"]),
            ].joined(separator: " | ")
        }
        XCTAssertEqual(without.result, "200 /max-stale of bob | 200 /swr of bob | 503 down | 200 /max-stale of alice")
        XCTAssertEqual(with.result, "200 /max-stale of bob | 200 /swr of bob | 503 down | 200 /max-stale of alice",
                       "alice's stale answer is still hers (max-stale): \(with)")
    }

    /// Offline mode (the layer's own switch, so not a pair): a user with nothing stored gets
    /// the error of an empty cache, never another user's stored answer, fresh or stale.
    func testOfflineAUserGetsNothingOfAnotherUsers() async throws {
        servePerUser("/offline", headers: [Self.sharedETag, HTTPField("Cache-Control", "max-age=60")])
        _ = try await text(session, "/offline", as: "alice")
        configuration.isOffline = true
        defer { configuration.isOffline = false }
        for advance in [0.0, 120] {
            clock.advance(by: advance)
            do {
                let answer = try await text(session, "/offline", as: "bob")
                XCTFail("bob got \(answer)")
            } catch let error as URLError {
                XCTAssertEqual(error.code, .resourceUnavailable)
            }
            let alice = try await text(session, "/offline", as: "alice")
            XCTAssertEqual(alice, "200 /offline of alice", "alice's own, fresh then stale")
        }
        XCTAssertEqual(originMethods("/offline"), ["GET"])
    }

    /// A stored redirect that leads each user elsewhere (`/home` → `/users/<name>`): a user
    /// follows their own, never another's.
    func testAStoredRedirectIsFollowedByItsUserOnly() async throws {
        origin.handle("/home") { request in
            OriginResponse(status: 301, headers: [HTTPField("Location", "/users/\(Self.user(of: request))"),
                                                  HTTPField("Cache-Control", "max-age=600")], body: Data())
        }
        for user in ["alice", "bob", "nobody"] {
            servePerUser("/users/\(user)", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            var answers: [String] = []
            for user in ["alice", "bob", nil, "alice", "bob"] { answers.append(try await text(session, "/home", as: user)) }
            return answers.joined(separator: " | ")
        }
        XCTAssertEqual(without.result,
                       "200 /users/alice of alice | 200 /users/bob of bob | 200 /users/nobody of nobody | 200 /users/alice of alice | 200 /users/bob of bob")
        XCTAssertEqual(with.result, without.result)
        XCTAssertEqual(with.originTraffic.filter { $0.hasPrefix("GET /home") }.count, 3, "each user's redirect, stored for that user")
    }

    /// A POST a rule caches (a search that only reads): the same query by another user is that
    /// user's own answer.
    func testACachedPOSTIsServedToItsUserOnly() async throws {
        origin.handle("/search") { request in
            .text("results of \(Self.user(of: request))", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        var caching = makeConfiguration()
        caching.rules = [.cachePOST(pathPrefix: "/search")]
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: caching) { session, _ in
            var answers: [String] = []
            for user in ["alice", "bob", "alice", "bob"] {
                var request = URLRequest(url: origin.url("/search"))
                request.httpMethod = "POST"
                request.httpBody = Data("q=feed".utf8)
                request.setValue("Bearer \(user)-token", forHTTPHeaderField: "Authorization")
                answers.append(String(decoding: try await session.data(for: request).0, as: UTF8.self))
            }
            return answers.joined(separator: " | ")
        }
        XCTAssertEqual(without.result, "results of alice | results of bob | results of alice | results of bob")
        XCTAssertEqual(with.result, without.result)
        XCTAssertEqual(with.originTraffic.count, 2, "each user's answer, stored for that user")
    }

    /// A byte range answered from a complete stored response: only from the user's own.
    func testARangeIsAnsweredFromItsUsersStoredResponseOnly() async throws {
        origin.handle("/doc") { request in
            let body = "\(Self.user(of: request)): /doc"
            if let range = request.header("Range"), range == "bytes=0-2" {
                return OriginResponse(status: 206, headers: [HTTPField("Content-Range", "bytes 0-2/\(body.utf8.count)")],
                                      body: Data(body.utf8.prefix(3)))
            }
            return .text(body, headers: [HTTPField("Cache-Control", "max-age=600"), Self.sharedETag])
        }
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: makeConfiguration()) { session, _ in
            [
                try await text(session, "/doc", as: "alice"),
                try await text(session, "/doc", as: "bob", headers: ["Range": "bytes=0-2"]),
                try await text(session, "/doc", as: "alice", headers: ["Range": "bytes=0-2"]),
            ].joined(separator: " | ")
        }
        XCTAssertEqual(without.result, "200 alice: /doc | 206 bob | 206 ali")
        XCTAssertEqual(with.result, without.result)
        XCTAssertEqual(with.originTraffic, ["GET /doc", "GET /doc Range: bytes=0-2"], "alice's range came from her stored answer")
    }

    // MARK: Paths without a session

    /// Two users at once: two upstream requests, each with its own answer, and neither joined.
    func testTwoUsersAtOnceShareNoRequest() async throws {
        let arrived = Locked(0)
        let bothIn = DispatchSemaphore(value: 0)
        origin.handle("/now") { request in
            if arrived.withLock({ $0 += 1; return $0 }) == 2 {
                bothIn.signal()
                bothIn.signal()
            }
            _ = bothIn.wait(timeout: .now() + 5)
            return .text("/now of \(Self.user(of: request))", headers: [Self.sharedETag, HTTPField("Cache-Control", "max-age=600")])
        }
        let session = self.session!
        let url = origin.url("/now")
        @Sendable func fetch(_ user: String) async throws -> String {
            var request = URLRequest(url: url)
            request.setValue("Bearer \(user)-token", forHTTPHeaderField: "Authorization")
            let (data, response) = try await session.data(for: request)
            return "\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))"
        }
        async let alice = fetch("alice")
        async let bob = fetch("bob")
        let (forAlice, forBob) = try await (alice, bob)
        XCTAssertEqual([forAlice, forBob], ["200 /now of alice", "200 /now of bob"])
        XCTAssertEqual(originMethods("/now").count, 2)
        XCTAssertFalse(events.contains { $0.collapsed })
    }

    /// `cachedThenFresh`: a user with nothing stored gets no cached answer of another's first,
    /// only the origin's own answer for them.
    func testCachedThenFreshYieldsNothingOfAnotherUsers() async throws {
        servePerUser("/timeline", headers: [Self.sharedETag, HTTPField("Cache-Control", "max-age=600")])
        _ = try await text(session, "/timeline", as: "alice")
        var bobs = URLRequest(url: origin.url("/timeline"))
        bobs.setValue("Bearer bob-token", forHTTPHeaderField: "Authorization")
        var answers: [String] = []
        for try await answer in configuration.cachedThenFresh(for: bobs) {
            answers.append("\(answer.source) \(String(decoding: answer.data, as: UTF8.self))")
        }
        XCTAssertEqual(answers, ["origin /timeline of bob"])
        XCTAssertEqual(originMethods("/timeline").count, 2)
    }

    /// The `URLCache` API: what is stored for one user is not another's, nor nobody's.
    func testTheURLCacheAPIKeepsUsersApart() async throws {
        servePerUser("/account", headers: [HTTPField("Cache-Control", "private, max-age=600")])
        var alices = request("/account")
        alices.setValue("Bearer alice-token", forHTTPHeaderField: "Authorization")
        _ = try await session.data(for: alices)
        var bobs = alices
        bobs.setValue("Bearer bob-token", forHTTPHeaderField: "Authorization")
        XCTAssertNil(cache.cachedResponse(for: bobs), "bob has nothing stored")
        XCTAssertNil(cache.cachedResponse(for: request("/account")), "nor has nobody")
        let response = HTTPURLResponse(url: origin.url("/account"), statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=600"])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data("bob's, stored by the app".utf8)), for: bobs)
        XCTAssertEqual(cache.cachedResponse(for: bobs).map { String(decoding: $0.data, as: UTF8.self) }, "bob's, stored by the app")
        let alicesAgain = try await session.data(for: alices)
        XCTAssertEqual(String(decoding: alicesAgain.0, as: UTF8.self), "/account of alice", "bob's never reaches alice")
    }
}
