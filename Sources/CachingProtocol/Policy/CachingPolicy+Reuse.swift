import Foundation

extension CachingPolicy {
    // MARK: Reuse

    /// What the engine does with `request` given the variant that matched it (if any), at `now`:
    /// answer from the store, ask the origin (and why, for `Cache-Status`), or answer that nothing
    /// may be served. Pure: the step between the lookup and the network. `keyWasStored` tells a
    /// `Vary` miss from a miss (default: whether a variant matched); `offline` is the
    /// installation-wide offline switch: any stored response is acceptable.
    package func plan(for request: CacheRequest, stored: CacheEntry?, keyWasStored: Bool? = nil, now: Date,
                      offline: Bool = false) -> LoadPlan {
        let plan = reuse(for: request, stored: stored, keyWasStored: keyWasStored ?? (stored != nil), now: now, offline: offline)
        if let range = request.byteRange, !plan.isUnavailable {
            return rangePlan(range, of: request, reusing: plan, keyWasStored: keyWasStored ?? (stored != nil))
        }
        return plan
    }

    /// The plan for the whole response `request` names.
    private func reuse(for request: CacheRequest, stored: CacheEntry?, keyWasStored: Bool, now: Date, offline: Bool) -> LoadPlan {
        guard let entry = stored else {
            if offline || request.mode == .onlyCache || request.directives.onlyIfCached {
                return unavailable(request, offline: offline)
            }
            return fetch(request, fallback: nil, keyWasStored: keyWasStored)
        }
        let timeToLive = entry.timeToLive(at: now)
        switch request.mode {
        case .reload, .reloadFromOrigin:
            return fetch(request, fallback: entry, keyWasStored: keyWasStored)
        case .preferCache, .onlyCache:
            return .answerStored(entry, isStale: timeToLive <= 0)
        case .revalidate:
            // RFC 8246: a fresh `immutable` response is not revalidated on a reload.
            if timeToLive > 0, Self.responseDirectives(entry.headers).immutable {
                return .answerStored(entry, isStale: false)
            }
            return RevalidationConditions(entry).map { .send(.revalidate(entry, $0)) }
                ?? fetch(request, fallback: entry, keyWasStored: keyWasStored)
        case .normal:
            break
        }
        if offline {
            return .answerStored(entry, isStale: timeToLive <= 0)
        }

        let directives = request.directives
        var freshEnough = timeToLive > 0 && !directives.noCache
        if let maxAge = directives.maxAge, entry.age(at: now) > TimeInterval(maxAge) { freshEnough = false }
        if let minFresh = directives.minFresh, timeToLive < TimeInterval(minFresh) { freshEnough = false }
        if freshEnough {
            return .answerStored(entry, isStale: false)
        }

        let conditions = RevalidationConditions(entry)
        if !directives.noCache, timeToLive <= 0 {
            let stored = storedDirectives(entry)
            let staleness = -timeToLive
            if mayServeStale(stored) {
                if let maxStale = directives.maxStale {
                    switch maxStale {
                    case .any: return .answerStored(entry, isStale: true)
                    case .seconds(let limit) where staleness <= TimeInterval(limit): return .answerStored(entry, isStale: true)
                    default: break
                    }
                }
                if let window = stored.staleWhileRevalidate, staleness <= TimeInterval(window), let conditions {
                    return .answerStaleAndRevalidate(entry, conditions)
                }
            }
        }
        if directives.onlyIfCached {
            return unavailable(request, offline: offline)
        }
        return conditions.map { .send(.revalidate(entry, $0)) } ?? fetch(request, fallback: entry, keyWasStored: keyWasStored)
    }

    /// A plain GET for `request`, with why it goes to the origin (`Cache-Status`'s `fwd`):
    /// `fallback` is the matching variant an error may fall back to; `partStored`, for a range
    /// request, that a stored part matched but does not hold the range.
    private func fetch(_ request: CacheRequest, fallback: CacheEntry?, keyWasStored: Bool, partStored: Bool = false) -> LoadPlan {
        let forward: CacheStatus.Forward
        if [.reload, .reloadFromOrigin].contains(request.mode) || request.directives.noCache {
            forward = .request
        } else if fallback != nil {
            forward = .stale   // the matching variant is stale and has no validator to revalidate with
        } else if partStored {
            forward = .partial
        } else {
            forward = keyWasStored ? .varyMiss : .uriMiss
        }
        return .send(.fetch(fallback: fallback, forward: forward))
    }

    /// Nothing usable may be served and the network may not be used: `only-if-cached` gets the
    /// 504 RFC 9111 §5.2.1.7 prescribes; `.returnCacheDataDontLoad` and offline mode an error, as
    /// Foundation gives for a miss in that mode.
    private func unavailable(_ request: CacheRequest, offline: Bool) -> LoadPlan {
        .unavailable(gatewayTimeout: request.directives.onlyIfCached && request.mode == .normal && !offline)
    }

