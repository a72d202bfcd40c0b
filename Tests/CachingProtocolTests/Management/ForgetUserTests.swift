import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Forgetting a user (a logout): one call removes the user's answers from memory and disk, and
/// after it no file of the cache directory holds one of their bodies; other users' answers, and
/// those for nobody in particular, stay.
final class ForgetUserTests: CachingTestCase {
    /// Serves `path` with a body naming the request's `session` cookie or token, unique to this run.
    private let marker = UUID().uuidString

    private func serve(_ path: String, setsCookie: Bool = false) {
        origin.handle(path) { [marker] request in
            let cookie = request.header("Cookie") ?? ""
            let authorization = request.header("Authorization") ?? ""
            let owner = cookie.contains("session=alice") || authorization.contains("alice") ? "alice"
                : cookie.contains("session=bob") || authorization.contains("bob") ? "bob" : "nobody"
            var headers = [HTTPField("Cache-Control", "private, max-age=600"), HTTPField("ETag", "\"shared\"")]
            // A cookie the jar refuses (another domain): the answer is kept in memory only, and the
            // jar stays empty, so the requests' own `Cookie` fields go out as they are.
            if setsCookie { headers.append(HTTPField("Set-Cookie", "seen=1; Domain=other.example")) }
            return .text("\(path) body of \(owner) \(marker)", headers: headers)
        }
    }

    private func body(_ path: String, of owner: String) -> Data {
        Data("\(path) body of \(owner) \(marker)".utf8)
    }

    private func text(_ path: String, cookie: String? = nil, authorization: String? = nil) async throws -> String {
        var headers: [String: String] = [:]
        if let cookie { headers["Cookie"] = cookie }
        if let authorization { headers["Authorization"] = authorization }
        return String(decoding: try await get(path, headers: headers).0, as: UTF8.self)
    }

    private func filesHolding(_ path: String, of owner: String) -> [String] {
        CacheFiles.files(in: directory, containing: body(path, of: owner))
    }

