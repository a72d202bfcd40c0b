import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `cancel()` of a data task without and with the layer: a task of the session's delegate, a
/// completion-handler task and an `async` call, cancelled before the response, after the first
/// bytes, and while joined to another load's upstream request. The app sees the same calls and
/// the same cancellation error (`NSURLErrorCancelled`, -999) at once; the origin sees its
/// request abandoned as without the layer (`LoopbackOrigin.responsesAbandoned`); nothing
/// half-received is stored.
final class DataTaskCancellationPairTests: CachingTestCase {
    /// The issue's slow body: 27 bytes the origin sends 9 at a time, 2 s apart, storable. A load
    /// that ran to its end would take 4 s.
    private let slowBody = Data.pattern(27, seed: 24)

    override func setUpWithError() throws {
        try super.setUpWithError()
        let body = slowBody
        let storable = [HTTPField("Cache-Control", "max-age=600")]
        origin.handle("/slow") { _ in
            OriginResponse(status: 200, headers: storable, body: body, transfer: .paced(chunkSize: 9, interval: 2))
        }
        origin.handle("/late") { _ in OriginResponse(status: 200, headers: storable, body: body, fault: .stall(4)) }
        // Fast enough to wait for its end: 0.6 s.
        origin.handle("/shared") { _ in
            OriginResponse(status: 200, headers: storable, body: body, transfer: .paced(chunkSize: 9, interval: 0.3))
        }
    }

    private var pair: TransparencyPair { TransparencyPair(origin: origin) }

    /// When the app cancels.
    private enum Moment {
        /// Once the request reached the origin, which holds its response back (`/late`).
        case beforeTheResponse
        /// Once the origin sent the first piece of the body (`/slow`).
        case afterTheFirstBytes

        var path: String { self == .beforeTheResponse ? "/late" : "/slow" }
    }

    // MARK: A task of the session's delegate

    func testADelegateTaskCancelledBeforeTheResponse() async throws {
        let taken = Locked<[Bool]>([])
        let (without, with) = try await pair.observe(delegate: { AppDelegate(recordsBody: true) }, caching: configuration) { session, delegate in
            let task = session.dataTask(with: origin.url("/late"))
            taken.withLock { $0.append(session.layerTakes(origin.url("/late"))) }
            await cancel(task, at: .beforeTheResponse)
            await fulfillment(of: [delegate.done], timeout: 20)
            return await aftermath("/late")
        }
        XCTAssertEqual(without.delegateCalls, ["complete error -999"], "\(without)")
        XCTAssertEqual(without.result, "origin: 1 abandoned, part of the body sent; stored: nothing")
        XCTAssertEqual(with, without)
        XCTAssertEqual(taken.withLock { $0 }, [false, true], "the layer took the request")
    }

    /// The issue's case: the delegate cancels on the first bytes. Without the layer it gets them at
    /// once, then the cancellation error; before this round, through the layer it got nothing for
    /// 4 s, then all 27 bytes and a completion without error.
    func testADelegateTaskCancelledByItsDelegateOnTheFirstBytes() async throws {
        let taken = Locked<[Bool]>([])
        let (without, with) = try await pair.observe(delegate: { AppDelegate(recordsBody: true, onFirstBody: { $0.cancel() }) },
                                                     caching: configuration) { session, delegate in
            taken.withLock { $0.append(session.layerTakes(origin.url("/slow"))) }
            session.dataTask(with: origin.url("/slow")).resume()
            await fulfillment(of: [delegate.done], timeout: 20)
            return await aftermath("/slow")
        }
        XCTAssertEqual(without.delegateCalls, ["response 200", "data 9", "complete error -999"], "\(without)")
        XCTAssertEqual(without.result, "origin: 1 abandoned, part of the body sent; stored: nothing")
        XCTAssertEqual(with, without)
        XCTAssertEqual(taken.withLock { $0 }, [false, true], "the layer took the request")
    }

    // MARK: A completion-handler task

    func testACompletionHandlerTaskCancelledBeforeTheResponse() async throws {
        try await assertCompletionHandlerTaskCancelled(at: .beforeTheResponse)
    }

    func testACompletionHandlerTaskCancelledAfterTheFirstBytes() async throws {
        try await assertCompletionHandlerTaskCancelled(at: .afterTheFirstBytes)
    }

    /// Alamofire resumes every task it cancels (to gather metrics): before this round that second
    /// `resume()` started a second load through the layer, which the cancellation never reached.
    func testACompletionHandlerTaskCancelledAsAlamofireDoesAfterTheFirstBytes() async throws {
        try await assertCompletionHandlerTaskCancelled(at: .afterTheFirstBytes, resumingFirst: true)
    }

