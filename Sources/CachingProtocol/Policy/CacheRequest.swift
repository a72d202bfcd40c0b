import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request header fields the cache looks at, read in one pass over the request's fields.
///
/// `URLRequest.value(forHTTPHeaderField:)` compares names with a Unicode case-insensitive
/// comparison per call; a hit needs eight of these answers, so they are gathered at once here.
package struct RequestHeaderFacts: Sendable {
    var cacheControl: String?
    var pragma: String?
    var authorization: String?
    var cookie: String?
    /// `Range`, when the request asks for part of the representation.
    var range: String?
    /// The app validates itself (`If-*`, `If-Range` included), upgrades the connection, or asks
    /// for an event stream (`Accept: text/event-stream`), whose events must reach it as they
    /// arrive.
    var isAppControlled = false

    init(_ request: URLRequest) {
        guard let fields = request.allHTTPHeaderFields, !fields.isEmpty else { return }
        for (name, value) in fields {
            let utf8 = name.utf8
            guard let first = utf8.first else { continue }
            switch asciiLowercased(first) {
            case UInt8(ascii: "c"):
                if name.isEqualIgnoringASCIICase("Cache-Control") { cacheControl = value }
                else if name.isEqualIgnoringASCIICase("Cookie") { cookie = value }
            case UInt8(ascii: "p"):
                if name.isEqualIgnoringASCIICase("Pragma") { pragma = value }
            case UInt8(ascii: "a"):
                if name.isEqualIgnoringASCIICase("Authorization") { authorization = value }
                else if name.isEqualIgnoringASCIICase("Accept"), value.lowercased().contains("text/event-stream") {
                    isAppControlled = true
                }
            case UInt8(ascii: "i"):
                if ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range"]
                    .contains(where: name.isEqualIgnoringASCIICase) { isAppControlled = true }
            case UInt8(ascii: "r"):
                if name.isEqualIgnoringASCIICase("Range") { range = value }
            case UInt8(ascii: "u"):
                if name.isEqualIgnoringASCIICase("Upgrade") { isAppControlled = true }
            default:
                break
            }
        }
    }
}

