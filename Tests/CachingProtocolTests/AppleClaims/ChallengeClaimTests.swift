#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation fact A5 and M4 of "What only a Mac can still prove", on an Apple platform: an
/// authentication challenge of the cache's own upstream session reaches the app only because the
/// layer forwards it (`ChallengeRelay`), and the app's answer goes back upstream; default
/// handling in the upstream session finds the credential in the app session's credential
/// storage, proposes it in the forwarded challenge, and sends it unasked only to the origin it
/// authenticated to. Each as a pair: the same app code without and with the layer.
final class ChallengeClaimTests: CachingTestCase {
    private static let user = "claims"
    private static let password = "secret"

    override func setUpWithError() throws {
        try super.setUpWithError()
        let expected = "Basic " + Data("\(Self.user):\(Self.password)".utf8).base64EncodedString()
        origin.handle("/private") { request in
            guard request.header("Authorization") == expected else {
                return .text("denied", status: 401, headers: [HTTPField("WWW-Authenticate", "Basic realm=\"claims\"")])
            }
            return .text("private", headers: [HTTPField("Cache-Control", "no-store")])
        }
    }

    /// HTTP Basic: the app's delegate gets the challenge and its credential gets the 200, as
    /// without the layer (same delegate calls, same requests at the origin).
    func testA5_anAuthenticationChallengeReachesTheAppsDelegateAndItsAnswerGoesUpstream() async throws {
        let pair = TransparencyPair(origin: origin, loggedHeaders: ["Authorization"])
        let credential = URLCredential(user: Self.user, password: Self.password, persistence: .none)
        let (without, with) = try await pair.observe(delegate: { AppDelegate(credential: credential) },
                                                     caching: makeConfiguration()) { session, delegate in
            let response = await runDelegateTask(request("/private"), in: session, delegate: delegate)
            return "\(response?.statusCode ?? 0) \(String(decoding: delegate.received, as: UTF8.self))"
        }
        XCTAssertEqual(without.result, "200 private", "\(without)")
        XCTAssertTrue(without.delegateCalls.contains("challenge NSURLAuthenticationMethodHTTPBasic claims failures=0"), "\(without)")
        XCTAssertEqual(with, without, "the challenge reached the app through the layer, and its answer went upstream")
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered the load")
    }

    /// A credential stored for the origin's protection space in the app session's storage, and a
    /// delegate that asks for default handling: the delegate sees the stored credential proposed,
    /// the load succeeds with it, a second load to that origin succeeds as it does without the
    /// layer, and another origin never gets the credential.
    func testM4_defaultHandlingUsesTheAppsStoredCredentialOnlyForItsOrigin() async throws {
        let other = try LoopbackOrigin(now: clock.read)
        defer { other.stop() }
        other.handle("/open") { _ in .text("open", headers: [HTTPField("Cache-Control", "no-store")]) }
        let space = URLProtectionSpace(host: "127.0.0.1", port: origin.port, protocol: "http", realm: "claims",
                                       authenticationMethod: NSURLAuthenticationMethodHTTPBasic)

        var observed: [[String]] = []
        for withLayer in [false, true] {
            origin.resetLog()
            other.resetLog()
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 10
            let storage = try XCTUnwrap(configuration.urlCredentialStorage, "an ephemeral configuration has a credential storage")
            storage.setDefaultCredential(URLCredential(user: Self.user, password: Self.password, persistence: .forSession), for: space)
            if withLayer { CachingURLProtocol.inject(into: configuration, using: makeConfiguration()) }
            let delegate = DefaultHandlingDelegate()
            let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }

            var results: [String] = []
            for url in [origin.url("/private"), origin.url("/private"), other.url("/open")] {
                let (data, response) = try await session.data(for: URLRequest(url: url))
                results.append("\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))")
            }
            let credentialsSent = (origin.requests + other.requests).map { "\($0.path) \($0.header("Authorization") == nil ? "without" : "with") credential" }
            observed.append(results + delegate.challenges + credentialsSent)
        }
        let without = observed[0]
        XCTAssertEqual(Array(without.prefix(3)), ["200 private", "200 private", "200 open"], "\(without)")
        XCTAssertTrue(without.contains("challenge HTTPBasic proposed \(Self.user)"), "the stored credential proposed: \(without)")
        XCTAssertTrue(without.contains("/open without credential"), "\(without)")
        XCTAssertEqual(observed[1], without, "with the layer: the same answers, challenges and credentials sent")
    }
}

/// A delegate that asks for default handling of every challenge and records what was proposed.
private final class DefaultHandlingDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    private let recorded = Locked<[String]>([])

    var challenges: [String] { recorded.withLock { $0 } }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let method = challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodHTTPBasic
            ? "HTTPBasic" : challenge.protectionSpace.authenticationMethod
        recorded.withLock { $0.append("challenge \(method) proposed \(challenge.proposedCredential?.user ?? "nothing")") }
        completionHandler(.performDefaultHandling, nil)
    }
}
#endif
