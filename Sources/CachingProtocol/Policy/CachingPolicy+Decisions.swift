import Foundation

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

/// What to do with a cacheable request, given what is stored: the output of the decision core.
package enum ReuseDecision: Sendable, Equatable {
    /// Answer with the stored response; no network. `isStale` is true when the request accepted
    /// a stale answer (`max-stale`, `.returnCacheDataElseLoad`, offline mode).
    case useStored(CacheEntry, isStale: Bool)
    /// Answer with the stored (stale) response now and revalidate in the background
    /// (`stale-while-revalidate`).
    case useStoredAndRevalidate(CacheEntry, RevalidationConditions)
    /// Ask the origin whether the stored response is still current.
    case revalidate(CacheEntry, RevalidationConditions)
    /// Load from the origin: nothing usable is stored, or the request asked for a reload. The
    /// entry, if any, is what a failure may fall back to.
    case fetch(fallback: CacheEntry?)
    /// Only the cache may answer and nothing usable is stored.
    case unavailable
}

/// How a response was reached, where that decides whether it may be stored.
package struct ResponseRoute: Sendable, Equatable {
    /// The redirects followed on the way, in order: after a temporary one (302, 303, 307) the
    /// final response is not stored under the original URL, which may point elsewhere next time.
    package var redirectStatuses: [Int]
    /// A redirect on the way set a cookie: the final response may depend on it.
    package var cookieSetOnTheWay: Bool
    /// The app answered an authentication challenge with a credential on the way: the response
    /// belongs to that credential, which the request's fingerprint does not show.
    package var answeredWithCredential: Bool

    package init(redirectStatuses: [Int] = [], cookieSetOnTheWay: Bool = false, answeredWithCredential: Bool = false) {
        self.redirectStatuses = redirectStatuses
        self.cookieSetOnTheWay = cookieSetOnTheWay
        self.answeredWithCredential = answeredWithCredential
    }

    /// Reached directly, with nothing of the above.
    package static let direct = ResponseRoute()
}

/// Whether and how long a response is stored: the output of the storage half of the core.
package enum StorageDecision: Sendable, Equatable {
    case store(freshnessLifetime: TimeInterval, initialAge: TimeInterval)
    case doNotStore(reason: String)
}

extension CachingPolicy {
    // MARK: Reuse

    /// Decides how `request` is answered given the variant that matched it (if any) at `now`.
    /// `offline` is the installation-wide offline switch: any stored response is acceptable.
    package func decision(for request: CacheRequest, stored: CacheEntry?, now: Date, offline: Bool = false) -> ReuseDecision {
        guard let entry = stored else {
            return offline || request.mode == .onlyCache || request.directives.onlyIfCached ? .unavailable : .fetch(fallback: nil)
        }
        let timeToLive = entry.timeToLive(at: now)
        switch request.mode {
        case .reload, .reloadFromOrigin:
            return .fetch(fallback: entry)
        case .preferCache, .onlyCache:
            return .useStored(entry, isStale: timeToLive <= 0)
        case .revalidate:
            // RFC 8246: a fresh `immutable` response is not revalidated on a reload.
            if timeToLive > 0, Self.responseDirectives(entry.headers).immutable {
                return .useStored(entry, isStale: false)
            }
            return RevalidationConditions(entry).map { .revalidate(entry, $0) } ?? .fetch(fallback: entry)
        case .normal:
            break
        }
        if offline {
            return .useStored(entry, isStale: timeToLive <= 0)
        }

        let directives = request.directives
        var freshEnough = timeToLive > 0 && !directives.noCache
        if let maxAge = directives.maxAge, entry.age(at: now) > TimeInterval(maxAge) { freshEnough = false }
        if let minFresh = directives.minFresh, timeToLive < TimeInterval(minFresh) { freshEnough = false }
        if freshEnough {
            return .useStored(entry, isStale: false)
        }

        let conditions = RevalidationConditions(entry)
        if !directives.noCache, timeToLive <= 0 {
            let stored = storedDirectives(entry)
            let staleness = -timeToLive
            if mayServeStale(stored) {
                if let maxStale = directives.maxStale {
                    switch maxStale {
                    case .any: return .useStored(entry, isStale: true)
                    case .seconds(let limit) where staleness <= TimeInterval(limit): return .useStored(entry, isStale: true)
                    default: break
                    }
                }
                if let window = stored.staleWhileRevalidate, staleness <= TimeInterval(window), let conditions {
                    return .useStoredAndRevalidate(entry, conditions)
                }
            }
        }
        if directives.onlyIfCached {
            return .unavailable
        }
        return conditions.map { .revalidate(entry, $0) } ?? .fetch(fallback: entry)
    }

