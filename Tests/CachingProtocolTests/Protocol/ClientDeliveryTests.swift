import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import CachingProtocol

/// The delivery seam as a unit: where client calls run (an injected executor stands in for
/// Apple's client thread), streamed versus whole bodies, redirect reports and forwarded
/// challenges, and nothing after `stopLoading`. Both platforms' rules run here, on Linux.
final class ClientDeliveryTests: LoaderRulesTestCase {
    private let url = URL(string: "https://example.com/feed")!
    private var response: HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": "text/plain"])!
    }

    private static let apple = ClientDelivery.Rules.apple
    private static let linux = ClientDelivery.Rules(streamsBodies: false, holdsLockAcrossClientCalls: true,
                                                    forwardsChallenges: false, reportsRedirects: false)

    private func make(_ rules: ClientDelivery.Rules, executor: ClientExecutor) -> (ClientDelivery, RecordingClient, URLProtocol) {
        let client = RecordingClient()
        let owner = URLProtocol(request: URLRequest(url: url), cachedResponse: nil, client: client)
        return (ClientDelivery(owner: owner, executor: executor, rules: rules), client, owner)
    }

    func testEveryClientCallRunsOnTheExecutorNeverOnTheCallersThread() {
        let executor = QueuedExecutor()
        let (delivery, client, owner) = make(Self.apple, executor: executor)
        DispatchQueue.global().sync {   // the engine's queue, say
            delivery.deliverHead(response)
            delivery.deliverChunk(Data("he".utf8))
            delivery.deliverChunk(Data("llo".utf8))
            delivery.deliver(.response(response, Data("hello".utf8)))
        }
        XCTAssertEqual(client.calls, [], "nothing before the client thread runs")
        XCTAssertEqual(executor.pending, 4)
        executor.runAll()
        XCTAssertEqual(client.calls, ["response 200", "data 2", "data 3", "finish"],
                       "streamed: the head, each piece as it came, then only the end")
        withExtendedLifetime(owner) {}
    }

    func testLinuxRulesDeliverTheWholeBodyInOneDidLoad() {
        let (delivery, client, owner) = make(Self.linux, executor: CallingThreadExecutor())
        delivery.deliver(.response(response, Data("hello".utf8)))
        XCTAssertEqual(client.calls, ["response 200", "data 5", "finish"])
        withExtendedLifetime(owner) {}
    }

    func testNothingReachesTheClientAfterStopLoading() {
        for rules in [Self.apple, Self.linux] {
            let executor = QueuedExecutor()
            let (delivery, client, owner) = make(rules, executor: executor)
            delivery.deliverHead(response)
            executor.runAll()
            delivery.deliverChunk(Data("late".utf8))   // queued before the stop…
            delivery.stop()
            executor.runAll()                          // …and dropped when it runs
            delivery.deliver(.response(response, Data("late".utf8)))
            executor.runAll()
            XCTAssertEqual(client.calls, ["response 200"])
            XCTAssertTrue(delivery.isStopped)
            withExtendedLifetime(owner) {}
        }
    }

    func testTheAnswerEndsTheLoadOnce() {
        let (delivery, client, owner) = make(Self.linux, executor: CallingThreadExecutor())
        delivery.deliver(.failure(URLError(.timedOut)))
        delivery.deliver(.response(response, Data()))
        XCTAssertEqual(client.calls, ["fail -1001"])
        withExtendedLifetime(owner) {}
    }

    // MARK: After a streamed head

    /// The same response as `response` as the layer ends it: another `Cache-Status`, the rest
    /// the same.
    private func sameResponse(cacheStatus: String) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                        headerFields: ["Content-Type": "text/plain", "Cache-Status": cacheStatus])!
    }

    /// Once a response's head went to the client, the load ends without an error only with the
    /// end of that response; anything else — a stored copy, the cache's 504, a redirect — fails
    /// it with the error of a connection lost mid-body. An error stays that error.
    func testAfterAStreamedHeadOnlyTheEndOfThatResponseEndsTheLoad() {
        let stored = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                     headerFields: ["Content-Type": "text/plain", "ETag": "\"old\"", "Age": "61"])!
        let gatewayTimeout = HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: ["Content-Length": "0"])!
        let redirect = Answer.redirect(HTTPURLResponse(url: url, statusCode: 302, httpVersion: "HTTP/1.1", headerFields: ["Location": "/new"])!,
                                       Data(), to: URLRequest(url: URL(string: "https://example.com/new")!))
        let lost = "fail \(URLError.Code.networkConnectionLost.rawValue)"
        let endings: [(String, Answer, String)] = [
            ("the same response", .response(sameResponse(cacheStatus: "CachingProtocol; fwd=uri-miss; stored"), Data("hello".utf8)), "finish"),
            ("a stored copy", .response(stored, Data("old".utf8)), lost),
            ("the cache's 504", .response(gatewayTimeout, Data()), lost),
            ("a redirect", redirect, lost),
            ("an error", .failure(URLError(.timedOut)), "fail -1001"),
        ]
        var linuxStreaming = Self.linux
        linuxStreaming.streamsBodies = true
        for rules in [Self.apple, linuxStreaming] {
            for (name, ending, last) in endings {
                let (delivery, client, owner) = make(rules, executor: CallingThreadExecutor())
                delivery.deliverHead(sameResponse(cacheStatus: "CachingProtocol; fwd=uri-miss"))
                delivery.deliverChunk(Data("he".utf8))
                delivery.deliver(ending)
                XCTAssertEqual(client.calls, ["response 200", "data 2", last], name)
                XCTAssertTrue(delivery.isStopped, name)
                withExtendedLifetime(owner) {}
            }
        }
    }

    /// The delegate of an `async` call took the pieces as they came; the call gets the whole
    /// body at the end — only when it is the body those pieces were of, byte count and all.
    func testAnAsyncCallGetsTheWholeBodyOnlyWhenItIsTheOneItsDelegateTook() {
        for (body, expected) in [("hello", ["response 200", "data 5", "finish"]),
                                 ("hello, world", ["response 200", "fail \(URLError.Code.networkConnectionLost.rawValue)"]),
                                 ("hel", ["response 200", "fail \(URLError.Code.networkConnectionLost.rawValue)"])] {
            let (delivery, client, owner) = make(Self.linux, executor: CallingThreadExecutor())
            delivery.bodyDelivery = .wholeAndRelayedAsItArrives
            delivery.deliverHead(response)
            delivery.deliverChunk(Data("he".utf8))
            delivery.deliverChunk(Data("llo".utf8))
            delivery.deliver(.response(response, Data(body.utf8)))
            XCTAssertEqual(client.calls, expected, body)
            withExtendedLifetime(owner) {}
        }
    }

    /// A load takes one response: the head of a second one is not delivered, nor what follows
    /// it, and the load fails at its end.
    func testASecondHeadIsNotDeliveredAndTheLoadFails() {
        let (delivery, client, owner) = make(Self.apple, executor: CallingThreadExecutor())
        delivery.deliverHead(response)
        delivery.deliverChunk(Data("he".utf8))
        delivery.deliverHead(HTTPURLResponse(url: url, statusCode: 500, httpVersion: "HTTP/1.1", headerFields: [:])!)
        delivery.deliverChunk(Data("oops".utf8))
        delivery.deliver(.response(response, Data("heoops".utf8)))
        XCTAssertEqual(client.calls, ["response 200", "data 2", "fail \(URLError.Code.networkConnectionLost.rawValue)"])
        withExtendedLifetime(owner) {}
    }

    func testARedirectIsReportedThenTheLoadEndsAsCancelled() {
        let (delivery, client, owner) = make(Self.apple, executor: CallingThreadExecutor())
        let moved = HTTPURLResponse(url: url, statusCode: 302, httpVersion: "HTTP/1.1", headerFields: ["Location": "/new"])!
        delivery.deliver(.redirect(moved, Data("moved".utf8), to: URLRequest(url: URL(string: "https://example.com/new")!)))
        XCTAssertEqual(client.calls, ["redirect 302 to https://example.com/new", "fail \(CocoaError.userCancelled.rawValue)"])
        withExtendedLifetime(owner) {}
    }

    /// Apple's rules, a redirect the app's session may refuse (its delegate, or the task's, decides
    /// redirects): the report, then the 3xx, its body and the end, all in the same client-thread
    /// turn. A session whose delegate refuses delivers them to the task as its answer (Apple's
    /// documentation of `willPerformHTTPRedirection`); one that follows stops this load and drops
    /// them. Nothing tells a protocol of a refusal, so they cannot wait for one.
    func testARedirectTheSessionMayRefuseIsReportedThenItsResponseBodyAndEndFollowInOneTurn() {
        let executor = QueuedExecutor()
        let (delivery, client, owner) = make(Self.apple, executor: executor)
        delivery.redirectsMayBeRefused = true
        let moved = HTTPURLResponse(url: url, statusCode: 302, httpVersion: "HTTP/1.1",
                                    headerFields: ["Location": "/new", "Content-Type": "text/html"])!
        let body = Data("<a href=\"/new\">moved</a>".utf8)
        delivery.deliver(.redirect(moved, body, to: URLRequest(url: URL(string: "https://example.com/new")!)))
        XCTAssertEqual(executor.pending, 1, "one client-thread turn: nothing of the session's runs between the calls")
        executor.runAll()
        XCTAssertEqual(client.calls, ["redirect 302 to https://example.com/new", "response 302", "data \(body.count)", "finish"])
        XCTAssertTrue(delivery.isStopped)
        delivery.stop()   // the session following: stopLoading after the report
        delivery.deliver(.response(response, Data("late".utf8)))
        executor.runAll()
        XCTAssertEqual(client.calls.count, 4, "nothing after the end")
        withExtendedLifetime(owner) {}
    }

    func testARefusableRedirectWithAnEmptyBodySendsNoData() {
        let (delivery, client, owner) = make(Self.apple, executor: CallingThreadExecutor())
        delivery.redirectsMayBeRefused = true
        let moved = HTTPURLResponse(url: url, statusCode: 301, httpVersion: "HTTP/1.1", headerFields: ["Location": "/new"])!
        delivery.deliver(.redirect(moved, Data(), to: URLRequest(url: URL(string: "https://example.com/new")!)))
        XCTAssertEqual(client.calls, ["redirect 301 to https://example.com/new", "response 301", "finish"])
        withExtendedLifetime(owner) {}
    }

    func testARedirectStoppedBeforeItsTurnReachesNothing() {
        let executor = QueuedExecutor()
        let (delivery, client, owner) = make(Self.apple, executor: executor)
        delivery.redirectsMayBeRefused = true
        let moved = HTTPURLResponse(url: url, statusCode: 302, httpVersion: "HTTP/1.1", headerFields: ["Location": "/new"])!
        delivery.deliver(.redirect(moved, Data("moved".utf8), to: URLRequest(url: URL(string: "https://example.com/new")!)))
        delivery.stop()
        executor.runAll()
        XCTAssertEqual(client.calls, [])
        withExtendedLifetime(owner) {}
    }

    func testAForwardedChallengeRelaysTheAppsAnswerOnce() throws {
        let executor = QueuedExecutor()
        let (delivery, client, owner) = make(Self.apple, executor: executor)
        let answers = Locked<[String]>([])
        let challenge = URLAuthenticationChallenge(
            protectionSpace: URLProtectionSpace(host: "example.com", port: 443, protocol: "https", realm: "members",
                                                authenticationMethod: NSURLAuthenticationMethodHTTPBasic),
            proposedCredential: nil, previousFailureCount: 0, failureResponse: nil, error: nil, sender: RecordingClient.NoSender())
        delivery.forward(challenge) { disposition, credential in
            answers.withLock { $0.append("\(disposition.rawValue) \(credential?.user ?? "-")") }
        }
        XCTAssertEqual(client.calls, [], "the challenge waits for the client thread")
        executor.runAll()
        XCTAssertEqual(client.calls, ["challenge members"])
        let forwarded = try XCTUnwrap(client.challenges.first)
        let credential = URLCredential(user: "alice", password: "secret", persistence: .forSession)
        forwarded.sender?.use(credential, for: forwarded)
        forwarded.sender?.cancel(forwarded)   // a second answer is ignored
        XCTAssertEqual(answers.withLock { $0 }, ["\(URLSession.AuthChallengeDisposition.useCredential.rawValue) alice"])
        withExtendedLifetime(owner) {}
    }

    func testLinuxRulesGiveChallengesDefaultHandling() {
        let (delivery, client, owner) = make(Self.linux, executor: CallingThreadExecutor())
        let answers = Locked<[URLSession.AuthChallengeDisposition]>([])
        let challenge = Self.digestChallenge()
        delivery.forward(challenge) { disposition, _ in answers.withLock { $0.append(disposition) } }
        XCTAssertEqual(answers.withLock { $0 }, [.performDefaultHandling])
        XCTAssertEqual(client.calls, [])
        withExtendedLifetime(owner) {}
    }

    func testAChallengeForAStoppedLoadIsCancelled() {
        let (delivery, _, owner) = make(Self.apple, executor: QueuedExecutor())
        delivery.stop()
        let answers = Locked<[URLSession.AuthChallengeDisposition]>([])
        let challenge = Self.digestChallenge()
        delivery.forward(challenge) { disposition, _ in answers.withLock { $0.append(disposition) } }
        XCTAssertEqual(answers.withLock { $0 }, [.cancelAuthenticationChallenge])
        withExtendedLifetime(owner) {}
    }

    /// A challenge the app has not answered when its load stops is cancelled, whether it reached
    /// the client or was still on its way; the app's answer after that changes nothing.
    func testAChallengeStillUnansweredWhenTheLoadStopsIsCancelled() throws {
        let executor = QueuedExecutor()
        let (delivery, client, owner) = make(Self.apple, executor: executor)
        let answers = Locked<[URLSession.AuthChallengeDisposition]>([])
        delivery.forward(Self.digestChallenge()) { disposition, _ in answers.withLock { $0.append(disposition) } }
        executor.runAll()
        let forwarded = try XCTUnwrap(client.challenges.first, "the app has it")
        delivery.forward(Self.digestChallenge()) { disposition, _ in answers.withLock { $0.append(disposition) } }
        XCTAssertEqual(answers.withLock { $0 }, [], "both wait: one for the app, one for the client thread")
        delivery.stop()
        XCTAssertEqual(answers.withLock { $0 }, [.cancelAuthenticationChallenge, .cancelAuthenticationChallenge])
        forwarded.sender?.use(URLCredential(user: "late", password: "x", persistence: .none), for: forwarded)
        executor.runAll()
        XCTAssertEqual(answers.withLock { $0 }.count, 2, "a late answer is ignored")
        XCTAssertEqual(client.calls, ["challenge -"], "nothing reached the client after the stop")
        withExtendedLifetime(owner) {}
    }

    /// A Digest challenge for example.com, with a sender that ignores answers.
    private static func digestChallenge() -> URLAuthenticationChallenge {
        URLAuthenticationChallenge(
            protectionSpace: URLProtectionSpace(host: "example.com", port: 443, protocol: "https", realm: nil,
                                                authenticationMethod: NSURLAuthenticationMethodHTTPDigest),
            proposedCredential: nil, previousFailureCount: 0, failureResponse: nil, error: nil, sender: RecordingClient.NoSender())
    }

    #if canImport(FoundationNetworking)
    /// Linux: a delivery runs on the task's work queue (where corelibs changes the session's task
    /// registry). While few threads wait for that queue it waits on the thread that asked (no
    /// hand-off); past `CorelibsCallLane.poolWaiters` on the load's lane, and `run` returns at
    /// once; the deliveries asked one after another run in that order.
    func testTheTaskQueueExecutorRunsOnTheQueueInOrderHoldingFewAskingThreads() {
        let queue = DispatchQueue(label: "a task's work queue", target: DispatchQueue(label: "the sessions' shared queue"))
        let marker = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: marker, value: true)
        let release = DispatchSemaphore(value: 0)
        queue.async { release.wait() }
        let ran = Locked<[String]>([])
        @Sendable func record(_ name: String) {
            ran.withLock { $0.append("\(name) \(DispatchQueue.getSpecific(key: marker) == true ? "on" : "off") the queue") }
        }
        // Given as many loads as may wait on their own thread, each waiting there
        for number in 0..<CorelibsCallLane.poolWaiters {
            let executor = TaskQueueExecutor(queue: queue)
            DispatchQueue.global().async { executor.run { record("waiting \(number)") } }
        }
        // When another load's deliveries are asked for, one after another, from one thread
        let executor = TaskQueueExecutor(queue: queue)
        let returned = expectation(description: "every run returned")
        DispatchQueue.global().async {
            while CorelibsCallLane.callersWaiting < CorelibsCallLane.poolWaiters { sched_yield() }
            for number in 0..<50 { executor.run { record("\(number)") } }
            returned.fulfill()
        }
        // Then each returned while the queue was held, nothing having run
        wait(for: [returned], timeout: 10)
        XCTAssertEqual(ran.withLock { $0 }, [], "returned while the queue was held")
        // And once it is free, each ran on the queue, that load's in the order asked
        release.signal()
        let done = expectation(description: "the deliveries ran")
        executor.run { done.fulfill() }
        wait(for: [done], timeout: 10)
        let runs = ran.withLock { $0 }
        XCTAssertEqual(runs.filter { !$0.hasPrefix("waiting") }, (0..<50).map { "\($0) on the queue" })
        queue.sync {}
        XCTAssertEqual(Set(ran.withLock { $0 }.filter { $0.hasPrefix("waiting") }),
                       Set((0..<CorelibsCallLane.poolWaiters).map { "waiting \($0) on the queue" }))
    }
    #endif

    func testThePlatformRulesAreTheOnesDocumented() {
        #if canImport(FoundationNetworking)
        XCTAssertFalse(ClientDelivery.Rules.platform.streamsBodies, "Linux: one didLoad (Docs/foundation-facts.md, L10)")
        XCTAssertTrue(ClientDelivery.Rules.platform.holdsLockAcrossClientCalls)
        XCTAssertFalse(ClientDelivery.Rules.platform.reportsRedirects, "wasRedirectedTo is a fatalError in corelibs")
        #else
        XCTAssertTrue(ClientDelivery.Rules.platform.streamsBodies)
        XCTAssertFalse(ClientDelivery.Rules.platform.holdsLockAcrossClientCalls)
        XCTAssertTrue(ClientDelivery.Rules.platform.reportsRedirects)
        #endif
    }
}

