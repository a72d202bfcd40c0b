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
/// Each configuration is a cache installation of its own, with its own counters
/// (``statistics``) and offline switch (``isOffline``):
/// ``CachingURLProtocol/inject(into:using:delegate:)`` binds it to the sessions made from one
/// `URLSessionConfiguration`, and ``CachingURLProtocol/register(_:)`` makes it the
/// configuration of `URLSession.shared`. Injecting one configuration into several session
/// configurations (or registering it too) shares that installation between their sessions;
/// two configurations never share anything but what they were given (a ``CachingURLCache``
/// passed to both is one store).
///
/// A copy is the same installation until it is changed: setting any property makes the value a
/// new configuration, with counters and an offline switch of its own.
public struct CachingConfiguration: Sendable {
    /// Where entries live. Default: ``CachingURLCache/standard`` (4 MB memory, 100 MB disk, in
    /// the user's caches directory).
    public var cache: CachingURLCache { didSet { identity = Identity() } }
    /// The rules. Default: ``CachingPolicy/heuristic(etagWindow:lastModifiedWindow:noCacheReuse:imageLifetime:maximumStaleness:)``
    /// with its default numbers.
    public var policy: CachingPolicy { didSet { identity = Identity() } }
    /// Who each request is for: answers are stored for that user and served to no one else.
    /// Default ``CachingUserIdentity/credentials``: each credential (`Authorization`, the
    /// `Cookie` field) is a user of its own, which is always safe but makes a refreshed token
    /// start its user's answers again; name the user with ``CachingUserIdentity/cookie(named:)``,
    /// ``CachingUserIdentity/header(_:)`` or ``CachingUserIdentity/custom(_:)`` so they stay hits.
    /// See ``CachingUserIdentity``.
    public var userIdentity: CachingUserIdentity { didSet { identity = Identity() } }
    /// How stale entries with validators are checked. Default: ``RevalidationStrategy/head``.
    public var revalidation: RevalidationStrategy { didSet { identity = Identity() } }
    /// The clock every freshness decision reads. Default: the system clock. Tests and demos pass
    /// a clock they can move forward.
    public var now: @Sendable () -> Date { didSet { identity = Identity() } }
    /// Whether answers carry a `Cache-Status` header (RFC 9211) naming this cache: `CachingProtocol; hit`
    /// for a fresh hit, `CachingProtocol; hit; ttl=-30; detail=stale` for a stale one,
    /// `CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=600` for a miss, and for an
    /// answer the cache did not store, why not: `CachingProtocol; fwd=uri-miss; fwd-status=200;
    /// detail=noStore` (the ``NotStoredReason`` its ``CacheEvent`` carries). Default true.
    /// Besides it, a response served from the cache carries the `Age` HTTP requires of a cache
    /// (RFC 9111 §5.1): how long ago the origin produced it, in seconds; nothing else is added.
    public var addsCacheStatus: Bool { didSet { identity = Identity() } }
    /// Whether identical concurrent requests that must go to the origin share one upstream
    /// request. Default true.
    public var collapsesRequests: Bool { didSet { identity = Identity() } }
    /// Called once per request the protocol answers, just before the answer is handed to the
    /// app, on an internal thread. Keep it fast: the app waits for it. Default nil. Events carry no header values, so nothing
    /// secret reaches a log through them.
    ///
    /// On Linux it may run on Foundation's URLSession queue (an answer from the cache is given in
    /// `startLoading`, which Foundation calls there): it must not make a URLSession task or wait
    /// for one itself, which there deadlocks; hand such work to a queue of its own. An answer
    /// fetched from the origin is given on one of the layer's threads while an observer is set.
    public var observer: (@Sendable (CacheEvent) -> Void)? { didSet { identity = Identity() } }
    /// Rules for some of the requests, by host, path prefix or predicate; the first that matches
    /// a request wins (see ``CachingRule``). Default none: every request follows ``policy``.
    public var rules: [CachingRule] { didSet { identity = Identity() } }
    /// Where warnings go. Default: standard error. (Nothing is logged at present: the
    /// registration check that warned was dropped, ``CachingURLProtocol/register(_:)``.)
    public var log: @Sendable (String) -> Void { didSet { identity = Identity() } }

    /// A configuration; every argument has the default documented on its property.
    public init(
        cache: CachingURLCache = .standard,
        policy: CachingPolicy = .heuristic(),
        userIdentity: CachingUserIdentity = .credentials,
        revalidation: RevalidationStrategy = .head,
        now: @escaping @Sendable () -> Date = Date.init,
        addsCacheStatus: Bool = true,
        collapsesRequests: Bool = true,
        rules: [CachingRule] = [],
        observer: (@Sendable (CacheEvent) -> Void)? = nil,
        log: @escaping @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data("CachingProtocol: \(message)\n".utf8))
        }
    ) {
        self.cache = cache
        self.policy = policy
        self.userIdentity = userIdentity
        self.revalidation = revalidation
        self.now = now
        self.addsCacheStatus = addsCacheStatus
        self.collapsesRequests = collapsesRequests
        self.rules = rules
        self.observer = observer
        self.log = log
        identity = Identity()
    }

    // MARK: The installation

    /// What makes this value one installation: its counters and its offline switch, shared by
    /// its unchanged copies. (The installation's engine lives in the registry of the protocol
    /// that installs it, keyed by this identity.)
    private(set) var identity: Identity

    /// Counters of the requests this configuration's sessions made since it was first injected
    /// or registered: zero before, and again once nothing uses it any more (after
    /// ``CachingURLProtocol/unregister()``, or when `register` replaced it and it was never
    /// injected). Thread-safe.
    public var statistics: CacheStatistics {
        identity.counters.withLock { $0 }
    }

    /// Offline mode for this configuration's sessions: when true, GETs are answered only from
    /// the cache (stale answers included, marked in `Cache-Status`); anything not stored fails
    /// with `URLError.resourceUnavailable`. Default false. Setting it does not make a new
    /// configuration: every copy of this one sees it. Thread-safe.
    public var isOffline: Bool {
        get { identity.offline.withLock { $0 } }
        nonmutating set { identity.offline.withLock { $0 = newValue } }
    }

    /// The installation behind a configuration and its unchanged copies.
    final class Identity: Sendable {
        let offline = Locked(false)
        /// What the installation's engine counted (`statistics`).
        let counters = Locked(CacheStatistics())
    }
}