    /// Whether `entry` may be served, stale, because the origin failed at `now`: it answered
    /// with a 5xx, or (`disconnected`) it could not be reached at all. RFC 9111 §4.2.4: never for
    /// `no-cache` or `must-revalidate` responses.
    package func mayServeAfterError(_ entry: CacheEntry, request: CacheRequest, now: Date, disconnected: Bool = false) -> Bool {
        let stored = storedDirectives(entry)
        guard mayServeStale(stored), !request.directives.noCache || request.mode == .preferCache else { return false }
        let staleness = -entry.timeToLive(at: now)
        if staleness <= 0 { return true }
        let allowance = request.directives.staleIfError.map(TimeInterval.init)
            ?? stored.staleIfError.map(TimeInterval.init)
            ?? (disconnected ? maximumStalenessWhenDisconnected ?? maximumStaleness : maximumStaleness)
        return staleness <= allowance
    }

    /// Whether a failed attempt to validate `entry` (no response from the origin) is answered with
    /// a `504 Gateway Timeout` from the cache: RFC 9111 §5.2.2.2 requires it for `must-revalidate`
    /// responses (a disconnected cache "MUST generate an error response rather than reuse the
    /// stale response"), and `no-cache` ones may not be used unvalidated either (§5.2.2.4).
    func answersGatewayTimeoutWhenUnvalidated(_ entry: CacheEntry) -> Bool {
        !mayServeStale(storedDirectives(entry))
    }

    /// RFC 9111 §4.2.4: a response carrying `no-cache` or `must-revalidate` is never served stale.
    private func mayServeStale(_ stored: CacheControl) -> Bool {
        !stored.noCache && !stored.mustRevalidate
    }

    private func storedDirectives(_ entry: CacheEntry) -> CacheControl {
        Self.responseDirectives(entry.headers)
    }

    // MARK: Storage

