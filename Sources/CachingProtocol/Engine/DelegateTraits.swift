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
    /// Who may judge server trust for the session's connections, as the name its stored answers
    /// are kept apart under (stable across launches, so answers stored on disk stay its own); nil
    /// when the system's evaluation does (no delegate, or one without a challenge method). Set
    /// to the type's name of a named delegate that implements the session-level or the
    /// task-level challenge method, which Apple's loader calls for server-trust challenges; and
    /// to `unnamed(in:)`'s name when the app did not name the delegate, which may judge (what
    /// cannot be shown safe is treated as if it did). Its sessions' answers come only from
    /// connections whose challenges reached one of their loads, and are served only to sessions
    /// with the same judge (Docs/foundation-facts.md, A14).
    var trustJudge: String?
    /// Whether the delegate may refuse a redirect (it implements
    /// `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)`): a redirect
    /// reported to its session is then followed by the 3xx's own response and body, which the
    /// session delivers when it does not follow (`ClientDelivery.redirectsMayBeRefused`,
    /// Docs/foundation-facts.md, A15).
    var decidesRedirects = false

    /// A session without a delegate (or one the app named and that decides neither), and every
    /// session on Linux: the system judges trust and nobody refuses a redirect.
    static let none = DelegateTraits()

    /// Whether the platform's loader raises server-trust challenges to delegates: Apple's does
    /// (Docs/foundation-facts.md, A14); swift-corelibs-foundation never does (L20).
    static let platformRaisesServerTrust = LoaderRules.current.raisesServerTrust

    /// The traits of a session made from `configuration` whose delegate the cache cannot see: one
    /// injected without naming it (`CachingURLProtocol.inject(into:using:)`), or an
    /// `NSURLConnection`'s. Where the loader raises server-trust challenges (`raisesServerTrust`,
    /// Apple), that delegate may pin certificates, and nothing at load time says whether it does
    /// (`URLSessionTask` has no public `session`; a protocol sees its task, whose own `delegate`
    /// is looked at in `canInit(with task:)`, but not its session's): the session is treated as
    /// judged by it, under a name standing for the unnamed delegate and the configuration's
    /// settings — so it shares no connection, exchange or stored answer with `URLSession.shared`,
    /// a named delegate's sessions or sessions of other settings, gets no stale-while-revalidate
    /// answer before its revalidation, and a server-trust challenge none of its loads can take
    /// is cancelled. Where the loader raises none (Linux), `none`: nobody of the app's judges.
    static func unnamed(in configuration: URLSessionConfiguration,
                        raisesServerTrust: Bool = platformRaisesServerTrust) -> DelegateTraits {
        guard raisesServerTrust else { return .none }
        return DelegateTraits(trustJudge: "(an unnamed delegate) \(StableHash.hex(StableHash.hash(settingsDescription(configuration))))")
    }

    /// The settings of `configuration` that tell sessions apart, as text that is the same in
    /// every launch: what stored answers of an unnamed delegate's sessions are kept under. The
    /// cookie and credential storages count as the shared ones, none, or another. Additional
    /// header fields count by name, not value: an app that makes a session for each refreshed
    /// token keeps one judge — so one upstream session (`SessionSettings.upstreamKey` keeps the
    /// judge) and one partition, in which the token's user is told apart by the request's own
    /// fields (`CachingUserIdentity`).
    private static func settingsDescription(_ configuration: URLSessionConfiguration) -> String {
        func storage(_ object: AnyObject?, shared: AnyObject) -> String {
            guard let object else { return "none" }
            return object === shared ? "shared" : "own"
        }
        let headers = (configuration.httpAdditionalHeaders ?? [:]).map { "\(String(describing: $0.key).lowercased())" }.sorted()
        let proxies = (configuration.connectionProxyDictionary ?? [:]).map { "\($0.key)=\($0.value)" }.sorted()
        return (headers + proxies + [
            "\(configuration.timeoutIntervalForRequest)", "\(configuration.timeoutIntervalForResource)",
            "\(configuration.requestCachePolicy.rawValue)", "\(configuration.httpCookieAcceptPolicy.rawValue)",
            "\(configuration.httpShouldSetCookies)", "\(configuration.allowsCellularAccess)",
            "\(configuration.networkServiceType.rawValue)", "\(configuration.httpMaximumConnectionsPerHost)",
            storage(configuration.httpCookieStorage, shared: HTTPCookieStorage.shared),
            storage(configuration.urlCredentialStorage, shared: URLCredentialStorage.shared),
        ]).joined(separator: "\n")
    }

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
