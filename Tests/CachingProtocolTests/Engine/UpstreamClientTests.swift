import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The upstream client on its own, against the loopback origin: a request nobody needs before
/// it is complete is collected by Foundation when an app's protocol class comes first in the
/// upstream session (a completion-handler task on Linux), and a challenge still ends with the
/// 401 and its body, never a hang.
final class UpstreamClientTests: LoaderRulesTestCase {
    private var origin: LoopbackOrigin!
    private var client: UpstreamClient!
    /// A client whose session asks an app's protocol class (one that takes nothing) first.
    private var clientBehindAppProtocol: UpstreamClient!

    override func setUpWithError() throws {
        origin = try LoopbackOrigin()
        let configuration = SessionSettings.standard.upstreamConfiguration { $0 == CachingURLProtocol.self }
        client = UpstreamClient(configuration: configuration)
        configuration.protocolClasses = [DecliningProtocol.self] + (configuration.protocolClasses ?? [])
        clientBehindAppProtocol = UpstreamClient(configuration: configuration)
    }

    override func tearDown() {
        client.shutdown()
        clientBehindAppProtocol.shutdown()
        origin.stop()
    }

    private func send(_ path: String, wholeBody: Bool, through client: UpstreamClient? = nil) async throws -> ReceivedResponse {
        let answered = expectation(description: "answered")
        let result = Locked<Result<ReceivedResponse, Error>?>(nil)
        _ = (client ?? self.client).send(URLRequest(url: origin.url(path)), wholeBody: wholeBody, clock: { Date() }, listener: nil) { outcome in
            result.withLock { $0 = outcome }
            answered.fulfill()
        }
        await fulfillment(of: [answered], timeout: 20)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

    func testAWholeBodyArrivesByteForByteAndRedirectsAreFollowed() async throws {
        let body = Data.pattern(3 << 20)
        origin.handle("/old") { _ in OriginResponse(status: 301, headers: [HTTPField("Location", "/big")]) }
        origin.handle("/big") { _ in OriginResponse(status: 200, headers: [HTTPField("ETag", "\"b\"")], body: body) }
        for wholeBody in [true, false] {
            for upstream in [client!, clientBehindAppProtocol!] {
                let response = try await send("/old", wholeBody: wholeBody, through: upstream)
                XCTAssertEqual(response.head.status, 200, "wholeBody \(wholeBody)")
                XCTAssertEqual(response.body, body, "wholeBody \(wholeBody)")
                XCTAssertEqual(response.head.response.url?.path, "/big", "followed, without a listener (wholeBody \(wholeBody))")
                XCTAssertEqual(response.head.headers["ETag"], "\"b\"")
            }
        }
    }

    /// A response whose listener says it may end in place reaches the completion where the
    /// transfer ended — on Linux inside the upstream session's callback, on corelibs' queue, where
    /// the loads' clients may be called directly (`UpstreamCallback`) — whole; any other off
    /// that queue. Also for a task Foundation collects (behind an app's protocol class).
    func testTheEndIsTakenInPlaceOnlyWhenTheListenerSaysSo() async throws {
        let body = Data.pattern(100_000)
        origin.handle("/page") { _ in OriginResponse(status: 200, body: body) }
        for inPlace in [true, false] {
            for (upstream, behindAppProtocol) in [(client!, false), (clientBehindAppProtocol!, true)] {
                let label = "in place \(inPlace), behind an app's protocol \(behindAppProtocol)"
                let answered = expectation(description: label)
                let ended = Locked<(Result<ReceivedResponse, Error>, inCallback: Bool)?>(nil)
                _ = upstream.send(URLRequest(url: origin.url("/page")), wholeBody: true, clock: { Date() },
                                  listener: StubListener(inPlace: inPlace)) { result in
                    #if canImport(FoundationNetworking)
                    let inCallback = UpstreamCallback.isRunning
                    #else
                    let inCallback = inPlace
                    #endif
                    ended.withLock { $0 = (result, inCallback) }
                    answered.fulfill()
                }
                await fulfillment(of: [answered], timeout: 20)
                let (result, inCallback) = try XCTUnwrap(ended.withLock { $0 })
                XCTAssertEqual(try result.get().body, body, label)
                XCTAssertEqual(inCallback, inPlace, label)
            }
        }
    }

    func testAChallengeEndsWithThe401AndItsBody() async throws {
        origin.handle("/members") { _ in
            OriginResponse(status: 401, headers: [HTTPField("WWW-Authenticate", "Basic realm=\"members\"")],
                           body: Data("who are you?".utf8))
        }
        for wholeBody in [true, false] {
            for (upstream, behindAppProtocol) in [(client!, false), (clientBehindAppProtocol!, true)] {
                origin.resetLog()
                let response = try await send("/members", wholeBody: wholeBody, through: upstream)
                let label = "wholeBody \(wholeBody), behind an app's protocol \(behindAppProtocol)"
                XCTAssertEqual(response.head.status, 401, label)
                XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "who are you?", label)
                // A completion-handler task (Linux, only behind an app's protocol) cannot end with
                // the 401 itself: it is sent again as a delegate task (one more request to the
                // origin, only for a challenge).
                #if canImport(FoundationNetworking)
                let completionHandlerTask = wholeBody && behindAppProtocol
                #else
                let completionHandlerTask = false
                #endif
                XCTAssertEqual(origin.requests(to: "/members").count, completionHandlerTask ? 2 : 1, label)
            }
        }
    }

