import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The same app code run twice — on a session without the layer and on the same kind of
/// session with `CachingURLProtocol.inject(into:)` — so a test can assert the app sees the same
/// thing either way.
///
/// Each run gets a fresh origin log and a fresh `AppDelegate`; `configure` builds the session
/// configuration (before the layer is injected into one of the two), and `run` is the app code.
struct TransparencyPair {
    /// What one run of the app code saw.
    struct Observation: Equatable, CustomStringConvertible {
        /// The app code's own result (status, body, an error code, …) as text.
        var result: String
        /// Every delegate call, in order (see `AppDelegate`).
        var delegateCalls: [String]
        /// The requests that reached the origin: method, path and the headers a test names.
        var originTraffic: [String]
        /// How many loads the layer answered in this run (0 without it): a run whose requests
        /// all passed the layer by would make a pair equal for the wrong reason. Not compared.
        var layerAnswers = 0

        var description: String {
            "result: \(result)\ndelegate: \(delegateCalls)\norigin: \(originTraffic)\nlayer answers: \(layerAnswers)"
        }

        /// The same observation with other origin traffic: to compare what the app saw where the
        /// traffic legitimately differs (loads the layer collapsed into one upstream request).
        func with(originTraffic: [String]) -> Observation {
            var changed = self
            changed.originTraffic = originTraffic
            return changed
        }

        static func == (lhs: Observation, rhs: Observation) -> Bool {
            lhs.result == rhs.result && lhs.delegateCalls == rhs.delegateCalls && lhs.originTraffic == rhs.originTraffic
        }
    }

    let origin: LoopbackOrigin
    /// Request headers to show in `originTraffic` (for example `Authorization`, `Cookie`).
    var loggedHeaders: [String] = []

    /// Runs `run` without and then with the layer (installed with `caching`); returns both
    /// observations. `sessionHasDelegate` false makes a session without a delegate (its tasks'
    /// redirects are then followed without asking the app, so identical loads may share one
    /// upstream request through the layer); `run` still gets an `AppDelegate`, attached to nothing.
    func observe(
        configure: (URLSessionConfiguration) -> Void = { _ in },
        delegate makeDelegate: () -> AppDelegate = { AppDelegate() },
        sessionHasDelegate: Bool = true,
        caching: CachingConfiguration,
        run: (URLSession, AppDelegate) async throws -> String
    ) async throws -> (without: Observation, with: Observation) {
        var observations: [Observation] = []
        for withLayer in [false, true] {
            origin.resetLog()
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 10
            configure(configuration)
            if withLayer {
                CachingURLProtocol.inject(into: configuration, using: caching)
            }
            let delegate = makeDelegate()
            let session = URLSession(configuration: configuration, delegate: sessionHasDelegate ? delegate : nil, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }
            let result: String
            do {
                result = try await run(session, delegate)
            } catch let error as URLError {
                result = "URLError \(error.code.rawValue)"
            }
            let traffic = origin.requests.map { request in
                ([request.method, request.target] + loggedHeaders.compactMap { name in
                    request.header(name).map { "\(name): \($0)" }
                }).joined(separator: " ")
            }
            var observation = Observation(result: result, delegateCalls: delegate.calls, originTraffic: traffic)
            if withLayer {
                let counted = caching.statistics
                observation.layerAnswers = counted.hits + counted.staleHits + counted.revalidatedNotModified
                    + counted.revalidatedChanged + counted.fetched + counted.staleAfterError + counted.notInCache + counted.failed
            }
            observations.append(observation)
        }
        return (observations[0], observations[1])
    }
}

extension CachingTestCase {
    /// The same app code on a session without a delegate, made from
    /// `URLSessionConfiguration.ephemeral`: first without the layer, then with `caching` (a new
    /// `makeConfiguration()` when nil) injected, the origin's log reset before each run. What each
    /// run returned, in that order.
    func withoutAndWithTheLayer(caching: CachingConfiguration? = nil,
                                _ run: (URLSession) async throws -> String) async rethrows -> (without: String, with: String) {
        var observed: [String] = []
        for withLayer in [false, true] {
            origin.resetLog()
            let configuration = URLSessionConfiguration.ephemeral
            if withLayer { CachingURLProtocol.inject(into: configuration, using: caching ?? makeConfiguration()) }
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            observed.append(try await run(session))
        }
        return (observed[0], observed[1])
    }
}

