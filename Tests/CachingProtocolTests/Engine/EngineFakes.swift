import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The engine on its own, for the engine's tests: a fake upstream the test answers by hand, a
/// fake store, a manual clock. The configuration's cache is not the engine's store: the engine
/// reads only its settings (policy, clock, revalidation, collapsing, observer).
class EngineTestCase: LoaderRulesTestCase {
    var clock: ManualClock!
    var upstream: FakeUpstream!
    var store: FakeStore!
    var engine: CacheEngine!
    private var directory: URL!

    /// Changes the configuration before the engine is made (an observer, another policy).
    func configure(_ configuration: inout CachingConfiguration) {}

    override func setUpWithError() throws {
        clock = ManualClock()
        upstream = FakeUpstream(clock: clock.read)
        store = FakeStore()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(type(of: self))-\(UUID().uuidString)")
        var configuration = CachingConfiguration(cache: CachingURLCache(memoryCapacity: 0, diskCapacity: 0, directory: directory),
                                                 now: clock.read)
        configure(&configuration)
        engine = CacheEngine(configuration: configuration, store: store, upstream: upstream)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// An origin the test answers by hand: it records every request the engine sends and completes
/// it when told. No network, no URLSession.
final class FakeUpstream: Upstream, @unchecked Sendable {
    // @unchecked: every field is guarded by `state`'s lock; XCTestExpectation is thread-safe.
    struct Sent {
        let request: URLRequest
        /// The app session's settings: `URLSessionUpstream` sends through one upstream session
        /// (and its connections) per distinct settings.
        let settings: SessionSettings
        /// The app session whose connections the request uses (`URLSessionUpstream`).
        let appSession: AppSession?
        let wholeBody: Bool
        let listener: UpstreamListener?
        let task: UpstreamTask
        let completion: @Sendable (Result<ReceivedResponse, Error>) -> Void
        var method: String { request.httpMethod ?? "GET" }
        func header(_ name: String) -> String? { request.value(forHTTPHeaderField: name) }
    }

    private struct State {
        var sent: [Sent] = []
        var cancelled: Set<Int> = []
        var waitingFor: (count: Int, expectation: XCTestExpectation)?
    }
    private let state = Locked(State())
    let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date) {
        self.clock = clock
    }

    func send(_ request: URLRequest, from settings: SessionSettings, appSession: AppSession?, wholeBody: Bool,
              listener: UpstreamListener?,
              completion: @escaping @Sendable (Result<ReceivedResponse, Error>) -> Void) -> UpstreamTask {
        let task = UpstreamTask()
        let expectation = state.withLock { state -> XCTestExpectation? in
            let number = state.sent.count
            state.sent.append(Sent(request: request, settings: settings, appSession: appSession, wholeBody: wholeBody,
                                   listener: listener, task: task, completion: completion))
            task.adopt { [weak self] in self?.state.withLock { _ = $0.cancelled.insert(number) } }
            guard let waiting = state.waitingFor, state.sent.count >= waiting.count else { return nil }
            state.waitingFor = nil
            return waiting.expectation
        }
        expectation?.fulfill()
        return task
    }

    func shutdown() {}

    var sent: [Sent] { state.withLock { $0.sent } }
    func isCancelled(_ number: Int) -> Bool { state.withLock { $0.cancelled.contains(number) } }

    /// Waits until `count` requests were sent (they are sent from the engine's queue); false when
    /// they were not within `timeout` (a test then stops rather than index a request never sent).
    @discardableResult
    func waitForRequests(_ count: Int, timeout: TimeInterval = 10) -> Bool {
        let expectation = XCTestExpectation(description: "\(count) upstream requests")
        let already = state.withLock { state -> Bool in
            if state.sent.count >= count { return true }
            state.waitingFor = (count, expectation)
            return false
        }
        if already { return true }
        return XCTWaiter().wait(for: [expectation], timeout: timeout) == .completed
    }

    /// Answers request `number` with a response.
    func respond(_ number: Int, status: Int, headers: [String: String] = [:], body: Data = Data()) {
        let sent = self.sent[number]
        let response = HTTPURLResponse(url: sent.request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        let now = clock()
        let head = ReceivedHead(response: response, route: .direct, requestDate: now, responseDate: now)
        sent.completion(.success(ReceivedResponse(head: head, body: body, transferSeconds: 0.001)))
    }

    /// Hands the head of a response to request `number` to its listener, as the upstream session
    /// does before the body; returns what the listener said to do with the body.
    @discardableResult
    func sendHead(_ number: Int, status: Int, headers: [String: String] = [:]) -> BodyHandling? {
        let sent = self.sent[number]
        let response = HTTPURLResponse(url: sent.request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        let now = clock()
        return sent.listener?.upstreamDidReceiveHead(ReceivedHead(response: response, route: .direct, requestDate: now, responseDate: now))
    }

    /// Hands a piece of the body of request `number`'s response to its listener.
    func sendBody(_ number: Int, _ data: Data) {
        sent[number].listener?.upstreamDidReceiveBody(data)
    }

    /// Ends request `number` with an error.
    func fail(_ number: Int, _ error: Error = URLError(.cannotConnectToHost)) {
        sent[number].completion(.failure(error))
    }

    /// Raises a challenge with `method` on request `number` through the listener the engine gave
    /// it, as the upstream session does before any response (a TLS handshake's server trust);
    /// returns how the engine answered (nil: not yet).
    func challenge(_ number: Int, method: String) -> URLSession.AuthChallengeDisposition? {
        let sent = self.sent[number]
        let url = sent.request.url!
        let challenge = URLAuthenticationChallenge(
            protectionSpace: URLProtectionSpace(host: url.host!, port: url.port ?? 443, protocol: url.scheme, realm: nil,
                                                authenticationMethod: method),
            proposedCredential: nil, previousFailureCount: 0, failureResponse: nil, error: nil, sender: RecordingClient.NoSender())
        let answered = Locked<URLSession.AuthChallengeDisposition?>(nil)
        sent.listener?.upstreamDidReceiveChallenge(challenge) { disposition, _ in answered.withLock { $0 = disposition } }
        return answered.withLock { $0 }
    }
}

/// A store in a dictionary, as `TieredStore` keeps variants (newest first, one per variant).
final class FakeStore: RecordStore, @unchecked Sendable {
    // @unchecked: every field is guarded by `records`' lock.
    private let records = Locked<[String: CacheRecord]>([:])
    let maximumEntrySize = Int.max

    func lookup(_ key: String) -> RecordLookup { .answered(records.withLock { $0[key] }) }
    func finishLookup(_ key: String) -> CacheRecord? { records.withLock { $0[key] } }
    func record(forKey key: String) -> CacheRecord? { records.withLock { $0[key] } }
    func peek(_ key: String) -> CacheRecord? { records.withLock { $0[key] } }
    func mayContainRecord(forKey key: String) -> Bool { records.withLock { $0[key] != nil } }

    /// Set it to make the store say that storing would wait for its disk.
    let isBacklogged = Locked(false)
    /// It reads no file; it waits only while `isBacklogged`.
    func storesWithoutWaiting(forKey key: String) -> Bool { !isBacklogged.withLock { $0 } }

    /// Makes the files bodies go to as they arrive; nil (the default): it keeps no files, and
    /// every body is collected in memory.
    let makesStreamedFile = Locked<(@Sendable (String) -> StreamedEntryFile)?>(nil)

    func writesAsItArrives(bodyOfLength length: Int?) -> Bool { makesStreamedFile.withLock { $0 != nil } }
    func streamedEntryFile(forKey key: String) -> StreamedEntryFile? { makesStreamedFile.withLock { $0 }?(key) }

    /// What each `storeVariant` was told of waiting for a disk that is behind, in order.
    let waitsIfBehind = Locked<[Bool]>([])

    func storeVariant(_ entry: CacheEntry, key: String, memoryOnly: Bool, bodyFile: StreamedEntryFile?, waitsIfBehind: Bool) {
        self.waitsIfBehind.withLock { $0.append(waitsIfBehind) }
        records.withLock { records in
            var variants = records[key]?.variants ?? []
            variants.removeAll { $0.isSameVariant(as: entry) }
            variants.insert(entry, at: 0)
            records[key] = CacheRecord(key: key, variants: variants)
        }
    }

    func removeVariant(forKey key: String, matching matches: (CacheEntry) -> Bool) {
        records.withLock { records in
            guard var record = records[key], let index = record.variants.firstIndex(where: matches) else { return }
            record.variants.remove(at: index)
            records[key] = record.variants.isEmpty ? nil : record
        }
    }

    func removeRecord(forKey key: String) {
        records.withLock { _ = $0.removeValue(forKey: key) }
    }

    /// The one variant stored under `key`, if any.
    func entry(_ key: String) -> CacheEntry? { records.withLock { $0[key]?.variants.first } }
}

/// A load's client that records its answer and, when it forwards challenges to its app (as
/// Apple's client does), the authentication methods of the challenges it got, each answered with
/// `appAnswer` — what the app's delegate said.
final class RecordingLoadClient: LoadClient, @unchecked Sendable {
    // @unchecked: every field is guarded by `state`'s lock; XCTestExpectation is thread-safe.
    private struct State {
        var answer: Answer?
        var outcome: CacheEvent.Outcome?
        var challenges: [String] = []
        var streamed: [String] = []
    }
    private let state = Locked(State())
    let answered = XCTestExpectation(description: "answered")
    let forwardsChallenges: Bool
    private let appAnswer: URLSession.AuthChallengeDisposition
    let redirects: RedirectHandling
    let streamsBody: Bool

    /// `streams`: it takes a fetched body as it arrives (a task with a delegate).
    init(forwardsChallenges: Bool = false, appAnswer: URLSession.AuthChallengeDisposition = .performDefaultHandling,
         redirects: RedirectHandling = .follow, streams: Bool = false) {
        self.forwardsChallenges = forwardsChallenges
        self.appAnswer = appAnswer
        self.redirects = redirects
        streamsBody = streams
    }

    func receiveHead(_ response: HTTPURLResponse) {
        state.withLock { $0.streamed.append("head \(response.statusCode)") }
    }

    func receiveChunk(_ data: Data) {
        state.withLock { $0.streamed.append(String(decoding: data, as: UTF8.self)) }
    }

    /// What was streamed to it before the answer: "head 200", then each piece of body.
    var streamed: [String] { state.withLock { $0.streamed } }

    func receive(_ answer: Answer, outcome: CacheEvent.Outcome) {
        state.withLock { $0.answer = answer; $0.outcome = outcome }
        answered.fulfill()
    }

    func forward(_ challenge: URLAuthenticationChallenge,
                reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard forwardsChallenges else { return reply(.performDefaultHandling, nil) }
        state.withLock { $0.challenges.append(challenge.protectionSpace.authenticationMethod) }
        reply(appAnswer, nil)
    }

    var outcome: CacheEvent.Outcome? { state.withLock { $0.outcome } }
    var receivedAnswer: Answer? { state.withLock { $0.answer } }
    /// The authentication methods of the challenges forwarded to the app, in order.
    var challenges: [String] { state.withLock { $0.challenges } }

    /// The body of a redirect answer (`Answer.redirect`), if that was the answer.
    var redirectBody: Data? {
        guard case .redirect(_, let body, _)? = state.withLock({ $0.answer }) else { return nil }
        return body
    }

    /// The body of a response answer, if that was the answer.
    var body: Data? {
        guard case .response(_, let body)? = state.withLock({ $0.answer }) else { return nil }
        return body
    }

    /// "200 body", "error -1004", "redirect 302 /x".
    var summary: String {
        switch state.withLock({ $0.answer }) {
        case .response(let response, let body)?: return "\(response.statusCode) \(String(decoding: body, as: UTF8.self))"
        case .failure(let error)?: return "error \((error as? URLError)?.code.rawValue ?? -1)"
        case .redirect(let response, _, let request)?: return "redirect \(response.statusCode) \(request.url?.path ?? "-")"
        case nil: return "no answer"
        }
    }

    var cacheStatus: String? {
        guard case .response(let response, _)? = state.withLock({ $0.answer }) else { return nil }
        return response.value(forHTTPHeaderField: "Cache-Status")
    }
}

extension CacheEngine {
    /// Starts a load of `request` from `settings` the way `CachingURLProtocol` does: an answer
    /// given at once (a fresh hit) is handed to `client` here, anything else goes on in the
    /// engine. The load's handle, nil when it was answered at once.
    @discardableResult
    func startLoad(_ request: CacheRequest, from settings: SessionSettings, client: LoadClient) -> LoadHandle? {
        switch lookUp(request, from: settings) {
        case .answered(let answer):
            client.receive(answer, outcome: .hit)
            return nil
        case .goesOn(let pending):
            return resume(pending, client: client)
        }
    }
}