/// A GET request the cache may answer, with what the policy needs from it parsed once.
package struct CacheRequest: @unchecked Sendable {
    // @unchecked: URLRequest is a value type but not declared Sendable on every platform; this
    // copy is never mutated after init.

    /// What the app's `URLRequest.CachePolicy` asks for.
    enum Mode: String, Sendable, Equatable {
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

        /// Whether a stored response may stand in for the origin's answer when the origin fails
        /// (a stale copy, or the cache's `504` for one that may not be served unvalidated): only
        /// when the policy decides or the app prefers stored data. A reload asked for the
        /// origin's answer, and `.revalidate` uses stored data only once the origin confirms it
        /// (Apple's documentation of `reloadRevalidatingCacheData`: "otherwise the URL is loaded
        /// from the origin source"): both get the origin's answer or its error.
        var acceptsStoredAnswerWhenTheOriginFails: Bool {
            self == .normal || self == .preferCache
        }

        /// Whether the app asked for what the origin says from now on: a reload, and a
        /// revalidation, want the answer to a request sent after they were made, so such a load
        /// never joins an identical request that is on its way already (its answer may have left
        /// the origin before the app asked). Two at once each send their own, as without the layer.
        var wantsAnAnswerSentAfterIt: Bool {
            self == .reload || self == .reloadFromOrigin || self == .revalidate
        }
    }

    let urlRequest: URLRequest
    package let key: String
    let directives: CacheControl
    let mode: Mode
    /// What keeps answers apart beyond the URL and `Vary`: the user the request is for (the
    /// digest of its credentials, `CachingUserIdentity.credentials`, unless `identified(by:)`
    /// says otherwise) and, for a session whose delegate judges server trust, that judge
    /// (`judged(by:)`). Stored with each answer; only a request of the same partition is
    /// answered with it.
    package private(set) var partition: Partition
    /// Whether the request carries credentials (`Authorization` or `Cookie`): an answer to it is
    /// stored unless the policy keeps such answers out (`CachingPolicy.storesCredentialedResponses`).
    let sendsCredentials: Bool
    /// The byte range the request asks for, when it asks for one (see `RequestDisposition.range`).
    let byteRange: ByteRange?
    /// Whether the `Cookie` field is the session's (its jar's cookies, or its additional header
    /// fields) that the layer put on the request as Apple's loader adds them when it sends it,
    /// rather than the app's own (`SessionSettings.cookieIsSessions(in:madeFrom:)`): Apple's
    /// loader makes the session's anew for each redirect hop (`SessionSettings.redirected`).
    let cookieIsSessions: Bool
    /// The request's `Authorization` and `Cookie` fields, as read once (`RequestHeaderFacts`), for
    /// `identified(by:)`. Never stored: only the partition's digest is.
    private let credentials: (authorization: String?, cookie: String?)
    /// Header fields the platform's loader adds to the request when it sends it, unless the
    /// request has them (`sent(with:)`), by lowercased name: the origin sees them, so `Vary` is
    /// matched on them (`header(_:)`). Never sent by the layer.
    private(set) var fieldsAddedWhenSent: [String: String] = [:]

    package init(_ request: URLRequest, key: String, facts: RequestHeaderFacts? = nil, cookieIsSessions: Bool = false) {
        let facts = facts ?? RequestHeaderFacts(request)
        urlRequest = request
        self.key = key
        self.cookieIsSessions = cookieIsSessions
        var directives = facts.cacheControl.map(CacheControl.init) ?? .none
        if facts.cacheControl == nil, let pragma = facts.pragma, pragma.lowercased().contains("no-cache") {
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
        partition = Partition(user: CachingUserIdentity.digest(authorization: facts.authorization, cookie: facts.cookie))
        sendsCredentials = partition.user != nil
        credentials = (facts.authorization, facts.cookie)
        byteRange = facts.range.flatMap(ByteRange.init)
    }

    /// The request as the session of a delegate that judges server trust makes it: its answers
    /// are kept apart from those fetched for sessions judged otherwise (the system's evaluation,
    /// or another delegate), which were fetched over connections this judge never saw.
    /// `judge` names the delegate's type (`DelegateTraits.trustJudge`), so the partition is the
    /// same in the next launch.
    func judged(by judge: String) -> CacheRequest {
        var judged = self
        judged.partition.judge = StableHash.hash("trust\u{0}\(judge)")
        return judged
    }

    /// The request for the user `identity` says it is for (`Partition.user`). The request's
    /// credentials decide by default (`CachingUserIdentity.credentials`, applied by `init`).
    func identified(by identity: CachingUserIdentity) -> CacheRequest {
        guard !identity.isCredentials else { return self }
        var identified = self
        identified.partition.user = identity.user(of: urlRequest, authorization: credentials.authorization, cookie: credentials.cookie)
        return identified
    }

    /// The value of a request header field as the origin gets it (for `Vary`): the request's own,
    /// else the one the loader adds when it sends the request (`fieldsAddedWhenSent`).
    func header(_ name: String) -> String? {
        urlRequest.value(forHTTPHeaderField: name) ?? (fieldsAddedWhenSent.isEmpty ? nil : fieldsAddedWhenSent[name.lowercased()])
    }

    /// The request as the loader sends it: `fields` (by lowercased name) are added when it is sent
    /// unless it has them.
    func sent(with fields: [String: String]) -> CacheRequest {
        var sent = self
        sent.fieldsAddedWhenSent = fields
        return sent
    }
}

/// How the cache treats a request before looking anything up.
package enum RequestDisposition: Equatable {
    /// Not the cache's business: Foundation loads it untouched (the protocol declines it).
    case passThrough
    /// An unsafe method: what is stored for its URL is dropped once the origin accepted it
    /// (the protocol sends it when something is stored, Foundation otherwise).
    case invalidate
    /// A GET the cache answers.
    case cacheable
    /// A GET for one byte range: the cache answers it from a complete stored response if it
    /// has one (RFC 9111 §3.4), and leaves it to Foundation otherwise.
    case range(ByteRange)

    package init(_ request: URLRequest, facts: RequestHeaderFacts? = nil) {
        guard let url = request.url, let scheme = url.scheme,
              scheme == "https" || scheme == "http" || scheme.isEqualIgnoringASCIICase("https") || scheme.isEqualIgnoringASCIICase("http"),
              url.port.map({ (0...65_535).contains($0) }) ?? true else {
            // Not http(s), or a URL no request can be sent to (a port beyond 65535): Foundation
            // answers it as it would without the cache.
            self = .passThrough
            return
        }
        let method = request.httpMethod ?? "GET"
        if method == "GET" || method.isEqualIgnoringASCIICase("GET") {
            let facts = facts ?? RequestHeaderFacts(request)
            // The app's own validation, upgrades and event streams, `no-store` requests, and
            // ranges other than one byte range go out as written.
            if facts.isAppControlled || facts.cacheControl.map({ CacheControl($0).noStore }) == true {
                self = .passThrough
            } else if let range = facts.range {
                self = ByteRange(range).map(RequestDisposition.range) ?? .passThrough
            } else {
                self = .cacheable
            }
        } else if ["HEAD", "OPTIONS", "TRACE"].contains(where: method.isEqualIgnoringASCIICase) {
            self = .passThrough
        } else {
            // RFC 9111 §4.4: an unsafe method the origin accepts invalidates the target URI.
            self = .invalidate
        }
    }
}

/// Cache keys: the method and the full URL, query included, fragment removed, scheme and host
/// lowercased. Never host and path alone (that served `?page=2` for `?page=1` in an older cache).
package enum CacheKey {
    /// The GET key of `request`'s URL, or nil without a URL.
    static func make(for request: URLRequest) -> String? {
        request.url.map { make(method: "GET", url: $0) }
    }

    /// The key of a POST a rule declares cacheable (`CachingRule.cachePOST`): the URL's, plus a
    /// digest of the body and its `Content-Type`, so the same query is one entry and another
    /// body another. The body itself is never part of the key.
    static func make(postTo url: URL, body: Data, contentType: String?) -> String {
        var digest = StableHash.hash((contentType ?? "").lowercased())
        digest = body.withUnsafeBytes { StableHash.hash($0, seed: digest) }
        let second = body.withUnsafeBytes { StableHash.hash($0, seed: ~digest) }
        return make(method: "POST", url: url) + " " + StableHash.hex(digest) + StableHash.hex(second)
    }

    /// `make(postTo:body:contentType:)` for a POST whose body is in `httpBody` (none: empty), or
    /// nil without a URL.
    static func make(forPOST request: URLRequest) -> String? {
        request.url.map { make(postTo: $0, body: request.httpBody ?? Data(), contentType: request.value(forHTTPHeaderField: "Content-Type")) }
    }

    package static func make(method: String, url: URL) -> String {
        var text = url.absoluteString
        // One pass over the bytes: where the fragment starts, where the authority ends, and
        // whether the scheme or authority has capitals (paths and queries are case-sensitive).
        var fragmentStart: Int?
        var authorityEnd: Int?
        var authorityHasCapitals = false
        text.withUTF8 { bytes in
            var slashes = 0
            for index in bytes.indices {
                let byte = bytes[index]
                if byte == UInt8(ascii: "#") {
                    fragmentStart = index
                    break
                }
                guard authorityEnd == nil else { continue }
                if byte == UInt8(ascii: "/") {
                    slashes += 1
                    if slashes == 3 { authorityEnd = index }
                } else if byte == UInt8(ascii: "?"), slashes >= 2 {
                    authorityEnd = index
                } else if byte >= 0x41, byte <= 0x5A {
                    authorityHasCapitals = true
                }
            }
        }
        if let fragmentStart {
            text = String(decoding: text.utf8.prefix(fragmentStart), as: UTF8.self)
        }
        if authorityHasCapitals {
            let end = text.utf8.index(text.utf8.startIndex, offsetBy: min(authorityEnd ?? text.utf8.count, text.utf8.count))
            text = text[..<end].lowercased() + text[end...]
        }
        return method + " " + text
    }
}