/// An app's session delegate that records what it is asked and answers as told: challenges with
/// `credential` (or default handling), redirects by following or blocking. With `recordsBody`
/// each piece of body is a call too (`data <size>`); `onFirstBody` runs in the first one, where a
/// streaming app would act on the first bytes (cancel, say).
final class AppDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var calls: [String] = []
        var received = Data()
        var pieces: [Data] = []
        var completion: XCTestExpectation?
        var onFirstBody: (@Sendable (URLSessionDataTask) -> Void)?
    }
    private let state: Locked<State>
    let credential: URLCredential?
    let followsRedirects: Bool
    let recordsBody: Bool
    let done = XCTestExpectation(description: "task completed")

    init(credential: URLCredential? = nil, followsRedirects: Bool = true, recordsBody: Bool = false,
         onFirstBody: (@Sendable (URLSessionDataTask) -> Void)? = nil) {
        self.credential = credential
        self.followsRedirects = followsRedirects
        self.recordsBody = recordsBody
        state = Locked(State(onFirstBody: onFirstBody))
    }

    var calls: [String] { state.withLock { $0.calls } }

    /// Fulfils `expectation` (instead of `done`) when the next task completes.
    func expectCompletion(_ expectation: XCTestExpectation) {
        state.withLock { $0.completion = expectation }
    }
    var received: Data { state.withLock { $0.received } }
    /// Each piece of body as it came (with `recordsBody`).
    var pieces: [Data] { state.withLock { $0.pieces } }

    private func record(_ call: String) {
        state.withLock { $0.calls.append(call) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        record("challenge \(challenge.protectionSpace.authenticationMethod) \(challenge.protectionSpace.realm ?? "-") failures=\(challenge.previousFailureCount)")
        if let credential {
            completionHandler(.useCredential, credential)
        } else {
            completionHandler(.performDefaultHandling, nil)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        record("redirect \(response.statusCode) to \(request.url?.absoluteString ?? "-")")
        completionHandler(followsRedirects ? request : nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        record("response \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let first = state.withLock { state -> (@Sendable (URLSessionDataTask) -> Void)? in
            state.received.append(data)
            if recordsBody {
                state.calls.append("data \(data.count)")
                state.pieces.append(data)
            }
            defer { state.onFirstBody = nil }
            return state.onFirstBody
        }
        first?(dataTask)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        record("complete \(error.map { "error \(($0 as? URLError)?.code.rawValue ?? -1)" } ?? "ok")")
        let next = state.withLock { state -> XCTestExpectation? in
            defer { state.completion = nil }
            return state.completion
        }
        (next ?? done).fulfill()
    }
}

extension URLSession {
    /// Whether a GET of `url` goes through the layer: the first of the session's protocol classes
    /// is the layer's and takes it. (A pair whose load was cancelled gets no answer the layer
    /// would count.)
    func layerTakes(_ url: URL) -> Bool {
        guard let layer = configuration.protocolClasses?.first as? CachingURLProtocol.Type else { return false }
        return layer.canInit(with: URLRequest(url: url))
    }
}

extension XCTestCase {
    /// Runs `request` as a data task of `session` (whose delegate is `delegate`) and waits until
    /// the delegate saw it complete; returns the task's response.
    func runDelegateTask(_ request: URLRequest, in session: URLSession, delegate: AppDelegate) async -> HTTPURLResponse? {
        let done = XCTestExpectation(description: "the task completed")
        delegate.expectCompletion(done)
        let task = session.dataTask(with: request)
        task.resume()
        await fulfillment(of: [done], timeout: 20)
        return task.response as? HTTPURLResponse
    }
}