    /// The room kept for a body is reserved from its declared `Content-Length`, which a server
    /// may make up: the reservation is capped (`Transfer.largestReservation`), so a length of
    /// terabytes ends as a body cut short, not as an allocation that traps.
    func testADeclaredLengthOfTerabytesEndsAsAShortBodyNotAHugeAllocation() async throws {
        origin.handle("/liar") { _ in OriginResponse(status: 200, body: Data("short".utf8), fault: .declaredLength(1 << 42)) }
        origin.handle("/honest") { _ in OriginResponse(status: 200, body: Data.pattern(1 << 20)) }
        do {
            let response = try await send("/liar", wholeBody: false)
            XCTFail("a body shorter than its Content-Length arrived as whole: \(response.body.count) bytes")
        } catch {
            XCTAssertNotNil(error as? URLError, "the transfer's own error: \(error)")
        }
        let honest = try await send("/honest", wholeBody: false)
        XCTAssertEqual(honest.body, Data.pattern(1 << 20), "a body as long as it declares arrives whole")
    }

    func testCancellingAWholeBodyRequestEndsItAsCancelled() async throws {
        origin.handle("/slow") { _ in OriginResponse(status: 200, body: Data("late".utf8), fault: .stall(30)) }
        let answered = expectation(description: "answered")
        let result = Locked<Result<ReceivedResponse, Error>?>(nil)
        let task = clientBehindAppProtocol.send(URLRequest(url: origin.url("/slow")), wholeBody: true, clock: { Date() },
                                                listener: nil) { outcome in
            result.withLock { $0 = outcome }
            answered.fulfill()
        }
        task.cancel()
        XCTAssertTrue(task.isCancelled)
        await fulfillment(of: [answered], timeout: 10)
        XCTAssertThrowsError(try XCTUnwrap(result.withLock { $0 }).get()) { error in
            XCTAssertEqual((error as? URLError)?.code, .cancelled)
        }
        XCTAssertLessThanOrEqual(origin.requests(to: "/slow").count, 1, "nothing is sent again after a cancel")
    }

    /// With the app's credential storage shared (`SessionSettings.upstreamConfiguration`), default
    /// handling of an HTTP authentication challenge may send a stored credential: that answer
    /// belongs to the credential like one the app gave. Server trust is no credential of the user's.
    func testWhichChallengeAnswersPutTheAppsCredentialOnTheRequest() {
        func space(_ method: String, proxy: Bool = false) -> URLProtectionSpace {
            proxy ? URLProtectionSpace(proxyHost: "proxy.example", port: 8080, type: NSURLProtectionSpaceHTTPProxy, realm: nil,
                                       authenticationMethod: method)
                  : URLProtectionSpace(host: "Example.com", port: 443, protocol: "https", realm: "members", authenticationMethod: method)
        }
        let alice = URLCredential(user: "alice", password: "secret", persistence: .forSession)
        let basic = space(NSURLAuthenticationMethodHTTPBasic)
        let trust = space(serverTrustAuthenticationMethod)
        let cases: [(URLProtectionSpace, URLSession.AuthChallengeDisposition, URLCredential?, Bool)] = [
            (basic, .useCredential, alice, true),
            (basic, .useCredential, nil, false),          // continue without a credential
            (basic, .performDefaultHandling, nil, true),  // the shared storage may hold one
            (basic, .cancelAuthenticationChallenge, nil, false),
            (basic, .rejectProtectionSpace, nil, false),
            (space(NSURLAuthenticationMethodHTTPDigest), .performDefaultHandling, nil, true),
            (trust, .useCredential, alice, false),
            (trust, .performDefaultHandling, nil, false),
        ]
        for (space, disposition, credential, expected) in cases {
            XCTAssertEqual(CredentialUse.carriesCredential(space.authenticationMethod, disposition, credential), expected,
                           "\(space.authenticationMethod) \(disposition.rawValue) \(credential?.user ?? "-")")
        }
        XCTAssertEqual(CredentialUse.origin(of: basic), "https://example.com:443")
        XCTAssertEqual(CredentialUse.origin(of: URL(string: "https://EXAMPLE.com/feed")!), "https://example.com:443",
                       "a URL without a port has its scheme's, so it matches the space the challenge named")
        XCTAssertEqual(CredentialUse.origin(of: URL(string: "http://example.com:8080/")!), "http://example.com:8080")
        XCTAssertNil(CredentialUse.origin(of: space(NSURLAuthenticationMethodHTTPBasic, proxy: true)), "a proxy is no origin")
    }

