import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The answer to one load.
enum Answer: @unchecked Sendable {
    // @unchecked: HTTPURLResponse and URLRequest are immutable here but not declared Sendable
    // everywhere.

    /// A response with its whole body. (When the client already took the response as it arrived,
    /// `LoadClient.receiveHead` and `receiveChunk`, this only ends the load.)
    case response(HTTPURLResponse, Data)
    /// A redirect (from the origin or stored) to `request`. Only a client that reports
    /// redirects to its app (`RedirectHandling.report`) gets it: the app's session decides and
    /// loads `request`, or, when its delegate refuses, takes the 3xx and its body (the `Data`)
    /// as the answer. For every other client the engine follows it (`CacheEngine+Redirects`).
    case redirect(HTTPURLResponse, Data, to: URLRequest)
    /// An error.
    case failure(Error)
}

/// How the app behind a load treats redirects, as its platform lets this layer honour it.
enum RedirectHandling: Sendable {
    /// Nothing in the app could object (no delegate that is asked): the engine follows them,
    /// through the cache.
    case follow
    /// Ask the app: `ask` gets the redirect and a `decide` to call with the request to follow
    /// (possibly changed), which the engine follows through the cache, or nil, which makes the
    /// 3xx the answer (Linux, where the protocol asks the app's delegate itself).
    case ask(@Sendable (HTTPURLResponse, URLRequest, _ decide: @escaping @Sendable (URLRequest?) -> Void) -> Void)
    /// Do not follow; answer with `Answer.redirect` (Apple, where the app's session asks its
    /// delegate and starts the next load itself).
    case report

    var isReport: Bool {
        if case .report = self { return true }
        return false
    }
}

/// Who waits for a load: it gets the one answer, and meanwhile what the app must see or decide
/// while the answer is fetched.
///
/// Threading: any member from any thread; `receive` at most once, after which nothing else.
protocol LoadClient: Sendable {
    /// The answer and how it came about; the load ends with it.
    func receive(_ answer: Answer, outcome: CacheEvent.Outcome)
    /// How redirects on the way are handled.
    var redirects: RedirectHandling { get }
    /// Whether the client takes a body fetched from the origin as it arrives (`receiveHead`,
    /// then `receiveChunk`), rather than whole in the answer.
    var streamsBody: Bool { get }
    /// Whether the answer must carry the whole body even when the client took its pieces as
    /// they arrived (an `async` call on Linux, whose delegate gets the pieces and whose caller the
    /// whole body). Default: when it does not stream.
    var needsWholeBody: Bool { get }
    /// The response, before its body (only when `streamsBody`).
    func receiveHead(_ response: HTTPURLResponse)
    /// A piece of the body, in order (only after `receiveHead`).
    func receiveChunk(_ data: Data)
    /// A challenge raised on the way before any response: `reply` with the app's answer (the
    /// client forwards it to the app), or with default handling.
    func forward(_ challenge: URLAuthenticationChallenge,
                reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
    /// Whether `answer` passes challenges to the app (Apple's client does; otherwise it gives
    /// them default handling).
    var forwardsChallenges: Bool { get }
    /// The app's session the load comes from, when the client knows it: the load's upstream
    /// requests use connections of that session's own (`URLSessionUpstream`). Default: nil.
    var appSession: AppSession? { get }
}

extension LoadClient {
    var redirects: RedirectHandling { .follow }
    var streamsBody: Bool { false }
    var needsWholeBody: Bool { !streamsBody }
    func receiveHead(_ response: HTTPURLResponse) {}
    func receiveChunk(_ data: Data) {}
    func forward(_ challenge: URLAuthenticationChallenge,
                reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        reply(.performDefaultHandling, nil)
    }
    var forwardsChallenges: Bool { false }
    var appSession: AppSession? { nil }
}