/// Holds work until the test runs it: a stand-in for the client thread's run loop.
final class QueuedExecutor: ClientExecutor, Sendable {
    private let queue = Locked<[@Sendable () -> Void]>([])

    func run(_ work: @escaping @Sendable () -> Void) {
        queue.withLock { $0.append(work) }
    }

    var pending: Int { queue.withLock { $0.count } }

    func runAll() {
        while let work = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { work() }
    }
}

/// A `DispatchSpecificKey` a `Sendable` type can hold. The key has no state after `init`, and
/// newer SDKs declare it `Sendable`; the iOS 16.4 SDK of the type-check does not.
struct SendableSpecificKey: @unchecked Sendable {
    let key: DispatchSpecificKey<Bool>
}

/// A `URLProtocolClient` that records the calls it gets.
final class RecordingClient: NSObject, URLProtocolClient, Sendable {
    private let recorded = Locked<(calls: [String], challenges: [URLAuthenticationChallenge], response: HTTPURLResponse?, body: Data)>(
        ([], [], nil, Data()))
    /// When set, each call is recorded with where it ran: "on the marked queue" (a queue whose
    /// specific for this key is true) or "elsewhere".
    private let queueMarker: SendableSpecificKey?
    /// Fulfilled when the load ends (finished or failed).
    let ended = XCTestExpectation(description: "the load ended")