    /// Alice's answers — a URL only she fetched, a URL bob fetched too (one entry file holding
    /// both), an answer kept in memory only — and bob's and nobody's: after
    /// `removeResponses(forUser:)` no file holds a body of hers, hers are fetched again, and the
    /// others' are still hits, also from a cache opened again on the directory.
    func testForgettingAUserLeavesNoFileWithTheirBodies() async throws {
        var configuration = makeConfiguration()
        configuration.userIdentity = .cookie(named: "session")
        installSession(configuration)
        for path in ["/mine", "/shared", "/b", "/public"] { serve(path) }
        serve("/welcome", setsCookie: true)
        _ = try await text("/mine", cookie: "session=alice; lb=1")
        _ = try await text("/shared", cookie: "session=alice; lb=2")
        _ = try await text("/welcome", cookie: "session=alice; lb=3")
        _ = try await text("/shared", cookie: "session=bob")
        _ = try await text("/b", cookie: "session=bob")
        _ = try await text("/public")
        cache.waitUntilSettled()
        XCTAssertEqual(filesHolding("/mine", of: "alice").count, 1)
        XCTAssertEqual(filesHolding("/shared", of: "alice").count, 1)
        let sharedFile = filesHolding("/shared", of: "bob")
        XCTAssertEqual(sharedFile, filesHolding("/shared", of: "alice"), "one record, two users' variants")

        // When alice logs out
        cache.removeResponses(forUser: "alice")

        // Then no file holds a body of hers; bob's and nobody's are still there
        for path in ["/mine", "/shared", "/welcome"] {
            XCTAssertEqual(filesHolding(path, of: "alice"), [], path)
        }
        XCTAssertEqual(filesHolding("/shared", of: "bob"), sharedFile, "the shared record was written again, with bob's only")
        XCTAssertEqual(filesHolding("/b", of: "bob").count, 1)
        XCTAssertEqual(filesHolding("/public", of: "nobody").count, 1)
        XCTAssertNil(cache.entries().first { $0.url.path == "/mine" })
        // And her next requests go to the origin (nothing in memory either); the others' are hits
        let before = origin.requestCount()
        let bobsShared = try await text("/shared", cookie: "session=bob")
        XCTAssertEqual(bobsShared, String(decoding: body("/shared", of: "bob"), as: UTF8.self))
        _ = try await text("/b", cookie: "session=bob")
        _ = try await text("/public")
        XCTAssertEqual(origin.requestCount(), before, "bob's and nobody's answers are hits")
        for path in ["/mine", "/shared", "/welcome"] {
            let again = try await text(path, cookie: "session=alice; lb=9")
            XCTAssertEqual(again, String(decoding: body(path, of: "alice"), as: UTF8.self))
        }
        XCTAssertEqual(origin.requestCount(), before + 3, "each of hers fetched again")
        XCTAssertEqual(originMethods("/mine"), ["GET", "GET"], "a plain GET: no validator of hers was left to revalidate with")

        // And, once her answers fetched again are forgotten too, a cache opened again on the
        // directory lists only the others'
        cache.removeResponses(forUser: "alice")
        let reopened = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 32 << 20, directory: directory)
        XCTAssertEqual(reopened.entries().map(\.url.path).sorted(), ["/b", "/public", "/shared"])
    }

    /// With the default identity and the token in the session's `httpAdditionalHeaders`:
    /// `removeResponses(forUserOf:)` finds the user as that session sends the request (so a plain
    /// `URLRequest(url:)` names the signed-in user). `removeResponsesForAllUsers()` then removes
    /// every signed answer, the earlier tokens' included, and keeps those for nobody.
    func testForgettingTheUserOfARequestAndEveryUser() async throws {
        for path in ["/inbox", "/old", "/public"] { serve(path) }
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.httpAdditionalHeaders = ["Authorization": "Bearer alice-token-2"]
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration)
        let signedIn = URLSession(configuration: sessionConfiguration)
        defer { signedIn.invalidateAndCancel() }
        _ = try await signedIn.data(from: origin.url("/inbox"))
        _ = try await text("/old", authorization: "Bearer alice-token-1")   // an earlier token: another user, by default
        _ = try await text("/inbox", authorization: "Bearer bob-token")
        _ = try await text("/public")
        cache.waitUntilSettled()

        cache.removeResponses(forUserOf: URLRequest(url: origin.url("/anything")))
        XCTAssertEqual(filesHolding("/inbox", of: "alice"), [], "the user the session's token names")
        XCTAssertEqual(filesHolding("/inbox", of: "bob").count, 1)
        XCTAssertEqual(filesHolding("/old", of: "alice").count, 1, "the earlier token is another user to the default identity")

        cache.removeResponsesForAllUsers()
        XCTAssertEqual(filesHolding("/old", of: "alice"), [])
        XCTAssertEqual(filesHolding("/inbox", of: "bob"), [])
        XCTAssertEqual(filesHolding("/public", of: "nobody").count, 1, "answers for nobody in particular stay")
        XCTAssertEqual(cache.entries().map(\.url.path), ["/public"])
    }

    /// A request for nobody in particular names no user: forgetting its user removes nothing.
    func testARequestForNobodyForgetsNothing() async throws {
        serve("/public")
        _ = try await text("/public")
        cache.removeResponses(forUserOf: request("/public"))
        cache.removeResponses(forUser: "")
        _ = try await text("/public")
        XCTAssertEqual(originMethods("/public"), ["GET"])
    }

    /// An answer for the user that was on its way when the user was forgotten is not stored:
    /// no file holds it after it arrives, and the user's next request goes to the origin. A
    /// request sent after the call is stored as usual.
    func testAnAnswerOnItsWayWhenTheUserIsForgottenIsNotStored() async throws {
        let release = DispatchSemaphore(value: 0)
        let arrived = XCTestExpectation(description: "the request reached the origin")
        let held = Locked(true)
        origin.handle("/slow") { [marker] _ in
            if held.withLock({ $0 }) {
                arrived.fulfill()
                _ = release.wait(timeout: .now() + 10)
            }
            return .text("/slow body of alice \(marker)", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        let session = self.session!
        let url = origin.url("/slow")
        let loading = Task {
            var request = URLRequest(url: url)
            request.setValue("Bearer alice-token", forHTTPHeaderField: "Authorization")
            return try await session.data(for: request).0
        }
        await fulfillment(of: [arrived], timeout: 10)
        var alices = request("/slow")
        alices.setValue("Bearer alice-token", forHTTPHeaderField: "Authorization")
        cache.removeResponses(forUserOf: alices)
        held.withLock { $0 = false }
        release.signal()
        let delivered = try await loading.value
        XCTAssertEqual(delivered, body("/slow", of: "alice"), "the app got its answer")
        cache.waitUntilSettled()
        XCTAssertEqual(filesHolding("/slow", of: "alice"), [])
        XCTAssertNil(cache.cachedResponse(for: alices))

        clock.advance(by: 1)
        _ = try await text("/slow", authorization: "Bearer alice-token")
        _ = try await text("/slow", authorization: "Bearer alice-token")
        XCTAssertEqual(originMethods("/slow").count, 2, "sent after the call: stored, and then a hit")
    }
}
