import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An unsafe request for a URL with something stored goes through the layer (so the store is
/// invalidated only when the origin accepts it): the app sees what it sees without the layer —
/// redirects, challenges, bodies — as for GETs.
final class UnsafeRequestPairTests: CachingTestCase {
    /// The app code of each pair: a GET of `path` (which the layer stores), then `request`
    /// through a delegate task; its status, final path and body.
    private func getThen(_ request: URLRequest, storing path: String, _ session: URLSession,
                         _ delegate: AppDelegate) async -> String {
        _ = try? await session.data(from: origin.url(path))
        let response = await runDelegateTask(request, in: session, delegate: delegate)
        return "\(response?.statusCode ?? 0) \(response?.url?.path ?? "-") \(String(decoding: delegate.received, as: UTF8.self))"
    }

    private func servePostAnswering(_ path: String, _ answer: @escaping @Sendable (OriginRequest) -> OriginResponse) {
        origin.handle(path) { request in
            request.method == "GET" ? .text("stored", headers: [HTTPField("Cache-Control", "max-age=600")]) : answer(request)
        }
    }

    func testAPostAnswered303IsFollowedWithAGetAsWithoutTheLayer() async throws {
        servePostAnswering("/orders") { _ in OriginResponse(status: 303, headers: [HTTPField("Location", "/orders/9")]) }
        origin.handle("/orders/9") { _ in .text("order 9") }
        var post = URLRequest(url: origin.url("/orders"))
        post.httpMethod = "POST"
        post.httpBody = Data("item=1".utf8)
        let (without, with) = try await TransparencyPair(origin: origin).observe(caching: makeConfiguration()) { session, delegate in
            await getThen(post, storing: "/orders", session, delegate)
        }
        XCTAssertTrue(without.result.hasPrefix("200 /orders/9"), "\(without)")
        XCTAssertTrue(without.delegateCalls.contains { $0.hasPrefix("redirect 303") }, "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 3, "the GET, the POST's 303 and the GET the layer followed it with went through the layer")
    }

    func testAPostChallengedWithBasicAuthIsAnsweredByTheAppsDelegate() async throws {
        let expected = "Basic " + Data("alice:secret".utf8).base64EncodedString()
        servePostAnswering("/account") { request in
            guard request.header("Authorization") == expected else {
                return OriginResponse(status: 401, headers: [HTTPField("WWW-Authenticate", "Basic realm=\"members\"")],
                                      body: Data("who are you?".utf8))
            }
            return OriginResponse(status: 200, body: request.body)
        }
        var post = URLRequest(url: origin.url("/account"))
        post.httpMethod = "POST"
        post.httpBody = Data("name=alice".utf8)
        let credential = URLCredential(user: "alice", password: "secret", persistence: .forSession)
        let (without, with) = try await TransparencyPair(origin: origin, loggedHeaders: ["Authorization"]).observe(
            delegate: { AppDelegate(credential: credential) }, caching: makeConfiguration()) { session, delegate in
            await getThen(post, storing: "/account", session, delegate)
        }
        XCTAssertTrue(without.result.hasPrefix("200 /account") && without.result.hasSuffix("name=alice"), "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThanOrEqual(with.layerAnswers, 2, "the GET and the POST went through the layer")
    }
}
