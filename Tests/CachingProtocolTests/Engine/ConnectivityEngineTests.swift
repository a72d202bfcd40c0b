import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A session that waits for connectivity (Apple's `waitsForConnectivity`), at the engine seam with
/// Apple's setting given to the settings on Linux (corelibs does not implement it). Without the
/// layer such a task waits until the network is back and then loads; through the layer, the
/// upstream request does not wait, so what the cache may answer after an error comes at once,
/// and when it may answer nothing the request goes again through an upstream session that waits.
final class ConnectivityEngineTests: EngineTestCase {
    private let url = URL(string: "https://example.com/feed")!
    private var key: String { CacheKey.make(method: "GET", url: url) }
    private let waiting = SessionSettings(URLSessionConfiguration.default, waitsForConnectivity: true)

    private func load(from settings: SessionSettings) -> RecordingLoadClient {
        let client = RecordingLoadClient()
        engine.startLoad(CacheRequest(URLRequest(url: url), key: key), from: settings, client: client)
        return client
    }

    /// Stores a response with `ETag "v1"` and `cacheControl` for the waiting session, lets it go
    /// stale, loads it again, and fails the revalidation for want of connectivity; the load's
    /// client, or nil (a failure recorded) when the revalidation was not sent.
    private func revalidationFailingForWantOfConnectivity(cacheControl: String, file: StaticString = #filePath,
                                                          line: UInt = #line) -> RecordingLoadClient? {
        storeFetched(["ETag": "\"v1\"", "Cache-Control": cacheControl], from: waiting)
        clock.advance(by: 120)
        let client = load(from: waiting)
        guard upstream.waitForRequests(2) else {
            XCTFail("request 2 not sent", file: file, line: line)
            return nil
        }
        upstream.fail(1, URLError(.notConnectedToInternet))
        return client
    }

    /// Stores a response with `headers`, fetched for a session with `settings`.
    private func storeFetched(_ headers: [String: String], from settings: SessionSettings) {
        let number = upstream.sent.count
        let client = load(from: settings)
        guard upstream.waitForRequests(number + 1) else { return XCTFail("not fetched") }
        upstream.respond(number, status: 200, headers: headers, body: Data("stored".utf8))
        wait(for: [client.answered], timeout: 10)
    }

    func testTheSettingsRecordTheSessionsWaitingAndTheUpstreamSessionDoesNotWaitFirst() {
        XCTAssertTrue(waiting.waitsForConnectivity)
        XCTAssertFalse(waiting.upstreamWaitsForConnectivity, "the first request fails at once")
        XCTAssertTrue(waiting.waitingForConnectivity.upstreamWaitsForConnectivity)
        XCTAssertTrue(waiting.waitingForConnectivity.waitsForConnectivity)
        XCTAssertNotEqual(waiting.waitingForConnectivity.upstreamKey, waiting.upstreamKey, "an upstream session of its own")
        XCTAssertNotEqual(waiting, SessionSettings(URLSessionConfiguration.default), "told apart from a session that does not wait")
        XCTAssertFalse(SessionSettings.standard.waitsForConnectivity)
        #if canImport(FoundationNetworking)
        XCTAssertFalse(SessionSettings(URLSessionConfiguration.default).waitsForConnectivity, "corelibs never waits")
        #endif
    }

    /// Nothing stored: the request that found no network goes again through the upstream session
    /// that waits, and the load gets what that one brings when the network is back.
    func testAMissWaitsForConnectivityAsTheSessionWould() {
        let client = load(from: waiting)
        guard upstream.waitForRequests(1) else { return XCTFail("request 1 not sent") }
        XCTAssertFalse(upstream.sent[0].settings.upstreamWaitsForConnectivity)
        upstream.fail(0, URLError(.notConnectedToInternet))
        guard upstream.waitForRequests(2) else { return XCTFail("not sent again") }
        XCTAssertTrue(upstream.sent[1].settings.upstreamWaitsForConnectivity, "through the upstream session that waits")
        XCTAssertEqual(upstream.sent[1].request.url, url)
        XCTAssertEqual(client.summary, "no answer", "the load waits")
        upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("back".utf8))
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.summary, "200 back")
        XCTAssertEqual(store.entry(key)?.body, Data("back".utf8))
    }

    /// A stale answer the policy may give after an error comes at once: nothing waits.
    func testAStaleAnswerAfterTheErrorComesAtOnce() {
        guard let client = revalidationFailingForWantOfConnectivity(cacheControl: "max-age=60") else { return }
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.summary, "200 stored")
        XCTAssertEqual(client.outcome, .staleAfterError)
        XCTAssertEqual(upstream.sent.count, 2, "not sent again")
    }

    /// `must-revalidate`: the cache may not answer unvalidated, so the request waits (as the
    /// app's task would) instead of answering 504.
    func testAMustRevalidateEntryWaitsForTheOrigin() {
        guard let client = revalidationFailingForWantOfConnectivity(cacheControl: "max-age=60, must-revalidate") else { return }
        guard upstream.waitForRequests(3) else { return XCTFail("not sent again") }
        XCTAssertTrue(upstream.sent[2].settings.upstreamWaitsForConnectivity)
        XCTAssertEqual(upstream.sent[2].header("If-None-Match"), "\"v1\"", "the same revalidation")
        upstream.respond(2, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60, must-revalidate"])
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.summary, "200 stored")
        XCTAssertEqual(client.outcome, .revalidatedNotModified)
    }

    /// What the waiting request fails with is the answer (no third attempt), and errors other
    /// than missing connectivity, or a session that does not wait, fail at once as before.
    func testOnlyMissingConnectivityOfAWaitingSessionIsSentAgainAndOnlyOnce() {
        let first = load(from: waiting)
        guard upstream.waitForRequests(1) else { return XCTFail("request 1 not sent") }
        upstream.fail(0, URLError(.notConnectedToInternet))
        guard upstream.waitForRequests(2) else { return XCTFail("request 2 not sent") }
        upstream.fail(1, URLError(.timedOut))
        wait(for: [first.answered], timeout: 10)
        XCTAssertEqual(first.summary, "error \(URLError.Code.timedOut.rawValue)")

        let unreachable = load(from: waiting)
        guard upstream.waitForRequests(3) else { return XCTFail("request 3 not sent") }
        upstream.fail(2, URLError(.cannotConnectToHost))
        wait(for: [unreachable.answered], timeout: 10)
        XCTAssertEqual(unreachable.summary, "error \(URLError.Code.cannotConnectToHost.rawValue)", "the host refused: no wait")

        let notWaiting = load(from: .standard)
        guard upstream.waitForRequests(4) else { return XCTFail("request 4 not sent") }
        upstream.fail(3, URLError(.notConnectedToInternet))
        wait(for: [notWaiting.answered], timeout: 10)
        XCTAssertEqual(notWaiting.summary, "error \(URLError.Code.notConnectedToInternet.rawValue)")
        XCTAssertEqual(upstream.sent.count, 4)
        XCTAssertTrue(CacheEngine.isConnectivityUnavailable(URLError(.dataNotAllowed)))
        XCTAssertFalse(CacheEngine.isConnectivityUnavailable(URLError(.networkConnectionLost)), "lost once made: no wait")
    }
}