    /// Decides whether a response to `request` is stored, and its freshness lifetime and
    /// corrected initial age (RFC 9111 §4.2), from its status and headers and the times the
    /// request was sent and the response received.
    ///
    /// `route` says how the response was reached, where that matters (see `ResponseRoute`).
    package func storageDecision(
        for request: CacheRequest,
        status: Int,
        headers: HTTPHeaders,
        requestDate: Date,
        responseDate: Date,
        route: ResponseRoute = .direct
    ) -> StorageDecision {
        if route.redirectStatuses.contains(where: Self.temporaryRedirectStatuses.contains) {
            return .doNotStore(reason: "temporary redirect")
        }
        if route.cookieSetOnTheWay { return .doNotStore(reason: "cookie set on a redirect") }
        if route.answeredWithCredential { return .doNotStore(reason: "answered with the app's credential") }
        if (300...399).contains(status), headers.contains("Location") {
            // The app chose not to follow it; stored, it would be served as the final answer to
            // requests whose apps follow redirects (this layer never replays a redirect).
            return .doNotStore(reason: "redirect not followed")
        }
        if request.directives.noStore { return .doNotStore(reason: "request no-store") }
        // A part is stored only as the answer to a request for one byte range (RFC 9111 §3.3):
        // it could never answer a request for the whole (`matchingVariant`).
        if status == 206, request.byteRange == nil { return .doNotStore(reason: "206 to a request for the whole") }
        let directives = Self.responseDirectives(headers)
        if directives.mustUnderstand, !Self.understoodStatusCodes.contains(status) {
            return .doNotStore(reason: "must-understand with status \(status)")
        }
        // RFC 9111 §5.2.2.3: with `must-understand`, a status the cache understands overrides
        // `no-store` (which is there for caches that do not understand it).
        if directives.noStore, !directives.mustUnderstand { return .doNotStore(reason: "no-store") }
        if let vary = headers["Vary"], HTTPHeaders.listMembers(vary[...]).contains("*") {
            return .doNotStore(reason: "Vary: *")
        }
        if request.credentialFingerprint != nil, !storesCredentialedResponses, !directives.isPublic {
            return .doNotStore(reason: "credentials without public")
        }

        let dateHeader = headers["Date"].flatMap(HTTPDate.parse)
        let explicit = fixedLifetime ?? explicitFreshness(directives, headers: headers, date: dateHeader, responseDate: responseDate)
        if let allowed = cacheableStatusCodes {
            guard allowed.contains(status) else { return .doNotStore(reason: "status \(status)") }
        } else {
            // A 206 is stored as a part (`CachingPolicy.partialContentToStore`, RFC 9111 §3.3).
            guard (200...599).contains(status), status != 304 else { return .doNotStore(reason: "status \(status)") }
            if explicit == nil, !directives.isPublic, !Self.heuristicallyCacheableStatusCodes.contains(status) {
                return .doNotStore(reason: "status \(status) without explicit freshness")
            }
        }

        let lifetime: TimeInterval
        if let fixedLifetime {
            lifetime = fixedLifetime
        } else if directives.noCache {
            // Most restrictive wins: `no-cache` caps any other freshness at `noCacheReuse`.
            lifetime = explicit.map { min($0, noCacheReuse) } ?? noCacheReuse
        } else {
            lifetime = explicit ?? heuristicFreshness(status: status, isPublic: directives.isPublic, headers: headers,
                                                      date: dateHeader ?? responseDate)
        }
        // A fixed lifetime counts from the response's arrival, so its age there is not subtracted.
        let initialAge = fixedLifetime != nil ? 0 : Self.correctedInitialAge(headers: headers, date: dateHeader,
                                                                             requestDate: requestDate, responseDate: responseDate)
        let hasValidator = headers.contains("ETag") || headers.contains("Last-Modified")
        // A response that is stale on arrival and cannot be revalidated would only be refetched:
        // storing it wastes space (an older cache stored such responses with expiry 0).
        guard lifetime - initialAge > 0 || hasValidator else {
            return .doNotStore(reason: "no freshness and no validator")
        }
        return .store(freshnessLifetime: lifetime, initialAge: initialAge)
    }

    /// Redirect statuses after which the target may differ next time.
    static let temporaryRedirectStatuses: Set<Int> = [302, 303, 307]

    /// `max-age`, else `Expires - Date`; nil when the response states no freshness.
    private func explicitFreshness(_ directives: CacheControl, headers: HTTPHeaders, date: Date?, responseDate: Date) -> TimeInterval? {
        if directives.hasInvalidFreshness { return 0 }
        if let maxAge = directives.maxAge { return TimeInterval(maxAge) }
        guard let expiresText = headers["Expires"] else { return nil }
        // RFC 9111 §5.3: an invalid Expires (for example "0") means "already expired".
        guard let expires = HTTPDate.parse(expiresText) else { return 0 }
        return max(0, expires.timeIntervalSince(date ?? responseDate))
    }

    /// RFC 9111 §4.2.2: heuristic freshness for a status cacheable by default, or for any status
    /// when the response is marked `public`.
    private func heuristicFreshness(status: Int, isPublic: Bool, headers: HTTPHeaders, date: Date) -> TimeInterval {
        if let etagWindow, headers.contains("ETag") {
            return etagWindow
        }
        if let lastModifiedText = headers["Last-Modified"] {
            switch lastModifiedFreshness {
            case .none:
                return 0
            case .window(let window):
                return window
            case .fractionOfAge(let fraction, let cap):
                guard isPublic || Self.heuristicallyCacheableStatusCodes.contains(status),
                      let lastModified = HTTPDate.parse(lastModifiedText) else { return 0 }
                return min(cap, max(0, date.timeIntervalSince(lastModified) * fraction))
            }
        }
        if let imageLifetime, Self.hasNoCachingHeaders(headers),
           let type = headers["Content-Type"], type.lowercased().hasPrefix("image/") {
            return imageLifetime
        }
        return 0
    }