    private func assertCompletionHandlerTaskCancelled(at moment: Moment, resumingFirst: Bool = false, line: UInt = #line) async throws {
        let taken = Locked<[Bool]>([])
        let (without, with) = try await pair.observe(caching: configuration) { session, _ in
            let (task, outcome) = completionHandlerTask(origin.url(moment.path), in: session)
            taken.withLock { $0.append(session.layerTakes(origin.url(moment.path))) }
            await cancel(task, at: moment, resumingFirst: resumingFirst)
            return "\(await outcome()) | \(await aftermath(moment.path))"
        }
        XCTAssertEqual(without.result, "error -999 | origin: 1 abandoned, part of the body sent; stored: nothing", line: line)
        XCTAssertEqual(without.delegateCalls, [], line: line)
        XCTAssertEqual(with, without, line: line)
        XCTAssertEqual(taken.withLock { $0 }, [false, true], "the layer took the request", line: line)
    }

    // MARK: An async call

    func testAnAsyncCallCancelledBeforeTheResponse() async throws {
        let taken = Locked<[Bool]>([])
        let (without, with) = try await pair.observe(caching: configuration) { session, _ in
            let url = origin.url("/late")
            taken.withLock { $0.append(session.layerTakes(url)) }
            let call = Task { await Self.describe { try await session.data(from: url) } }
            await cancel(nil, at: .beforeTheResponse)
            call.cancel()
            return "\(await value(of: call, within: 20) ?? "no end") | \(await aftermath("/late"))"
        }
        XCTAssertEqual(without.result, "error -999 | origin: 1 abandoned, part of the body sent; stored: nothing")
        XCTAssertEqual(with, without)
        XCTAssertEqual(taken.withLock { $0 }, [false, true], "the layer took the request")
    }

    /// The call's own delegate (`data(from:delegate:)`) sees the first bytes; the app then cancels
    /// the call.
    func testAnAsyncCallCancelledWhenItsDelegateSeesTheFirstBytes() async throws {
        let taken = Locked<[Bool]>([])
        let (without, with) = try await pair.observe(caching: configuration) { session, _ in
            let url = origin.url("/slow")
            taken.withLock { $0.append(session.layerTakes(url)) }
            let firstBytes = XCTestExpectation(description: "the call's delegate got the first bytes")
            let callDelegate = AppDelegate(recordsBody: true, onFirstBody: { _ in firstBytes.fulfill() })
            let call = Task { await Self.describe { try await session.data(from: url, delegate: callDelegate) } }
            await fulfillment(of: [firstBytes], timeout: 20)
            call.cancel()
            return "\(await value(of: call, within: 20) ?? "no end") delegate: \(callDelegate.calls) | \(await aftermath("/slow"))"
        }
        XCTAssertEqual(without.result, "error -999 delegate: [\"response 200\", \"data 9\"] | "
                       + "origin: 1 abandoned, part of the body sent; stored: nothing")
        XCTAssertEqual(with, without)
        XCTAssertEqual(taken.withLock { $0 }, [false, true], "the layer took the request")
    }

    // MARK: Joined to another load's request

    /// Two completion-handler tasks for one URL on a session without a delegate: through the layer
    /// the second joins the first's upstream request. Cancelling it leaves that request alone: the
    /// first gets the whole body, the origin sends it once, whole, and it is stored.
    func testACompletionHandlerTaskCancelledWhileJoinedLeavesTheSharedRequestAlone() async throws {
        try await assertCancelledWhileJoined { session in
            let (first, firstOutcome) = completionHandlerTask(origin.url("/shared"), in: session)
            first.resume()
            await waitUntilTheFirstBytesLeft()
            let (second, secondOutcome) = completionHandlerTask(origin.url("/shared"), in: session)
            second.resume()
            await waitUntilJoinedOrSent(session)
            second.cancel()
            return "first: \(await firstOutcome()) second: \(await secondOutcome())"
        }
    }

    func testAnAsyncCallCancelledWhileJoinedLeavesTheSharedRequestAlone() async throws {
        try await assertCancelledWhileJoined { session in
            let url = origin.url("/shared")
            let first = Task { await Self.describe { try await session.data(from: url) } }
            await waitUntilTheFirstBytesLeft()
            let second = Task { await Self.describe { try await session.data(from: url) } }
            await waitUntilJoinedOrSent(session)
            second.cancel()
            return "first: \(await value(of: first, within: 20) ?? "no end") second: \(await value(of: second, within: 20) ?? "no end")"
        }
    }