    /// A request for one byte range, given the plan for the whole response. A stored response
    /// that holds the range answers it. Unless the policy stores partial content, anything else
    /// goes to the origin as it is and its answer is not stored (the request was taken because a
    /// stored response answered it, and that went stale since). Otherwise a stored response that
    /// holds the range but is stale is revalidated with a conditional range GET, and anything
    /// else is fetched with the range: a `206` answer is stored, or combined with the part
    /// stored before.
    private func rangePlan(_ range: ByteRange, of request: CacheRequest, reusing whole: LoadPlan, keyWasStored: Bool) -> LoadPlan {
        if case .answerStored(let entry, _) = whole, Self.servesRange(range, from: entry) != nil {
            return whole
        }
        guard storesPartialContent else { return .send(.forward) }
        let stored: CacheEntry?
        switch whole {
        case .answerStored(let entry, _), .send(.fetch(fallback: let entry?, _)):
            stored = entry
        case .send(.revalidate(let entry, let conditions)), .answerStaleAndRevalidate(let entry, let conditions):
            if Self.servesRange(range, from: entry) != nil { return .send(.revalidate(entry, conditions)) }
            stored = entry
        case .send, .unavailable:
            stored = nil
        }
        let holdsRange = stored.flatMap { Self.servesRange(range, from: $0) } != nil
        return fetch(request, fallback: holdsRange ? stored : nil, keyWasStored: keyWasStored,
                     partStored: stored?.statusCode == 206)
    }

    /// Whether `entry` may be served, stale, because the origin failed at `now`: it answered
    /// with a 5xx, or (`disconnected`) it could not be reached at all. RFC 9111 §4.2.4: never for
    /// `no-cache` or `must-revalidate` responses; never for a request that refuses stored data
    /// the origin did not confirm (`Mode.acceptsStoredAnswerWhenTheOriginFails`).
    package func mayServeAfterError(_ entry: CacheEntry, request: CacheRequest, now: Date, disconnected: Bool = false) -> Bool {
        let stored = storedDirectives(entry)
        guard request.mode.acceptsStoredAnswerWhenTheOriginFails, mayServeStale(stored),
              !request.directives.noCache || request.mode == .preferCache else { return false }
        let staleness = -entry.timeToLive(at: now)
        if staleness <= 0 { return true }
        let allowance = request.directives.staleIfError.map(TimeInterval.init)
            ?? stored.staleIfError.map(TimeInterval.init)
            ?? (disconnected ? maximumStalenessWhenDisconnected ?? maximumStaleness : maximumStaleness)
        return staleness <= allowance
    }

    /// Whether a failed attempt to validate `entry` for `request` (no response from the origin)
    /// is answered with a `504 Gateway Timeout` from the cache: RFC 9111 §5.2.2.2 requires it for
    /// `must-revalidate` responses (a disconnected cache "MUST generate an error response rather
    /// than reuse the stale response"), and `no-cache` ones may not be used unvalidated either
    /// (§5.2.2.4). A request that refuses stored data the origin did not confirm gets the
    /// origin's error instead (`Mode.acceptsStoredAnswerWhenTheOriginFails`).
    func answersGatewayTimeoutWhenUnvalidated(_ entry: CacheEntry, for request: CacheRequest) -> Bool {
        request.mode.acceptsStoredAnswerWhenTheOriginFails && !mayServeStale(storedDirectives(entry))
    }

    /// RFC 9111 §4.2.4: a response carrying `no-cache` or `must-revalidate` is never served stale.
    private func mayServeStale(_ stored: CacheControl) -> Bool {
        !stored.noCache && !stored.mustRevalidate
    }

    private func storedDirectives(_ entry: CacheEntry) -> CacheControl {
        Self.responseDirectives(entry.headers)
    }

    // MARK: Variants

    /// The stored variant that may answer `request`: the same partition (user and trust judge),
    /// and every header the response's `Vary` named has the same value (RFC 9111 §4.1). Newest first.
    package static func matchingVariant(in record: CacheRecord?, for request: CacheRequest) -> CacheEntry? {
        // A stored part answers only a request for one byte range (and only one it covers,
        // `servesRange`), never a request for the whole.
        guard let entry = record?.variants.first(where: { variant($0, matches: request) }),
              entry.statusCode != 206 || request.byteRange != nil else { return nil }
        return entry
    }

    /// Whether the stored variant `entry` may answer `request` (see `matchingVariant`): it was
    /// stored for the same user (`CacheRequest.identified(by:)`; or for nobody in particular), so
    /// one user's answer never reaches another, nor an anonymous answer a signed-in user — and
    /// for a session judged by the same trust judge (`CacheRequest.judged(by:)`); and its `Vary`
    /// values match. Every path to a stored answer goes through here (a hit, a stale answer, the
    /// variant a revalidation's conditions and its `304` apply to, ranges, redirects, the
    /// `URLCache` API), so a validator the origin gives every user never crosses users.
    static func variant(_ entry: CacheEntry, matches request: CacheRequest) -> Bool {
        entry.partition == request.partition
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

/// An entry's age and freshness (RFC 9111 §4.2.3, §4.2): what every reuse decision reads.
extension CacheEntry {
    /// The entry's current age at `now` (RFC 9111 §4.2.3 `current_age`).
    package func age(at now: Date) -> TimeInterval {
        initialAge + max(0, now.timeIntervalSince(responseDate))
    }

    /// Seconds of freshness left at `now`; negative once stale.
    package func timeToLive(at now: Date) -> TimeInterval {
        freshnessLifetime - age(at: now)
    }
}
