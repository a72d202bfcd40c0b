import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a stored response that may have changed is checked with the origin.
public enum RevalidationStrategy: Sendable, Equatable {
    /// A `HEAD` with `If-None-Match` / `If-Modified-Since`. A `304` (or a `200` with the same
    /// validators) keeps the stored body; anything else is followed by a `GET` for the new body.
    /// Unchanged resources cost one small round trip with no body; changed ones cost two.
    case head
    /// A conditional `GET`. A `304` keeps the stored body; a `200` carries the new one.
    /// Every check costs one round trip; a changed resource moves its body in that same trip.
    case conditionalGet
}

/// Everything an installation of the cache needs, in one value with documented defaults.
///
/// Only one configuration is active per process: ``CachingURLProtocol/register(_:)`` and
/// ``CachingURLProtocol/inject(into:using:)`` install it for every session that uses the
/// protocol. Installing another replaces it for requests that start afterwards.
public struct CachingConfiguration: Sendable {
    /// Where entries live. Default: ``CachingURLCache/standard`` (4 MB memory, 100 MB disk, in
    /// the user's caches directory).
    public var cache: CachingURLCache
    /// The rules. Default: ``CachingPolicy/heuristic(etagWindow:lastModifiedWindow:noCacheReuse:imageLifetime:maximumStaleness:)``
    /// with its default numbers.
    public var policy: CachingPolicy
    /// How stale entries with validators are checked. Default: ``RevalidationStrategy/head``.
    public var revalidation: RevalidationStrategy
    /// The clock every freshness decision reads. Default: the system clock. Tests and demos pass
    /// a clock they can move forward.
    public var now: @Sendable () -> Date
    /// Whether answers carry a `Cache-Status` header (RFC 9211) naming this cache: `CachingProtocol; hit`
    /// for a fresh hit, `CachingProtocol; hit; ttl=-30; detail=stale` for a stale one,
    /// `CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=600` for a miss. Default true.
    /// Besides it, a response served from the cache carries the `Age` HTTP requires of a cache
    /// (RFC 9111 §5.1): how long ago the origin produced it, in seconds; nothing else is added.
    public var addsCacheStatus: Bool
    /// Whether identical concurrent requests that must go to the origin share one upstream
    /// request. Default true.
    public var collapsesRequests: Bool
    /// Called once per request the protocol answers, just before the answer is handed to the
    /// app, on an internal thread. Keep it fast: the app waits for it. Default nil. Events carry no header values, so nothing
    /// secret reaches a log through them.
    public var observer: (@Sendable (CacheEvent) -> Void)?
    /// Where warnings go (for example "registered too late"). Default: standard error.
    public var log: @Sendable (String) -> Void

    /// A configuration; every argument has the default documented on its property.
    public init(
        cache: CachingURLCache = .standard,
        policy: CachingPolicy = .heuristic(),
        revalidation: RevalidationStrategy = .head,
        now: @escaping @Sendable () -> Date = { Date() },
        addsCacheStatus: Bool = true,
        collapsesRequests: Bool = true,
        observer: (@Sendable (CacheEvent) -> Void)? = nil,
        log: @escaping @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data("CachingProtocol: \(message)\n".utf8))
        }
    ) {
        self.cache = cache
        self.policy = policy
        self.revalidation = revalidation
        self.now = now
        self.addsCacheStatus = addsCacheStatus
        self.collapsesRequests = collapsesRequests
        self.observer = observer
        self.log = log
    }
}