    private static func hasNoCachingHeaders(_ headers: HTTPHeaders) -> Bool {
        !["Cache-Control", "Expires", "ETag", "Last-Modified", "Pragma"].contains(where: headers.contains)
    }

    /// `Cache-Control` of a response, with `Pragma: no-cache` counted as `no-cache` when there is
    /// no `Cache-Control` at all.
    static func responseDirectives(_ headers: HTTPHeaders) -> CacheControl {
        let cacheControl = headers["Cache-Control"]
        var directives = CacheControl(cacheControl)
        if cacheControl == nil, let pragma = headers["Pragma"], pragma.lowercased().contains("no-cache") {
            directives.noCache = true
        }
        return directives
    }

    /// The `Age` field's value (RFC 9111 §5.1): of a list (or of several lines), the first
    /// member; nil when that is not a non-negative integer (`10a`, `-1`, `1.5`, `7200;x=y`),
    /// which a cache ignores. Values beyond 2^31 count as 2^31.
    static func ageValue(_ headers: HTTPHeaders) -> Int? {
        guard let value = headers["Age"] else { return nil }
        return CacheControl.deltaSeconds(HTTPHeaders.listMembers(value[...], omittingEmpty: false).first ?? "")
    }

    /// The fields of a response as a cache stores them (RFC 9111 §3.1): without `Connection`
    /// and the fields it names, and without the hop-by-hop and proxy fields, which describe one
    /// connection, not the response.
    static func storableHeaders(_ headers: HTTPHeaders) -> HTTPHeaders {
        var named = hopByHopFields
        for list in headers.fields where list.name.isEqualIgnoringASCIICase("Connection") {
            named += HTTPHeaders.listMembers(list.value[...]).map(String.init)
        }
        guard named.contains(where: headers.contains) else { return headers }
        var stored = headers
        for name in named { stored.remove(name) }
        return stored
    }

    /// Fields never stored: they belong to one connection or one proxy hop.
    static let hopByHopFields = ["Connection", "Keep-Alive", "Proxy-Connection", "TE", "Transfer-Encoding", "Upgrade",
                                 "Proxy-Authenticate", "Proxy-Authentication-Info", "Proxy-Authorization"]

    /// Whether a stored response is kept in memory only, never written to disk: one that sets a
    /// cookie. It is stored (a private cache may, RFC 9111 §7.1) and replayed to requests with
    /// the same credentials, but a session cookie's value never lands in a cache file; the
    /// cookie jar is where cookies persist.
    static func isKeptInMemoryOnly(_ headers: HTTPHeaders) -> Bool {
        headers.contains("Set-Cookie")
    }

    /// RFC 9111 §4.2.3: the larger of the apparent age (from `Date`) and the `Age` header plus the
    /// time the response took to arrive.
    static func correctedInitialAge(headers: HTTPHeaders, date: Date?, requestDate: Date, responseDate: Date) -> TimeInterval {
        let ageValue = Self.ageValue(headers) ?? 0
        let apparentAge = date.map { max(0, responseDate.timeIntervalSince($0)) } ?? 0
        let responseDelay = max(0, responseDate.timeIntervalSince(requestDate))
        return max(apparentAge, TimeInterval(ageValue) + responseDelay)
    }

    // MARK: Variants

    /// The stored variant that may answer `request`: same credentials, and every header the
    /// response's `Vary` named has the same value (RFC 9111 §4.1). Newest first.
    package static func matchingVariant(in record: CacheRecord?, for request: CacheRequest) -> CacheEntry? {
        guard let entry = record?.variants.first(where: { variant($0, matches: request) }),
              answersWholeOrPart(entry, request) else { return nil }
        return entry
    }

    /// Whether the stored variant `entry` may answer `request` (see `matchingVariant`): it was
    /// fetched with the same credentials (`Authorization`, `Cookie`; or none), so one user's
    /// answer never reaches another, nor an anonymous answer a signed-in user; and its `Vary`
    /// values match.
    static func variant(_ entry: CacheEntry, matches request: CacheRequest) -> Bool {
        entry.credentialFingerprint == request.credentialFingerprint
            && entry.varyFields.allSatisfy { field in
                varyValueMatches(field, request: request, entry: entry)
            }
    }

