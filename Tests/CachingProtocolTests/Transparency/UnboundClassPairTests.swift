import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A session's protocol class unbound between `canInit` and `startLoading` — by `unregister()`, or
/// pushed out by `SessionClasses.maximumBindings` newer configurations — answers the app as
/// without the layer. On Linux the task goes to Foundation's own protocol; on Apple platforms,
/// which have none to hand it to, the request goes to the origin as it is, with the settings the
/// class served (`PassThroughLoad`). That path runs here with Apple's client rules, through a
/// class standing in for the one `inject` made (the engine seam; nothing here ran on Apple).
final class UnboundClassPairTests: CachingTestCase {
    /// A class with Apple's client rules, serving what the class `inject` made (`target`) serves.
    private final class AppleRulesStandIn: CachingURLProtocol {
        static let target = Locked<AnyClass?>(nil)

        override class var binding: SessionClasses.ClassBinding {
            guard let target = target.withLock({ $0 }) else { return .unbound(lastSettings: nil) }
            return SessionClasses.classBinding(of: target)
        }

        override class var deliveryRules: ClientDelivery.Rules { .apple }
    }

    private let feed = Data.pattern(24_000, seed: 4)

    override func setUpWithError() throws {
        try super.setUpWithError()
        let feed = self.feed
        origin.handle("/feed") { request in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600"),
                                                  HTTPField("X-Token-Seen", request.header("X-Token") ?? "none")],
                           body: feed, transfer: .chunked(chunkSize: 4_000))
        }
        origin.handle("/moved") { _ in OriginResponse(status: 302, headers: [HTTPField("Location", "/feed")], body: Data("moved".utf8)) }
    }

    override func tearDownWithError() throws {
        AppleRulesStandIn.target.withLock { $0 = nil }
        try super.tearDownWithError()
    }

    /// A session configuration whose sessions send `X-Token: token`.
    private func tokenConfiguration(_ token: String) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.httpAdditionalHeaders = ["X-Token": token]
        return configuration
    }

    /// Injects the layer into `configuration` and makes the stand-in serve the class it got.
    private func injectAndStandIn(_ configuration: URLSessionConfiguration) throws {
        CachingURLProtocol.inject(into: configuration, using: self.configuration, delegate: nil)
        let made: AnyClass = try XCTUnwrap(configuration.protocolClasses?.first { $0 is CachingURLProtocol.Type })
        AppleRulesStandIn.target.withLock { $0 = made }
    }

    /// Starts a load of `path` by the stand-in (`canInit` took it earlier) and waits for its end.
    private func loadByTheStandIn(_ path: String) -> RecordingClient {
        let client = RecordingClient()
        let loading = AppleRulesStandIn(request: URLRequest(url: origin.url(path)), cachedResponse: nil, client: client)
        loading.startLoading()
        wait(for: [client.ended], timeout: 10)
        loading.stopLoading()
        return client
    }

    /// The same request through a session without the layer: its status, body and the token the
    /// origin saw.
    private func loadWithoutTheLayer(_ path: String, token: String) async throws -> (Int, Data, String?) {
        let plain = URLSession(configuration: tokenConfiguration(token))
        defer { plain.finishTasksAndInvalidate() }
        let (data, response) = try await plain.data(from: origin.url(path))
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        return (http.statusCode, data, http.value(forHTTPHeaderField: "X-Token-Seen"))
    }

    func testAClassUnregisteredAfterCanInitAnswersAsWithoutTheLayer() async throws {
        // Given a class `canInit` took a request for
        try injectAndStandIn(tokenConfiguration("t1"))
        XCTAssertTrue(AppleRulesStandIn.canInit(with: URLRequest(url: origin.url("/feed"))))
        // When the app unregisters before the load starts
        CachingURLProtocol.unregister()
        let client = loadByTheStandIn("/feed")
        // Then the app gets the origin's answer, as without the layer: streamed, byte for byte,
        // sent with the session's header field, with no Cache-Status, and nothing stored
        XCTAssertEqual(client.calls.first, "response 200", "\(client.calls)")
        XCTAssertEqual(client.calls.last, "finish", "\(client.calls)")
        XCTAssertGreaterThan(client.calls.filter { $0.hasPrefix("data") }.count, 1, "handed on as it arrived")
        XCTAssertNil(client.response?.value(forHTTPHeaderField: "Cache-Status"), "the layer's header is not added")
        let (status, body, tokenSeen) = try await loadWithoutTheLayer("/feed", token: "t1")
        XCTAssertEqual(client.response?.statusCode, status)
        XCTAssertEqual(client.body, body, "the same body, byte for byte")
        XCTAssertEqual(client.response?.value(forHTTPHeaderField: "X-Token-Seen"), tokenSeen)
        XCTAssertEqual(tokenSeen, "t1")
        XCTAssertEqual(origin.requestCount(path: "/feed"), 2, "each went to the origin")
        XCTAssertEqual(events.count, 0, "the layer answered nothing")
        cache.waitUntilSettled()
        XCTAssertNil(cache.store.peek(cache.key(for: origin.url("/feed"))), "nothing stored")
    }

    func testAClassPushedOutByNewerConfigurationsAnswersWithItsOwnSettings() async throws {
        try injectAndStandIn(tokenConfiguration("oldest"))
        XCTAssertTrue(AppleRulesStandIn.canInit(with: URLRequest(url: origin.url("/feed"))))
        // A configuration for each of `maximumBindings` token refreshes pushes the oldest out.
        for refresh in 0..<SessionClasses.maximumBindings {
            CachingURLProtocol.inject(into: tokenConfiguration("refresh \(refresh)"), using: configuration, delegate: nil)
        }
        XCTAssertFalse(AppleRulesStandIn.canInit(with: URLRequest(url: origin.url("/feed"))), "unbound: new loads go to Foundation")
        let client = loadByTheStandIn("/feed")
        XCTAssertEqual(client.calls.last, "finish", "\(client.calls)")
        XCTAssertEqual(client.body, feed)
        XCTAssertEqual(client.response?.value(forHTTPHeaderField: "X-Token-Seen"), "oldest", "the settings of its own session")
        XCTAssertEqual(events.count, 0)
    }

    /// The settings of a class unbound `maximumBindings` drops ago are forgotten (a token refresh
    /// per session keeps no token for ever): a load that started that late fails, saying why.
    func testAClassForgottenLongAgoFailsAsCancelled() throws {
        try injectAndStandIn(tokenConfiguration("forgotten"))
        for refresh in 0...(2 * SessionClasses.maximumBindings) {
            CachingURLProtocol.inject(into: tokenConfiguration("refresh \(refresh)"), using: configuration, delegate: nil)
        }
        let client = loadByTheStandIn("/feed")
        XCTAssertEqual(client.calls, ["fail \(URLError.cancelled.rawValue)"])
        XCTAssertEqual(origin.requestCount(path: "/feed"), 0)
    }

    /// A redirect is reported, as the bound class reports it with Apple's rules: the app's
    /// session asks its delegate and loads the next hop (nobody here can refuse it, so the load
    /// then ends as cancelled, as in Apple's CustomHTTPProtocol sample).
    func testARedirectIsReportedToTheSession() throws {
        try injectAndStandIn(tokenConfiguration("t1"))
        CachingURLProtocol.unregister()
        let client = loadByTheStandIn("/moved")
        XCTAssertEqual(client.calls, ["redirect 302 to \(origin.url("/feed").absoluteString)", "fail \(CocoaError.userCancelled.rawValue)"])
        XCTAssertEqual(origin.requestCount(path: "/moved"), 1)
        XCTAssertEqual(origin.requestCount(path: "/feed"), 0, "the next hop is the session's to load")
    }
}
