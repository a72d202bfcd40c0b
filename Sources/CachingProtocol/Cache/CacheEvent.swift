import Foundation

/// One request the protocol answered, as reported to ``CachingConfiguration/observer``.
public struct CacheEvent: Sendable {
    /// Where the answer came from.
    public enum Outcome: Sendable, Equatable, CaseIterable {
        /// Served from the cache; the origin was not contacted.
        case hit
        /// Served stale from the cache because the request allowed it (`max-stale`,
        /// `.returnCacheDataElseLoad`, offline mode) or while a background revalidation runs
        /// (`stale-while-revalidate`).
        case staleHit
        /// The origin confirmed the stored response (304, or a `HEAD` with the same validators);
        /// the body came from the cache.
        case revalidatedNotModified
        /// The origin had a newer response; it replaced the stored one.
        case revalidatedChanged
        /// Nothing usable was stored; the response came from the origin.
        case fetched
        /// The origin failed or answered 5xx, and a stale stored response was served instead.
        case staleAfterError
        /// Only the cache could answer and it had nothing usable.
        case notInCache
        /// The request failed.
        case failed
    }

    /// The cache key, e.g. `GET https://example.com/feed?page=2`.
    public var key: String
    /// Where the answer came from.
    public var outcome: Outcome
    /// The status the origin sent for this request, if it was contacted (304 for a successful
    /// revalidation).
    public var originStatus: Int?
    /// The methods sent upstream for this request, in order (e.g. `["HEAD", "GET"]`); empty for
    /// a hit. Shared upstream requests are listed for every request that joined them.
    public var upstreamMethods: [String]
    /// Body bytes received from the origin for this request.
    public var upstreamBytes: Int
    /// Body bytes handed to the app.
    public var deliveredBytes: Int
    /// True when the request joined an identical request already on its way to the origin.
    public var collapsed: Bool
    /// From the start of loading to the answer, in seconds (wall clock, not the injected clock).
    public var duration: TimeInterval
    /// Why the response the origin sent for this request was not stored (`no-store`, its
    /// status, its size, `Vary: *`, credentials, …), or nil: it was stored, or nothing was
    /// fetched (a hit, a failure, a `304` whose fields allow storing the confirmed response).
    /// Set for every load that shared the fetch. The answer's `Cache-Status` names it too
    /// (`detail=noStore`), unless ``CachingConfiguration/addsCacheStatus`` is off.
    public var notStoredReason: NotStoredReason? = nil
}

/// Counters of an installation, since it was installed. The answer counters are named after
/// ``CacheEvent/Outcome``: each answer counts in exactly one of them.
public struct CacheStatistics: Sendable, Equatable {
    /// ``CacheEvent/Outcome/hit``: served fresh from the cache without contacting the origin.
    public var hits = 0
    /// ``CacheEvent/Outcome/staleHit``: served stale by request, offline mode or
    /// stale-while-revalidate.
    public var staleHits = 0
    /// ``CacheEvent/Outcome/revalidatedNotModified``: revalidations (304 or the same validators)
    /// that kept the stored body.
    public var revalidatedNotModified = 0
    /// ``CacheEvent/Outcome/revalidatedChanged``: revalidations that found a changed resource.
    public var revalidatedChanged = 0
    /// ``CacheEvent/Outcome/fetched``: requests that had to be fetched from the origin.
    public var fetched = 0
    /// ``CacheEvent/Outcome/staleAfterError``: stale answers served because the origin failed.
    public var staleAfterError = 0
    /// ``CacheEvent/Outcome/notInCache``: only the cache could answer and it had nothing usable.
    public var notInCache = 0
    /// ``CacheEvent/Outcome/failed``: requests that failed.
    public var failed = 0
    /// Requests that joined an identical upstream request (counted in their outcome as well).
    public var collapsed = 0
    /// Body bytes received from origins.
    public var upstreamBytes = 0
    /// Body bytes handed to apps.
    public var deliveredBytes = 0
    /// A running estimate of upstream throughput in bytes per second, from transfers of at least
    /// 16 KB (smaller ones measure latency, not bandwidth); nil until one was seen.
    public var estimatedBandwidth: Double?

    /// All counters at zero and no bandwidth estimate.
    public init() {}
}
