import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Authentication: the app's delegate and credential storage decide, as without the layer.
final class AuthenticationPairTests: CachingTestCase {
    private var pair: TransparencyPair { TransparencyPair(origin: origin, loggedHeaders: ["Authorization"]) }

    private func serveBasicAuth(_ path: String) {
        origin.handle(path) { request in
            guard request.header("Authorization") == "Basic " + Data("alice:secret".utf8).base64EncodedString() else {
                return OriginResponse(status: 401, headers: [HTTPField("WWW-Authenticate", "Basic realm=\"members\"")],
                                      body: Data("who are you?".utf8))
            }
            return .text("hello alice", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
    }

    /// Runs a delegate-based data task and waits for its end.
    private func runTask(_ session: URLSession, _ delegate: AppDelegate, _ path: String) async -> String {
        let task = session.dataTask(with: origin.url(path))
        task.resume()
        await fulfillment(of: [delegate.done], timeout: 20)
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        return "\(status) \(String(decoding: delegate.received, as: UTF8.self))"
    }

    func testBasicAuthAnsweredByTheAppsDelegate() async throws {
        serveBasicAuth("/members")
        let credential = URLCredential(user: "alice", password: "secret", persistence: .forSession)
        let (without, with) = try await pair.observe(delegate: { AppDelegate(credential: credential) }, caching: makeConfiguration()) { session, delegate in
            await runTask(session, delegate, "/members")
        }
        XCTAssertTrue(without.result.hasSuffix("hello alice"), "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
    }

    /// Before, the cache's upstream session hung on the 401 and every later load of the URL
    /// joined that stuck exchange. Each load now gets its own challenge and answer.
    func testLoadsAfterAChallengeGetTheirOwnAnswer() async throws {
        serveBasicAuth("/members")
        let credential = URLCredential(user: "alice", password: "secret", persistence: .forSession)
        let (without, with) = try await pair.observe(delegate: { AppDelegate(credential: credential) }, caching: makeConfiguration()) { session, delegate in
            var results: [String] = []
            for _ in 0..<2 {
                let response = await runDelegateTask(URLRequest(url: origin.url("/members")), in: session, delegate: delegate)
                results.append("\(response?.statusCode ?? 0)")
            }
            return results.joined(separator: " ")
        }
        XCTAssertEqual(without.result, "200 200", "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 1, "the layer answered both loads")
    }
}
