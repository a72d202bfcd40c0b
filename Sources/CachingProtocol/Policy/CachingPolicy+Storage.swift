import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Whether and how long a response is stored: the output of the storage half of the core.
package enum StorageDecision: Sendable, Equatable {
    case store(freshnessLifetime: TimeInterval, initialAge: TimeInterval)
    /// Not stored: `reason` says why in words, `code` as the app sees it in its events
    /// (``CacheEvent/notStoredReason``). Two decisions are equal when their words are: each
    /// text comes with one code.
    case doNotStore(reason: String, code: NotStoredReason = .other)

    package static func == (lhs: StorageDecision, rhs: StorageDecision) -> Bool {
        switch (lhs, rhs) {
        case let (.store(lhsLifetime, lhsAge), .store(rhsLifetime, rhsAge)):
            return lhsLifetime == rhsLifetime && lhsAge == rhsAge
        case let (.doNotStore(lhsReason, _), .doNotStore(rhsReason, _)):
            return lhsReason == rhsReason
        default:
            return false
        }
    }
}

extension CachingPolicy {
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
        if route.answeredWithCredential { return .doNotStore(reason: "answered with the app's credential", code: .challengeCredential) }
        let isRedirect = (300...399).contains(status) && Self.isStorableRedirect(status: status, headers: headers)
        if isRedirect {
            guard storesRedirects else { return .doNotStore(reason: "redirect (storesRedirects is off)", code: .redirect) }
            // Replayed from the cache it would set no cookie, and where it leads may depend on one.
            if headers.contains("Set-Cookie") { return .doNotStore(reason: "redirect that sets a cookie", code: .cookieSetOnRedirect) }
        }
        if request.directives.noStore { return .doNotStore(reason: "request no-store", code: .requestNoStore) }
        // A part is stored only as the answer to a request for one byte range (RFC 9111 §3.3):
        // it could never answer a request for the whole (`matchingVariant`).
        if status == 206, request.byteRange == nil { return .doNotStore(reason: "206 to a request for the whole", code: .partialContent) }
        let directives = Self.responseDirectives(headers)
        if directives.mustUnderstand, !Self.understoodStatusCodes.contains(status) {
            return .doNotStore(reason: "must-understand with status \(status)", code: .mustUnderstand)
        }
        // RFC 9111 §5.2.2.3: with `must-understand`, a status the cache understands overrides
        // `no-store` (which is there for caches that do not understand it).
        if directives.noStore, !directives.mustUnderstand { return .doNotStore(reason: "no-store", code: .noStore) }
        if Self.isEventStream(headers) { return .doNotStore(reason: "event stream", code: .eventStream) }
        if let vary = headers["Vary"], HTTPHeaders.listMembers(vary[...]).contains("*") {
            return .doNotStore(reason: "Vary: *", code: .varyAll)
        }
        if request.sendsCredentials, !storesCredentialedResponses, !directives.isPublic {
            return .doNotStore(reason: "credentials without public (storesCredentialedResponses is off)", code: .credentials)
        }

