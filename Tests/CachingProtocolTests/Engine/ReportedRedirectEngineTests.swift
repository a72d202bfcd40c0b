import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A redirect reported to the app's session (Apple, `RedirectHandling.report`), at the engine
/// seam: not followed upstream, and the answer carries the 3xx with its body, for the session to
/// deliver when its delegate refuses (`ClientDelivery`).
final class ReportedRedirectEngineTests: XCTestCase {
    private var upstream: FakeUpstream!
    private var store: FakeStore!
    private var engine: CacheEngine!
    private var directory: URL!
    private let url = URL(string: "https://example.com/old")!

    override func setUpWithError() throws {
        let clock = ManualClock()
        upstream = FakeUpstream(clock: clock.read)
        store = FakeStore()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ReportedRedirectEngineTests-\(UUID().uuidString)")
        let configuration = CachingConfiguration(cache: CachingURLCache(memoryCapacity: 0, diskCapacity: 0, directory: directory),
                                                 now: clock.read)
        engine = CacheEngine(configuration: configuration, store: store, upstream: upstream)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    func testAReportedRedirectIsNotFollowedAndItsAnswerCarriesThe3xxAndItsBody() throws {
        let key = CacheKey.make(method: "GET", url: url)
        let client = RecordingLoadClient(redirects: .report)
        guard case .planned(let planned) = engine.start(CacheRequest(URLRequest(url: url), key: key), from: .standard) else {
            return XCTFail("nothing stored: the load goes on")
        }
        _ = engine.proceed(planned, client: client)
        upstream.waitForRequests(1)
        XCTAssertEqual(upstream.redirect(0, status: 302, to: URL(string: "https://example.com/new")!), "stop",
                       "the app's session decides, not the upstream session")
        let body = Data("<a href=\"/new\">moved</a>".utf8)
        upstream.respond(0, status: 302, headers: ["Location": "https://example.com/new", "Cache-Control": "max-age=60"], body: body)
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.summary, "redirect 302 /new")
        XCTAssertEqual(client.redirectBody, body, "the 3xx's body, for a session whose delegate refuses")
        XCTAssertNil(store.entry(key), "a reported redirect is not stored")
        XCTAssertEqual(upstream.sent.count, 1)
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
