import Foundation

/// A `Cache-Status` field value (RFC 9211) describing how this cache handled one request.
package struct CacheStatus: Sendable, Equatable {
    /// Why the request went to the origin (the `fwd` parameter); nil for a hit.
    package enum Forward: String, Sendable {
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
    /// The cache key, when a key rule made it differ from the URL (the `key` parameter).
    var key: String?
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
        if let key { value += "; key=" + Self.quoted(key) }
        if let detail { value += "; detail=\(detail)" }
        return value
    }

    /// `text` as a structured-field string (RFC 8941 §3.3.3): quoted, with `"` and `\` escaped;
    /// characters a field value cannot carry become `?`.
    static func quoted(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"", "\\": quoted += "\\" + String(scalar)
            case " "..."~": quoted.unicodeScalars.append(scalar)
            default: quoted += "?"
            }
        }
        return quoted + "\""
    }
}

extension CacheStatus {
    /// A hit on `entry` at `now`. A fresh hit is plain `hit` (no `ttl`, so the response built for
    /// it stays valid); a stale one carries its negative `ttl` and `detail=stale`.
    static func hit(_ entry: CacheEntry, stale: Bool, at now: Date) -> CacheStatus {
        guard stale else { return CacheStatus() }
        return CacheStatus(timeToLive: timeToLive(of: entry, at: now), detail: "stale")
    }

    /// `entry`'s whole seconds of freshness left at `now` (negative once stale), for `ttl`.
    static func timeToLive(of entry: CacheEntry, at now: Date) -> Int {
        Int(entry.timeToLive(at: now).rounded(.down))
    }
}

extension CacheStatus {
    /// The detail of an answer reached through a stored redirect the engine followed.
    static let viaStoredRedirect = "via-stored-redirect"

    /// The detail of an answer the cache did not store: the name of `reason`
    /// (``NotStoredReason/description``, the one ``CacheEvent/notStoredReason`` carries), so a
    /// proxy or a log shows why without an observer. Every name is letters only, so a
    /// structured-field token (RFC 8941 §3.3.4), which RFC 9211 §2.8 allows as a `detail`.
    static func notStored(_ reason: NotStoredReason) -> String {
        reason.description
    }

    /// The `Cache-Status` field `value` with `detail` added: as its `detail` parameter, or joined
    /// to the one it has (`detail=stale` becomes `detail="stale via-stored-redirect"`).
    static func adding(detail: String, to value: String) -> String {
        var parameters = value.components(separatedBy: "; ")
        guard let index = parameters.firstIndex(where: { $0.hasPrefix("detail=") }) else { return value + "; detail=" + detail }
        var existing = parameters[index].dropFirst("detail=".count)
        if existing.hasPrefix("\""), existing.hasSuffix("\""), existing.count >= 2 { existing = existing.dropFirst().dropLast() }
        parameters[index] = "detail=\"\(existing) \(detail)\""
        return parameters.joined(separator: "; ")
    }
}