    init(queueMarker: DispatchSpecificKey<Bool>? = nil) {
        self.queueMarker = queueMarker.map(SendableSpecificKey.init(key:))
    }

    var calls: [String] { recorded.withLock { $0.calls } }
    var challenges: [URLAuthenticationChallenge] { recorded.withLock { $0.challenges } }
    /// The last response received, and every body byte loaded, in order.
    var response: HTTPURLResponse? { recorded.withLock { $0.response } }
    var body: Data { recorded.withLock { $0.body } }

    private func record(_ call: String) {
        var entry = call
        if let queueMarker {
            entry += DispatchQueue.getSpecific(key: queueMarker.key) == true ? " on the marked queue" : " elsewhere"
        }
        recorded.withLock { $0.calls.append(entry) }
    }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
        record("redirect \((redirectResponse as? HTTPURLResponse)?.statusCode ?? 0) to \(request.url?.absoluteString ?? "-")")
    }
    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
        record("cached response is valid")
    }
    func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
        recorded.withLock { $0.response = response as? HTTPURLResponse }
        record("response \((response as? HTTPURLResponse)?.statusCode ?? 0)")
    }
    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
        recorded.withLock { $0.body.append(data) }
        record("data \(data.count)")
    }
    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
        record("finish")
        ended.fulfill()
    }
    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: Error) {
        record("fail \((error as NSError).code)")
        ended.fulfill()
    }
    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
        recorded.withLock { $0.calls.append("challenge \(challenge.protectionSpace.realm ?? "-")"); $0.challenges.append(challenge) }
    }
    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
        record("cancel challenge")
    }

    /// A sender for challenges made in tests.
    final class NoSender: NSObject, URLAuthenticationChallengeSender, Sendable {
        func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
        func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
        func cancel(_ challenge: URLAuthenticationChallenge) {}
        func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
        func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
    }
}
