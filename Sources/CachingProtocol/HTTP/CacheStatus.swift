import Foundation

/// A `Cache-Status` field value (RFC 9211) describing how this cache handled one request.
struct CacheStatus: Sendable, Equatable {
    /// Why the request went to the origin (the `fwd` parameter); nil for a hit.
    enum Forward: String, Sendable {
        /// Nothing was stored for the URL.
        case uriMiss = "uri-miss"
        /// Something was stored for the URL, but not for this request's `Vary` headers or credentials.
        case varyMiss = "vary-miss"
        /// A stored response existed but was stale (revalidation).
        case stale
        /// The request asked for a reload (`no-cache`, `.reloadIgnoringLocalCacheData`).
        case request
        /// The request's method is not cacheable (an unsafe method the cache sent on).
        case method
        /// A part of the response was stored, but not the part the request asks for.
        case partial
    }

    /// The cache's name in the header.
    static let cacheName = "CachingProtocol"

    var forward: Forward?
    var forwardStatus: Int?
    var stored = false
    var timeToLive: Int?
    var detail: String?

    var headerValue: String {
        var value = Self.cacheName
        if let forward {
            value += "; fwd=\(forward.rawValue)"
            if let forwardStatus { value += "; fwd-status=\(forwardStatus)" }
            if stored { value += "; stored" }
        } else {
            value += "; hit"
        }
        if let timeToLive { value += "; ttl=\(timeToLive)" }
        if let detail { value += "; detail=\(detail)" }
        return value
    }
}
