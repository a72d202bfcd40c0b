import Foundation

/// What the engine does with a request after the lookup: the policy's plan
/// (`CachingPolicy.plan(for:stored:keyWasStored:now:offline:)`).
package enum LoadPlan: Sendable, Equatable {
    /// Answer with the stored response (for a byte range, its part); no network. `isStale`: the
    /// request accepted a stale answer (`max-stale`, `.returnCacheDataElseLoad`, offline mode).
    case answerStored(CacheEntry, isStale: Bool)
    /// Answer with the stored, stale response now and revalidate it in the background
    /// (`stale-while-revalidate`).
    case answerStaleAndRevalidate(CacheEntry, RevalidationConditions)
    /// Ask the origin.
    case send(ExchangePlan)
    /// Nothing usable may be served and the network may not be used: a `504` when `gatewayTimeout`
    /// (`only-if-cached`), else an error.
    case unavailable(gatewayTimeout: Bool)

    var isUnavailable: Bool {
        if case .unavailable = self { return true }
        return false
    }
}

/// What an exchange asks the origin: the network half of a `LoadPlan`.
package enum ExchangePlan: Sendable, Equatable {
    /// A plain GET; `fallback` is what an error may fall back to, `forward` why the request went to
    /// the origin (for `Cache-Status`).
    case fetch(fallback: CacheEntry?, forward: CacheStatus.Forward)
    /// A conditional request for a stored response (HEAD or GET, per the configuration).
    case revalidate(CacheEntry, RevalidationConditions)
    /// The request as it is, whose answer is handed on and never stored (a byte range the store
    /// could not answer after all, for a policy that stores no partial content; a redirect's
    /// target the cache would leave to Foundation).
    case forward
    /// An unsafe request (POST, PUT, PATCH, DELETE …) sent as it is, method and body, for a URL
    /// with something stored (or a redirect's target): once the origin accepts it, what is stored
    /// for the URL (and for its `Location` and `Content-Location` on the same origin) is dropped
    /// (RFC 9111 §4.4).
    case unsafe
}

/// The validators sent when revalidating a stored response.
package struct RevalidationConditions: Sendable, Equatable {
    var ifNoneMatch: String?
    var ifModifiedSince: String?

    /// The validators of `entry`, or nil when it has none (then it can only be refetched).
    init?(_ entry: CacheEntry) {
        ifNoneMatch = entry.headers["ETag"]
        ifModifiedSince = entry.headers["Last-Modified"]
        if ifNoneMatch == nil && ifModifiedSince == nil { return nil }
    }
}