    /// Every load that waited left while the task was being made: it is cancelled before it
    /// starts, and the origin never sees it (it was resumed, then cancelled, before).
    func testATransferNobodyWantsWhenItStartsIsNeverSent() async throws {
        origin.handle("/item") { _ in .text("item") }
        for wholeBody in [true, false] {
            let answered = expectation(description: "answered")
            let result = Locked<Result<ReceivedResponse, Error>?>(nil)
            _ = clientBehindAppProtocol.send(URLRequest(url: origin.url("/item")), wholeBody: wholeBody, clock: { Date() },
                                             listener: StubListener(isWanted: false)) { outcome in
                result.withLock { $0 = outcome }
                answered.fulfill()
            }
            await fulfillment(of: [answered], timeout: 10)
            XCTAssertThrowsError(try XCTUnwrap(result.withLock { $0 }).get(), "wholeBody \(wholeBody)") { error in
                XCTAssertEqual((error as? URLError)?.code, .cancelled)
            }
        }
        // A request after them on the same session: by its answer, anything they sent has arrived.
        _ = try await send("/item", wholeBody: true, through: clientBehindAppProtocol)
        XCTAssertEqual(origin.requests(to: "/item").count, 1, "only the last request reached the origin")
    }
}

extension UpstreamClientTests {
    /// A send after `shutdown` ends as cancelled and reaches no origin: corelibs traps when a task
    /// is made on an invalidated session, and on Linux a send's task is made later, on a lane.
    func testASendAfterShutdownEndsAsCancelled() async throws {
        origin.handle("/late") { _ in .text("late") }
        let client = UpstreamClient(configuration: SessionSettings.standard.upstreamConfiguration { $0 == CachingURLProtocol.self })
        client.shutdown()
        let answered = expectation(description: "answered")
        let result = Locked<Result<ReceivedResponse, Error>?>(nil)
        _ = client.send(URLRequest(url: origin.url("/late")), clock: { Date() }, listener: nil) { outcome in
            result.withLock { $0 = outcome }
            answered.fulfill()
        }
        await fulfillment(of: [answered], timeout: 10)
        XCTAssertThrowsError(try XCTUnwrap(result.withLock { $0 }).get()) { error in
            XCTAssertEqual((error as? URLError)?.code, .cancelled)
        }
        XCTAssertEqual(origin.requests(to: "/late").count, 0)
    }
}

/// An app's protocol class that takes no request: the upstream session asks it first, then
/// Foundation's own.
private final class DecliningProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { false }
}

/// A listener that keeps every body whole, says whether anybody still waits for the transfer
/// and whether its end may be taken in place.
private struct StubListener: UpstreamListener {
    var isWanted = true
    var inPlace = false

    func upstreamDidReceiveChallenge(_ challenge: URLAuthenticationChallenge,
                                     answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        answer(.performDefaultHandling, nil)
    }

    func upstreamDidReceiveHead(_ head: ReceivedHead) -> BodyHandling { .keepWhole }
    func upstreamDidReceiveBody(_ data: Data) {}
    func upstreamBodyPassesLimit() -> Bool { false }
    func upstreamMayEndInPlace(_ response: ReceivedResponse) -> Bool { inPlace }
}