    /// The request header values the response's `Vary` names, as an entry stores them.
    package static func varyFields(for headers: HTTPHeaders, request: CacheRequest) -> [CacheEntry.VaryField] {
        guard let vary = headers["Vary"] else { return [] }
        return HTTPHeaders.listMembers(vary[...]).map { member in
            let name = member.lowercased()
            return CacheEntry.VaryField(name: name, value: varyValue(name, of: request))
        }
    }

    /// Request fields whose values are secrets: a variant keeps a digest of them, never the value.
    private static let credentialFields: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The value of the request field `name` as a variant stores and matches it: normalised,
    /// and for credentials a digest, so that `Vary: Authorization` or `Vary: Cookie` never
    /// writes a token or a session cookie into an entry file.
    static func varyValue(_ name: String, of request: CacheRequest) -> String? {
        guard let value = normalizedVaryValue(request.header(name)) else { return nil }
        if name.isEqualIgnoringASCIICase("Accept-Language") { return LanguagePreferences(value).canonical }
        guard credentialFields.contains(name.lowercased()) else { return value }
        return "digest:" + StableHash.hexDigest128(value)
    }

    /// Whether `request` has the value a stored variant's `Vary` field recorded. Equal normalised
    /// values match; for `Accept-Language` (compared without regard to case or order), so does a
    /// request whose most preferred language is the variant's `Content-Language` — the variant
    /// the origin would select for it.
    static func varyValueMatches(_ field: CacheEntry.VaryField, request: CacheRequest, entry: CacheEntry) -> Bool {
        let value = varyValue(field.name, of: request)
        if value == field.value { return true }
        guard field.name == "accept-language", let requested = request.header("Accept-Language"),
              let language = entry.headers["Content-Language"], !language.contains(",") else { return false }
        return LanguagePreferences(requested).mostPreferred == [language.trimmingCharacters(in: .whitespaces).lowercased()]
    }

    /// Field values compared for `Vary`: surrounding whitespace and whitespace around commas
    /// does not make two requests different (RFC 9111 §4.1).
    static func normalizedVaryValue(_ value: String?) -> String? {
        guard let value else { return nil }
        return value.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: ",")
    }
}

/// An `Accept-Language` field value (RFC 9110 §12.5.4) as ranges with their weights.
struct LanguagePreferences: Equatable {
    /// Language ranges, lowercased, with their `q` weights; those of weight 0 are dropped.
    let ranges: [(range: String, weight: Double)]

    init(_ value: String) {
        var ranges: [(String, Double)] = []
        for member in HTTPHeaders.listMembers(value[...]) {
            let parts = HTTPHeaders.listMembers(member, separator: UInt8(ascii: ";"))
            guard let range = parts.first?.lowercased(), !range.isEmpty else { continue }
            var weight = 1.0
            for parameter in parts.dropFirst() where parameter.lowercased().hasPrefix("q=") {
                weight = Double(parameter.dropFirst(2)).map { min(1, max(0, $0)) } ?? 1
            }
            if weight > 0 { ranges.append((range, weight)) }
        }
        self.ranges = ranges
    }

    static func == (lhs: LanguagePreferences, rhs: LanguagePreferences) -> Bool {
        lhs.canonical == rhs.canonical
    }

    /// The ranges by descending weight, then by name: equal for values that differ only in case,
    /// order or spacing.
    var canonical: String {
        ranges.sorted { $0.weight != $1.weight ? $0.weight > $1.weight : $0.range < $1.range }
            .map { $0.weight == 1 ? $0.range : "\($0.range);q=\($0.weight)" }
            .joined(separator: ",")
    }

    /// The ranges of the highest weight, sorted.
    var mostPreferred: [String] {
        guard let top = ranges.map(\.weight).max() else { return [] }
        return ranges.filter { $0.weight == top }.map(\.range).sorted()
    }
}