        let dateHeader = headers["Date"].flatMap(HTTPDate.parse)
        let explicit = fixedLifetime ?? explicitFreshness(directives, headers: headers, date: dateHeader, responseDate: responseDate)
        if isRedirect {
            if Self.temporaryRedirectStatuses.contains(status), explicit == nil {
                return .doNotStore(reason: "temporary redirect \(status) without explicit freshness", code: .temporaryRedirect)
            }
        } else if let allowed = cacheableStatusCodes {
            guard allowed.contains(status) else { return .doNotStore(reason: "status \(status)", code: .status) }
        } else {
            // A 206 is stored as a part (`CachingPolicy.partialContentToStore`, RFC 9111 §3.3).
            guard (200...599).contains(status), status != 304 else { return .doNotStore(reason: "status \(status)", code: .status) }
            if explicit == nil, !directives.isPublic, !Self.heuristicallyCacheableStatusCodes.contains(status) {
                return .doNotStore(reason: "status \(status) without explicit freshness", code: .status)
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
        // A response stale on arrival that cannot be revalidated can only ever be served stale
        // (RFC 9111 §4.2.4): it is kept when a later request may use it that way — it was given a
        // lifetime and arrived past it (an old `Date` or `Age`), so a request's `max-stale` can
        // still accept it; or it allows stale use itself (`stale-if-error`,
        // `stale-while-revalidate`); or the request asked for stale answers — and never when it
        // may not be served stale (`no-cache`, `must-revalidate`). A response that says it is
        // never fresh (`max-age=0`, an invalid `Expires`) or has no caching headers would only be
        // refetched: storing it wastes space (an older cache stored such responses with expiry 0).
        let usableStale = !directives.noCache && !directives.mustRevalidate
            && ((explicit ?? 0) > 0 || directives.staleIfError != nil || directives.staleWhileRevalidate != nil
                || request.directives.maxStale != nil || request.directives.staleIfError != nil)
        guard lifetime - initialAge > 0 || hasValidator || usableStale else {
            return .doNotStore(reason: "no freshness and no validator", code: .noFreshness)
        }
        return .store(freshnessLifetime: lifetime, initialAge: initialAge)
    }

    /// Whether and how long the response `head` is stored for `request`: `storageDecision`,
    /// unless the response is larger than `maximumEntrySize` — by its body when it is in
    /// (`bodyBytes`), else by its `Content-Length` — and then it is delivered, not stored. A
    /// response its fields rule out is reported with that reason, whatever its size.
    func storageDecision(for head: ReceivedHead, request: CacheRequest, bodyBytes: Int?, maximumEntrySize: Int) -> StorageDecision {
        let decision = storageDecision(for: request, status: head.status, headers: head.headers, requestDate: head.requestDate,
                                       responseDate: head.responseDate, route: head.route)
        guard case .store = decision else { return decision }
        let declared = head.response.expectedContentLength
        if let bytes = bodyBytes ?? (declared >= 0 ? Int(clamping: declared) : nil), bytes > maximumEntrySize {
            return .doNotStore(reason: "\(bytes) bytes, more than the largest stored response (maximumEntrySize, \(maximumEntrySize) bytes)",
                               code: .tooLarge)
        }
        return decision
    }

    /// Whether the response is an event stream (`Content-Type: text/event-stream`, the HTML
    /// standard's server-sent events): its events are news as they come, and it may never end,
    /// so it is not stored, whatever its caching headers say (and, not storable, it is not kept
    /// in memory while it is handed on).
    static func isEventStream(_ headers: HTTPHeaders) -> Bool {
        // Most types do not start with a "t": they are decided by one byte.
        guard let type = headers["Content-Type"], let first = type.utf8.first, first | 0x20 == UInt8(ascii: "t") else { return false }
        let mediaType = type.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        return String(mediaType).trimmingCharacters(in: .whitespaces).isEqualIgnoringASCIICase("text/event-stream")
    }

    /// Why `received`, the answer to a `method` request, is not a whole response, or nil when it
    /// is. A cache stores only complete responses (RFC 9111 §3), and a body shorter or longer than
    /// its `Content-Length` is not (RFC 9112 §8): the transfer ended early without an error (a
    /// URLProtocol of the app's in the upstream path that ends a body early, or hands a
    /// completion handler only its last piece, Docs/foundation-facts.md, L10). Not judged: a
    /// response without a body (HEAD, 1xx, 204, 304), one with a `Content-Encoding` (Foundation
    /// decodes it; `Content-Length` counts the encoded bytes), and a redirect, which the upstream
    /// session stops at and whose body corelibs does not hand to it (0 bytes for a
    /// `Content-Length` of 24, seen in `RedirectsFromCacheTests`; stored redirects keep none, as
    /// before). A body the upstream did not keep (`ReceivedResponse.isBodyKept`) is not whole either.
    static func incompleteness(of received: ReceivedResponse, to method: String) -> String? {
        guard received.isBodyKept else { return "the body was handed on as it arrived, not kept" }
        let status = received.head.status
        guard method != "HEAD", !(100..<200).contains(status), status != 204, !(300...399).contains(status) else { return nil }
        let headers = received.head.headers
        if let encoding = headers["Content-Encoding"], !encoding.isEmpty, !encoding.isEqualIgnoringASCIICase("identity") { return nil }
        guard let declared = headers["Content-Length"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
              declared != received.bodyLength else { return nil }
        return "\(received.bodyLength) body bytes for a Content-Length of \(declared)"
    }

    /// The `Cache-Status` of a response fetched from the origin (RFC 9211): why it was
    /// forwarded, the origin's status, and whether it was stored and for how long — or, when it
    /// was not, why not (`CacheStatus.notStored(_:)`).
    func cacheStatus(forFetched head: ReceivedHead, decision: StorageDecision, forward: CacheStatus.Forward, now: Date) -> CacheStatus {
        var status = CacheStatus(forward: forward, forwardStatus: head.status)
        switch decision {
        case .store(let lifetime, let initialAge):
            status.stored = true
            let age = initialAge + max(0, now.timeIntervalSince(head.responseDate))
            status.timeToLive = Int((lifetime - age).rounded(.down))
        case .doNotStore(_, let code):
            status.detail = CacheStatus.notStored(code)
        }
        return status
    }

    /// The entry that stores a response to `request` with `status`, `headers` and `body`, as the
    /// storage decision judged it: the storable fields (`storableHeaders`), the `Vary` values and
    /// partition of the request. The one way an entry is made from a response, for
    /// the protocol's fetches and the `URLCache` API alike.
    static func entry(storing status: Int, headers: HTTPHeaders, body: Data, url: String, for request: CacheRequest,
                      requestDate: Date, responseDate: Date, freshnessLifetime: TimeInterval, initialAge: TimeInterval,
                      userInfo: Data? = nil) -> CacheEntry {
        let stored = storableHeaders(headers)
        return CacheEntry(
            responseURL: url, statusCode: status, headers: stored, body: body,
            requestDate: requestDate, responseDate: responseDate, initialAge: initialAge, freshnessLifetime: freshnessLifetime,
            varyFields: varyFields(for: stored, request: request), partition: request.partition,
            userInfo: userInfo)
    }

    /// `entry(storing:…)` for a response fetched from the origin.
    static func entry(storing head: ReceivedHead, body: Data, for request: CacheRequest, freshnessLifetime: TimeInterval,
                      initialAge: TimeInterval) -> CacheEntry {
        entry(storing: head.status, headers: head.headers, body: body,
              url: head.response.url?.absoluteString ?? request.urlRequest.url?.absoluteString ?? "", for: request,
              requestDate: head.requestDate, responseDate: head.responseDate, freshnessLifetime: freshnessLifetime,
              initialAge: initialAge)
    }

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
        if let permanentRedirectLifetime, Self.permanentRedirectStatuses.contains(status) {
            return permanentRedirectLifetime
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
    /// cookie. It is stored (a private cache may, RFC 9111 §7.1) and replayed to requests of
    /// the same user, but a session cookie's value never lands in a cache file; the
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
}
