import Foundation

/// The rules that decide what is stored, for how long, and how a stored response is reused: a
/// plain value, with two presets.
///
/// - ``heuristic(etagWindow:lastModifiedWindow:noCacheReuse:imageLifetime:maximumStaleness:)``
///   (the default) applies MKNetworkKit's rules on top of the headers: responses with an `ETag`
///   or a `Last-Modified` stay fresh for a window and are then revalidated; `no-cache` responses
///   are reused for a short while anyway; images without caching headers are kept for a week.
/// - ``rfc9111`` is a private cache that follows RFC 9111 to the letter.
///
/// Both presets run through the same decision code; a preset is only different numbers in the
/// properties below. Every number is configurable. The value is immutable once a
/// ``CachingConfiguration`` holds it and may be read from any thread.
public struct CachingPolicy: Sendable, Equatable {
    /// How long a response that carries an `ETag` and no explicit freshness (`max-age`,
    /// `Expires`) is served without asking the origin. Nil: no such window (RFC behaviour).
    public var etagWindow: TimeInterval?

    /// How a response with `Last-Modified`, no `ETag` and no explicit freshness is kept fresh.
    public var lastModifiedFreshness: LastModifiedFreshness

    /// How long a `Cache-Control: no-cache` response is reused before it is revalidated. Zero
    /// means "revalidate every time" (RFC behaviour); the heuristic default is 60 seconds, so a
    /// burst of refreshes does not hammer the origin.
    public var noCacheReuse: TimeInterval

    /// How long an `image/*` response with no caching headers at all (no `Cache-Control`,
    /// `Expires`, `ETag`, `Last-Modified` or `Pragma`) is kept. Nil: not stored (RFC behaviour).
    public var imageLifetime: TimeInterval?

    /// How long past its freshness a stored response may still be served when the origin cannot
    /// be reached or answers with a 5xx (stale-if-error), unless the response carries
    /// `must-revalidate` or `no-cache`. A `stale-if-error` directive in the response or the
    /// request overrides it. Zero: only the directive allows it (RFC behaviour).
    public var maximumStaleness: TimeInterval

    /// How long past its freshness a stored response may still be served when the origin cannot
    /// be reached at all (no response: connection refused or closed, timeout), with the same
    /// exceptions. RFC 9111 §4.2.4 lets a disconnected cache serve stale responses. Nil: the
    /// same as `maximumStaleness`. A `stale-if-error` directive overrides it too.
    public var maximumStalenessWhenDisconnected: TimeInterval?

    /// Status codes stored when the response allows it. Nil: the RFC 9111 rules (any final
    /// status with explicit freshness; heuristic freshness only for the statuses RFC 9110
    /// §15.1 calls heuristically cacheable).
    public var cacheableStatusCodes: Set<Int>?

    /// Whether a response to a request carrying `Authorization` or `Cookie` is stored like any
    /// other. Default true in both presets: this is a private cache, which RFC 9111 §3.5 lets
    /// store them (as browsers, OkHttp and Apple's `URLCache` do), and each is stored for the user
    /// the request was for and served to that user only (``CachingConfiguration/userIdentity``).
    ///
    /// False keeps them out unless the response says `Cache-Control: public` (the rule RFC 9111
    /// §3.5 sets for shared caches; the event's reason is ``NotStoredReason/credentials``): for a
    /// cache whose directory must never hold an answer to a signed request, for example one
    /// shared with another process or an app extension through an App Group container that
    /// another user of the device, or a less trusted process, can read.
    public var storesCredentialedResponses: Bool
    /// Whether redirects are stored, so a stored redirect answers without the origin (the engine
    /// follows every redirect itself, through the cache): a 301 or 308 like any response
    /// cacheable by default (explicit freshness, else the heuristics, else
    /// ``permanentRedirectLifetime``), a 302, 303 or 307 only with explicit freshness
    /// (`max-age`, `Expires`), and never one that sets a cookie. Default true in both presets,
    /// whatever ``cacheableStatusCodes`` says.
    public var storesRedirects: Bool

    /// How long a 301 or 308 without explicit freshness, `ETag` or `Last-Modified` stays fresh
    /// (RFC 9110 §15.4.2: permanent redirects are cacheable by default, and browsers keep them
    /// for a long time). Nil: only the heuristics for validators apply, so a bare 301 is not
    /// stored (RFC behaviour, the ``rfc9111`` preset). The heuristic preset keeps them one day.
    public var permanentRedirectLifetime: TimeInterval?

    /// A freshness lifetime that replaces the one the response's headers and the heuristics
    /// give, set by a ``CachingRule/freshFor(_:host:pathPrefix:)`` rule. Nil for every preset.
    var fixedLifetime: TimeInterval?

