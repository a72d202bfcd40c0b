import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A GET request the cache may answer, with what the policy needs from it parsed once.
struct CacheRequest: @unchecked Sendable {
    // @unchecked: URLRequest is a value type but not declared Sendable on every platform; this
    // copy is never mutated after init.

    /// What the app's `URLRequest.CachePolicy` asks for.
    enum Mode: Sendable, Equatable {
        /// `.useProtocolCachePolicy`: the policy decides.
        case normal
        /// `.reloadIgnoringLocalCacheData`: go to the origin; the answer is still stored.
        case reload
        /// `.reloadIgnoringLocalAndRemoteCacheData`: as `reload`, and intermediaries are told
        /// not to answer from their caches either.
        case reloadFromOrigin
        /// `.reloadRevalidatingCacheData`: revalidate a stored response before using it.
        case revalidate
        /// `.returnCacheDataElseLoad`: any stored response, however old, else the origin.
        case preferCache
        /// `.returnCacheDataDontLoad`: only a stored response, never the network.
        case onlyCache
    }

    let urlRequest: URLRequest
    let key: String
    let directives: CacheControl
    let mode: Mode
    let credentialFingerprint: UInt64?

    /// Nil when the cache must not touch the request at all (see `CacheRequest.disposition`).
    init(_ request: URLRequest, key: String) {
        urlRequest = request
        self.key = key
        let cacheControl = request.value(forHTTPHeaderField: "Cache-Control")
        var directives = CacheControl(cacheControl)
        if cacheControl == nil, let pragma = request.value(forHTTPHeaderField: "Pragma"),
           pragma.range(of: "no-cache", options: .caseInsensitive) != nil {
            directives.noCache = true
        }
        self.directives = directives
        switch request.cachePolicy {
        case .reloadIgnoringLocalCacheData: mode = .reload
        case .reloadIgnoringLocalAndRemoteCacheData: mode = .reloadFromOrigin
        case .reloadRevalidatingCacheData: mode = .revalidate
        case .returnCacheDataElseLoad: mode = .preferCache
        case .returnCacheDataDontLoad: mode = .onlyCache
        default: mode = .normal
        }
        credentialFingerprint = Self.credentialFingerprint(of: request)
    }

    /// The value of a request header field.
    func header(_ name: String) -> String? {
        urlRequest.value(forHTTPHeaderField: name)
    }

    /// A fingerprint of `Authorization` and `Cookie`, or nil when neither is present. The secret
    /// itself is never stored; only this hash is, to keep one user's answers from another.
    static func credentialFingerprint(of request: URLRequest) -> UInt64? {
        let authorization = request.value(forHTTPHeaderField: "Authorization")
        let cookie = request.value(forHTTPHeaderField: "Cookie")
        guard authorization != nil || cookie != nil else { return nil }
        return StableHash.hash("authorization\u{0}\(authorization ?? "")\u{0}cookie\u{0}\(cookie ?? "")")
    }
}

/// How the cache treats a request before looking anything up.
enum RequestDisposition: Equatable {
    /// Not the cache's business: Foundation loads it untouched (the protocol declines it).
    case passThrough
    /// An unsafe method: what is stored for these keys is dropped, then Foundation loads the
    /// request untouched, body and all.
    case invalidate(keys: [String])
    /// A GET the cache answers; the string is its key.
    case cacheable(key: String)

    /// Request headers that make a request conditional or partial: the app is doing its own
    /// validation or range handling, so its request goes out exactly as it wrote it.
    private static let appOwnedHeaders = ["If-None-Match", "If-Modified-Since", "If-Match",
                                          "If-Unmodified-Since", "If-Range", "Range"]

    init(_ request: URLRequest) {
        guard let url = request.url, let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https"
        else {
            self = .passThrough
            return
        }
        let method = request.httpMethod?.uppercased() ?? "GET"
        switch method {
        case "GET":
            if Self.appOwnedHeaders.contains(where: { request.value(forHTTPHeaderField: $0) != nil })
                || request.value(forHTTPHeaderField: "Upgrade") != nil {
                self = .passThrough
            } else if let noStore = request.value(forHTTPHeaderField: "Cache-Control"), CacheControl(noStore).noStore {
                self = .passThrough
            } else {
                self = .cacheable(key: CacheKey.make(method: "GET", url: url))
            }
        case "HEAD", "OPTIONS", "TRACE":
            self = .passThrough
        default:
            // RFC 9111 §4.4: an unsafe method invalidates the target URI. Foundation sends the
            // request itself (so upload bodies and streams stay intact); the cache drops what it
            // holds for the URL before the request leaves, which can only make it more careful.
            self = .invalidate(keys: [CacheKey.make(method: "GET", url: url)])
        }
    }
}

/// Cache keys: the method and the full URL, query included, fragment removed, scheme and host
/// lowercased. Never host and path alone (that served `?page=2` for `?page=1` in an older cache).
enum CacheKey {
    static func make(method: String, url: URL) -> String {
        var text = url.absoluteString
        if let hash = text.firstIndex(of: "#") {
            text = String(text[..<hash])
        }
        // Lowercase the scheme and authority only; paths and queries are case-sensitive.
        if let schemeEnd = text.range(of: "://") {
            let authorityEnd = text[schemeEnd.upperBound...].firstIndex(where: { $0 == "/" || $0 == "?" }) ?? text.endIndex
            let prefix = text[..<authorityEnd]
            if prefix.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) {
                text = prefix.lowercased() + text[authorityEnd...]
            }
        }
        return method + " " + text
    }
}
