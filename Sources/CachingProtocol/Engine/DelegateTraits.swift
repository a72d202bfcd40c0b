import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an app session's delegate decides that the cache must know of, learned from the delegate
/// the app names when it injects the protocol (`CachingURLProtocol.inject(into:using:delegate:)`):
/// a `URLProtocol` never sees its session, nor so its delegate. Part of `SessionSettings`, so
/// sessions whose delegates differ here never share a protocol class, an upstream session, an
/// exchange or (for trust) a stored answer.
struct DelegateTraits: Hashable, Sendable {
    /// Set when the delegate judges server trust — it implements the session-level or the
    /// task-level challenge method, which Apple's loader calls for server-trust challenges —
    /// to the name of its type (stable across launches, so answers stored on disk stay its own).
    /// Its sessions' answers come only from connections whose challenges reached it, and are
    /// served only to sessions judged by the same type (Docs/foundation-facts.md, A14).
    var trustJudge: String?
    /// Whether the delegate may refuse a redirect (it implements
    /// `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)`): a redirect
    /// reported to its session is then followed by the 3xx's own response and body, which the
    /// session delivers when it does not follow (`ClientDelivery.redirectsMayBeRefused`,
    /// Docs/foundation-facts.md, A15).
    var decidesRedirects = false

    /// A session without a delegate, or one the app did not name: the system judges trust and
    /// nobody refuses a redirect.
    static let none = DelegateTraits()

    /// The traits of `delegate`. On Linux always `none`: swift-corelibs-foundation raises no
    /// server-trust challenge to a delegate (libcurl checks certificates against the system's CA
    /// bundle), and the protocol asks the task's delegate about redirects itself
    /// (`AppTaskRedirects`).
    static func of(_ delegate: (any URLSessionDelegate)?) -> DelegateTraits {
        #if canImport(FoundationNetworking)
        return .none
        #else
        guard let delegate else { return .none }
        return DelegateTraits(trustJudge: judgesTrust(delegate) ? String(reflecting: type(of: delegate)) : nil,
                              decidesRedirects: decidesRedirects(delegate))
        #endif
    }

    #if !canImport(FoundationNetworking)
    /// Whether `delegate` implements a challenge method: `urlSession(_:didReceive:completionHandler:)`,
    /// or the task-level one, which the system calls for server trust when the session-level one
    /// is missing. (The `async` forms have the same selectors.)
    static func judgesTrust(_ delegate: any NSObjectProtocol) -> Bool {
        delegate.responds(to: #selector(URLSessionDelegate.urlSession(_:didReceive:completionHandler:)))
            || delegate.responds(to: #selector(URLSessionTaskDelegate.urlSession(_:task:didReceive:completionHandler:)))
    }

    /// Whether `delegate` implements the redirect method, and so may refuse a redirect.
    static func decidesRedirects(_ delegate: any NSObjectProtocol) -> Bool {
        delegate.responds(to: #selector(URLSessionTaskDelegate.urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)))
    }
    #endif
}