    /// How a response with `Last-Modified` and no other freshness information is kept fresh.
    public enum LastModifiedFreshness: Sendable, Equatable {
        /// Not at all: it is stored only to be revalidated.
        case none
        /// A fixed window from the moment it was stored (MKNetworkKit).
        case window(TimeInterval)
        /// A fraction of the time since it was last modified, capped (RFC 9111 §4.2.2).
        case fractionOfAge(Double, cap: TimeInterval)
    }

    /// A policy with every number given; most apps start from ``heuristic(etagWindow:lastModifiedWindow:noCacheReuse:imageLifetime:maximumStaleness:)``
    /// or ``rfc9111`` and change a property instead.
    public init(
        etagWindow: TimeInterval?,
        lastModifiedFreshness: LastModifiedFreshness,
        noCacheReuse: TimeInterval,
        imageLifetime: TimeInterval?,
        maximumStaleness: TimeInterval,
        cacheableStatusCodes: Set<Int>?,
        storesCredentialedResponses: Bool = true,
        maximumStalenessWhenDisconnected: TimeInterval? = nil,
        storesRedirects: Bool = true,
        permanentRedirectLifetime: TimeInterval? = nil
    ) {
        self.etagWindow = etagWindow
        self.lastModifiedFreshness = lastModifiedFreshness
        self.noCacheReuse = noCacheReuse
        self.imageLifetime = imageLifetime
        self.maximumStaleness = maximumStaleness
        self.cacheableStatusCodes = cacheableStatusCodes
        self.storesCredentialedResponses = storesCredentialedResponses
        self.maximumStalenessWhenDisconnected = maximumStalenessWhenDisconnected
        self.storesRedirects = storesRedirects
        self.permanentRedirectLifetime = permanentRedirectLifetime
    }

    /// MKNetworkKit's heuristic rules, the default.
    ///
    /// - Parameters:
    ///   - etagWindow: freshness of a response with an `ETag` and no `max-age`/`Expires`. Default one day.
    ///   - lastModifiedWindow: the same for `Last-Modified` without `ETag`. Default one day.
    ///   - noCacheReuse: how long a `no-cache` response is reused anyway. Default 60 seconds.
    ///   - imageLifetime: how long an image without caching headers is kept. Default seven days.
    ///   - maximumStaleness: how stale a response may be and still be served when the origin
    ///     fails. Default seven days.
    /// Statuses 200 and 203 are stored, and redirects (``storesRedirects``); a 301 or 308 with no
    /// freshness information stays fresh for a day (``permanentRedirectLifetime``).
    public static func heuristic(
        etagWindow: TimeInterval = 86_400,
        lastModifiedWindow: TimeInterval = 86_400,
        noCacheReuse: TimeInterval = 60,
        imageLifetime: TimeInterval = 604_800,
        maximumStaleness: TimeInterval = 604_800
    ) -> CachingPolicy {
        CachingPolicy(
            etagWindow: etagWindow,
            lastModifiedFreshness: .window(lastModifiedWindow),
            noCacheReuse: noCacheReuse,
            imageLifetime: imageLifetime,
            maximumStaleness: maximumStaleness,
            cacheableStatusCodes: [200, 203],
            permanentRedirectLifetime: 86_400
        )
    }

    /// A private cache as RFC 9111 specifies it: explicit freshness from `max-age` or `Expires`
    /// (with `Date` and `Age`), heuristic freshness of 10 % of the `Last-Modified` age capped at
    /// one day, `no-cache` always revalidated, stale responses served after a 5xx only where
    /// `stale-if-error` allows, and for up to seven days when the origin cannot be reached at all
    /// (RFC 9111 §4.2.4, a disconnected cache).
    public static let rfc9111 = CachingPolicy(
        etagWindow: nil,
        lastModifiedFreshness: .fractionOfAge(0.1, cap: 86_400),
        noCacheReuse: 0,
        imageLifetime: nil,
        maximumStaleness: 0,
        cacheableStatusCodes: nil,
        maximumStalenessWhenDisconnected: 604_800
    )

    /// Statuses RFC 9110 §15.1 calls heuristically cacheable ("cacheable by default").
    static let heuristicallyCacheableStatusCodes: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Statuses this cache understands for `must-understand` (RFC 9111 §5.2.2.3): those cacheable
    /// by default, and the other final statuses whose caching rules RFC 9111 defines.
    static let understoodStatusCodes: Set<Int> = heuristicallyCacheableStatusCodes.union([302, 303, 307, 400, 403, 500, 502, 503, 504])
}
