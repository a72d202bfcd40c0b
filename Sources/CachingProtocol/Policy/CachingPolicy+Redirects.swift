import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Redirects: which responses are redirects a client follows, where they lead, and which are
/// stored. The engine follows every redirect itself, through the cache (`CacheEngine+Redirects`),
/// so a stored redirect and a stored target answer without the origin.
extension CachingPolicy {
    /// Statuses Foundation follows when the response names a `Location` (corelibs'
    /// `HTTPURLProtocol.redirectRequest`: 301–303 and 305–308).
    static let followedRedirectStatuses: Set<Int> = [301, 302, 303, 305, 306, 307, 308]

    /// Redirects a cache may store (RFC 9110 §15.4): permanent ones are cacheable by default
    /// (§15.4.2, §15.4.9), temporary ones only with explicit freshness.
    static let permanentRedirectStatuses: Set<Int> = [301, 308]
    static let temporaryRedirectStatuses: Set<Int> = [302, 303, 307]

    /// Whether a response with `status` and a `Location` field is a redirect the cache stores
    /// under the rules for redirects (`storageDecision`).
    static func isStorableRedirect(status: Int, headers: HTTPHeaders) -> Bool {
        (permanentRedirectStatuses.contains(status) || temporaryRedirectStatuses.contains(status)) && headers.contains("Location")
    }

    /// The request that follows a `status` response whose `Location` is `location`, for
    /// `request`, as Foundation makes it; nil when the response is not a redirect Foundation
    /// follows (another status, no `Location`, or one that is not a URL): then it is the answer.
    ///
    /// The request keeps its header fields; a POST answered 301 or 302, and any request answered
    /// 303, becomes a GET without a body; other redirects keep the method and body (RFC 9110
    /// §15.4). The target is `location` resolved against the request's URL: on Linux as corelibs
    /// does it (a relative path is taken from the root: `a/b` leads to `/a/b`, not next to the
    /// request's path), elsewhere as RFC 3986 §5 does.
    static func redirectTarget(of request: URLRequest, status: Int, location: String?) -> URLRequest? {
        guard followedRedirectStatuses.contains(status), let location, let url = request.url,
              let target = resolve(location, against: url) else { return nil }
        var redirected = request
        let method = request.httpMethod ?? "GET"
        if status == 303 || ((status == 301 || status == 302) && method.isEqualIgnoringASCIICase("POST")) {
            redirected.httpMethod = "GET"
            redirected.httpBody = nil
        }
        redirected.url = target
        return redirected
    }

    /// `location` as an absolute URL, read against `base`.
    private static func resolve(_ location: String, against base: URL) -> URL? {
        guard let target = URL(string: location) else { return nil }
        #if canImport(FoundationNetworking)
        // corelibs' `HTTPURLProtocol.redirectRequest`, step for step.
        if target.scheme != nil, target.host != nil { return target }
        guard var components = URLComponents(url: base, resolvingAgainstBaseURL: false) else { return nil }
        if target.host != nil {
            components.host = target.host
            components.port = target.port
        }
        components.path = target.path.hasPrefix("/") ? target.path : "/" + target.path
        components.percentEncodedQuery = target.query
        components.percentEncodedFragment = target.fragment
        return components.url
        #else
        return URL(string: location, relativeTo: base)?.absoluteURL
        #endif
    }
}