    /// Runs `loads` (two loads of `/shared`, the second cancelled) on a session without a delegate,
    /// without and with the layer: the app sees the same; without the layer the origin gets two
    /// requests and abandons the second, with it one request, sent whole and stored.
    private func assertCancelledWhileJoined(line: UInt = #line, _ loads: (URLSession) async -> String) async throws {
        let traffic = Locked<[String]>([])
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: configuration) { session, _ in
            let outcome = await loads(session)
            // Every request the origin got has ended: the first written whole, the others abandoned.
            let origin = self.origin!
            await fulfillment(of: [expectation(until: "every request ended") {
                origin.bodyBytesSent >= 27 && origin.responsesAbandoned + 1 >= origin.requests(to: "/shared").count
            }], timeout: 10)
            traffic.withLock { $0.append("\(origin.requests(to: "/shared").count) requests, \(origin.responsesAbandoned) abandoned") }
            return outcome
        }
        XCTAssertEqual(without.result, "first: 200, 27 bytes, same bytes second: error -999", line: line)
        XCTAssertEqual(with, without.with(originTraffic: with.originTraffic), "what the app sees", line: line)
        XCTAssertEqual(traffic.withLock { $0 }, ["2 requests, 1 abandoned", "1 requests, 0 abandoned"], line: line)
        // The layer's own traffic: one request, not cancelled, the whole body sent once and stored.
        XCTAssertEqual(origin.bodyBytesSent, slowBody.count, "the origin sent the whole body, once", line: line)
        XCTAssertEqual(storedBody("/shared"), slowBody, line: line)
        XCTAssertEqual(configuration.statistics.fetched, 1, "the first load; the cancelled one is not answered", line: line)
    }

    // MARK: Helpers

    /// Resumes `task` (nil: the app started its load already) and cancels it at `moment`;
    /// `resumingFirst`: resumes it again just before, as Alamofire does.
    private func cancel(_ task: URLSessionTask?, at moment: Moment, resumingFirst: Bool = false) async {
        task?.resume()
        let origin = self.origin!
        let path = moment.path
        let reached = expectation(until: "the request reached the origin, or its first bytes left") {
            moment == .beforeTheResponse ? !origin.requests(to: path).isEmpty : origin.bodyBytesSent > 0
        }
        await fulfillment(of: [reached], timeout: 10)
        if resumingFirst { task?.resume() }
        task?.cancel()
    }

    /// Waits until the origin sent the first piece of a body.
    private func waitUntilTheFirstBytesLeft() async {
        let origin = self.origin!
        await fulfillment(of: [expectation(until: "the first bytes left the origin") { origin.bodyBytesSent > 0 }], timeout: 10)
    }

    /// Waits until a second load of `/shared` is on its way: joined to the first one's exchange
    /// through the layer, at the origin without it.
    private func waitUntilJoinedOrSent(_ session: URLSession) async {
        let origin = self.origin!
        let exchanges = Installation.engine(for: configuration).exchanges
        let throughTheLayer = session.configuration.protocolClasses?.first is CachingURLProtocol.Type
        let joined = expectation(until: "the second load joined the first's exchange, or reached the origin") {
            throughTheLayer ? exchanges.waitingLoadCount == 2 : origin.requests(to: "/shared").count == 2
        }
        await fulfillment(of: [joined], timeout: 10)
    }

    /// A completion-handler task for `url`, not resumed, and a way to wait for what it got.
    private func completionHandlerTask(_ url: URL, in session: URLSession) -> (URLSessionDataTask, () async -> String) {
        let finished = XCTestExpectation(description: "the completion handler ran")
        let outcome = Locked("")
        let body = slowBody
        let task = session.dataTask(with: url) { data, response, error in
            outcome.withLock { $0 = Self.describe(data, response, error, expected: body) }
            finished.fulfill()
        }
        return (task, {
            await self.fulfillment(of: [finished], timeout: 20)
            return outcome.withLock { $0 }
        })
    }

    /// Once the app cancelled: waits until the origin's response ended (abandoned by its client,
    /// or written whole: `total` body bytes) and says which, with what the cache holds for `path`.
    private func aftermath(_ path: String, total: Int = 27) async -> String {
        let origin = self.origin!
        let ended = expectation(until: "the origin's response ended") {
            origin.responsesAbandoned > 0 || origin.bodyBytesSent >= total
        }
        await fulfillment(of: [ended], timeout: 10)
        cache.waitUntilSettled()
        let stored = storedBody(path)
        return "origin: \(origin.responsesAbandoned) abandoned, \(origin.bodyBytesSent < total ? "part" : "all") of the body sent; "
            + "stored: \(stored.map { "\($0.count) bytes" } ?? "nothing")"
    }

    private static func describe(_ load: () async throws -> (Data, URLResponse)) async -> String {
        do {
            let (data, response) = try await load()
            return describe(data, response, nil, expected: Data.pattern(27, seed: 24))
        } catch {
            return describe(nil, nil, error, expected: Data())
        }
    }

    private static func describe(_ data: Data?, _ response: URLResponse?, _ error: Error?, expected: Data) -> String {
        if let error { return "error \((error as? URLError)?.code.rawValue ?? -1)" }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return "\(status), \(data?.count ?? 0) bytes, \(data == expected ? "same bytes" : "other bytes")"
    }
}
