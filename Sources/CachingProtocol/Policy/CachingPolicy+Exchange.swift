import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachingPolicy {
    /// The step after the origin answered `sent` for an exchange planned as `plan` for `request`:
    /// the pure half of the exchange (what OkHttp's `CacheInterceptor` does after `proceed`).
    /// Revalidation answers are judged with `revalidationOutcome` (a `304` freshens the stored
    /// response, RFC 9111 §4.3.4); fetched responses with `storageDecision`; a failure may fall
    /// back to a stale stored response (§4.2.4) or the cache's `504` (§5.2.2.2).
    func step(after result: Result<ReceivedResponse, Error>, to sent: SentRequest, of plan: ExchangePlan,
              for request: CacheRequest, context: ExchangeContext) -> ExchangeStep {
        guard let (fallback, forward) = Self.fetchReasons(of: plan) else {
            if case .unsafe = plan { return .finish(Self.afterUnsafe(result, for: request, keyRules: context.keyRules)) }
            return .finish(Self.passedOn(result, for: request, forward: .request))
        }
        if case .revalidate(let entry, _) = plan, case .planned(let method) = sent, case .success(let received) = result {
            let head = received.head
            if Self.redirectTarget(of: head, for: request) != nil {
                // The resource moves elsewhere now: a GET's answer is the redirect to store and
                // follow; a HEAD's is fetched again as a GET (a HEAD redirect leads to a HEAD).
                if method == "HEAD" { return .fetchBody }
            } else {
                switch revalidationOutcome(stored: entry, request: request, method: method, status: head.status,
                                           headers: head.headers, requestDate: head.requestDate,
                                           responseDate: head.responseDate, now: context.now) {
                case .notModified(let updated, let notStored):
                    let status = CacheStatus(forward: .stale, forwardStatus: head.status, stored: notStored == nil,
                                             timeToLive: CacheStatus.timeToLive(of: updated, at: context.now),
                                             detail: notStored.map(CacheStatus.notStored))
                    let storage: ExchangeOutcome.Storage = notStored == nil
                        ? .store(updated, memoryOnly: Self.isKeptInMemoryOnly(updated.headers)) : .removeVariant
                    var outcome = ExchangeOutcome(answer: .stored(updated, status), storage: storage, verdict: .revalidatedNotModified)
                    outcome.notStoredReason = notStored
                    return .finish(outcome)
                case .serverError:
                    return .finish(Self.staleAfterError(entry, originStatus: head.status, now: context.now))
                case .changed(bodyIncluded: false):
                    // Changed (or the HEAD was refused, or a 304 named another representation): the
                    // body comes with a plain GET, which replaces the stored response.
                    return .fetchBody
                case .changed(bodyIncluded: true):
                    break   // a conditional GET's answer is the new response itself
                }
            }
        }
        var outcome = fetched(result, to: sent.method, for: request, fallback: fallback, forward: forward, context: context)
        if case .revalidate = plan, outcome.verdict == .fetched { outcome.verdict = .revalidatedChanged }
        return .finish(outcome)
    }

    /// The `Cache-Status` a response head is streamed to the app with as its body arrives, or
    /// nil when its body must not be streamed: only a body that becomes the answer as it is — not
    /// a HEAD's, a `304`'s (the answer is the stored body), a redirect's (it is followed, or
    /// handed over whole), an unsafe request's, nor an error's a stale stored response replaces.
    /// The status is the one `step` gives the whole response (`fetched`), judged before its body
    /// is in.
    func streamedStatus(of head: ReceivedHead, to sent: SentRequest, of plan: ExchangePlan, for request: CacheRequest,
                        context: ExchangeContext) -> CacheStatus? {
        guard head.status != 304, Self.redirectTarget(of: head, for: request) == nil,
              sent != .planned(method: "HEAD") else { return nil }
        guard let (fallback, forward) = Self.fetchReasons(of: plan) else {
            if case .unsafe = plan { return nil }
            return CacheStatus(forward: .request, forwardStatus: head.status)
        }
        guard !fallsBack(from: head, to: fallback, for: request, now: context.now) else { return nil }
        let decision = storageDecision(for: head, request: request, bodyBytes: nil, maximumEntrySize: context.maximumEntrySize)
        return cacheStatus(forFetched: head, decision: decision, forward: forward, now: context.now)
    }

    /// For a plan whose answer is a fetched response, judged for storage (`fetched`): the stored
    /// response an error may fall back to, and why the request went to the origin (`fwd` of
    /// `Cache-Status`). Nil for a forwarded or unsafe request, whose answer is handed on as it is.
    private static func fetchReasons(of plan: ExchangePlan) -> (fallback: CacheEntry?, forward: CacheStatus.Forward)? {
        switch plan {
        case .fetch(let fallback, let forward): (fallback, forward)
        case .revalidate(let entry, _): (entry, .stale)
        case .forward, .unsafe: nil
        }
    }

    /// Whether the origin's 5xx `head` is replaced by `fallback`, served stale (RFC 9111 §4.2.4).
    private func fallsBack(from head: ReceivedHead, to fallback: CacheEntry?, for request: CacheRequest, now: Date) -> Bool {
        guard head.status >= 500, let fallback else { return false }
        return mayServeAfterError(fallback, request: request, now: now)
    }

    /// A fetched response (or the failure to get one): stored when the policy allows, replacing
    /// or dropping what was stored, or a stale fallback when the origin failed and it may serve.
    private func fetched(_ result: Result<ReceivedResponse, Error>, to method: String, for request: CacheRequest,
                         fallback: CacheEntry?, forward: CacheStatus.Forward, context: ExchangeContext) -> ExchangeOutcome {
        let received: ReceivedResponse
        switch result {
        case .failure(let error):
            if let fallback, (error as? URLError)?.code != .cancelled {
                if mayServeAfterError(fallback, request: request, now: context.now, disconnected: true) {
                    return Self.staleAfterError(fallback, originStatus: nil, now: context.now)
                }
                if answersGatewayTimeoutWhenUnvalidated(fallback, for: request) {
                    return ExchangeOutcome(answer: .gatewayTimeout(CacheStatus(forward: forward, detail: "origin-unreachable")),
                                           verdict: .failed)
                }
            }
            return ExchangeOutcome(answer: .failure(error), verdict: .failed)
        case .success(let response):
            received = response
        }
        let head = received.head
        if fallsBack(from: head, to: fallback, for: request, now: context.now), let fallback {
            return Self.staleAfterError(fallback, originStatus: head.status, now: context.now)
        }
        var decision = storageDecision(for: head, request: request, bodyBytes: received.bodyLength,
                                       maximumEntrySize: context.maximumEntrySize)
        if case .store = decision, let missing = Self.incompleteness(of: received, to: method) {
            decision = .doNotStore(reason: missing, code: .incompleteBody)
        }
        var storage = ExchangeOutcome.Storage.none
        switch decision {
        case .store(let lifetime, let initialAge):
            let entry = Self.entry(storing: head, body: received.body, for: request, freshnessLifetime: lifetime, initialAge: initialAge)
            let memoryOnly = Self.isKeptInMemoryOnly(entry.headers)
            if entry.cost > context.maximumEntrySize {
                // The store charges headers and URL too (`CacheEntry.cost`) and would refuse it;
                // like any response not stored, it outdates what was stored.
                decision = .doNotStore(reason: "\(entry.cost) bytes with its headers, more than maximumEntrySize", code: .tooLarge)
                storage = .removeVariant
            } else if entry.statusCode != 206 {
                storage = .store(entry, memoryOnly: memoryOnly)
            } else if let part = Self.partialContentToStore(entry, over: context.storedPart) {
                storage = .store(part, memoryOnly: memoryOnly)
            } else {
                decision = .doNotStore(reason: "a part that cannot be stored or adds nothing to what is stored", code: .partialContent)
            }
        case .doNotStore:
            // An outdated copy is never served again (a 5xx says nothing about the resource).
            if head.status < 500 { storage = .removeVariant }
        }
        let status = cacheStatus(forFetched: head, decision: decision, forward: forward, now: context.now)
        var outcome = ExchangeOutcome(answer: Self.received(head, for: request, status: status),
                                      storage: storage, verdict: .fetched,
                                      isPrivateToStarter: head.route.answeredWithCredential)
        if case .doNotStore(_, let code) = decision {
            outcome.notStoredReason = code
            if request.byteRange == nil, head.status < 500, Self.responseDirectives(head.headers).noStore {
                outcome.learnsNoStore = true
            }
        }
        return outcome
    }

    /// `entry`, stale, as the answer when the origin failed (with `originStatus`, or no answer).
    private static func staleAfterError(_ entry: CacheEntry, originStatus: Int?, now: Date) -> ExchangeOutcome {
        let status = CacheStatus(forward: .stale, forwardStatus: originStatus, stored: false,
                                 timeToLive: CacheStatus.timeToLive(of: entry, at: now), detail: "stale-if-error")
        return ExchangeOutcome(answer: .stored(entry, status), verdict: .staleAfterError)
    }

    /// Where the origin's response `head` to `request` leads when it is a redirect Foundation
    /// follows (`CachingPolicy+Redirects`); nil for every other response, without looking further.
    private static func redirectTarget(of head: ReceivedHead, for request: CacheRequest) -> URLRequest? {
        guard (301...308).contains(head.status), head.status != 304 else { return nil }
        return redirectTarget(of: request.urlRequest, status: head.status, location: head.headers["Location"])
    }

    /// The origin's response `head` to `request` as the answer, with `status`: a redirect to
    /// follow when it is one, else the response itself.
    private static func received(_ head: ReceivedHead, for request: CacheRequest, status: CacheStatus) -> ExchangeOutcome.AnswerSource {
        guard let target = redirectTarget(of: head, for: request) else {
            return .received(status)
        }
        return .redirect(to: target, status)
    }

    /// The origin's answer handed on as it is, never stored.
    private static func passedOn(_ result: Result<ReceivedResponse, Error>, for request: CacheRequest,
                                 forward: CacheStatus.Forward) -> ExchangeOutcome {
        switch result {
        case .failure(let error):
            return ExchangeOutcome(answer: .failure(error), verdict: .failed)
        case .success(let received):
            let status = CacheStatus(forward: forward, forwardStatus: received.head.status)
            return ExchangeOutcome(answer: Self.received(received.head, for: request, status: status), verdict: .fetched)
        }
    }

    /// The answer to an unsafe request, handed on and never stored. A status below 400 means the
    /// origin accepted it: what is stored for its URL goes, and for the `Location` and
    /// `Content-Location` of the answer when they are on the same origin (RFC 9111 §4.4). A `401`
    /// or `407` drops what is stored for its URL too: the app's session may send the request
    /// again with credentials past this layer (corelibs does, Docs/foundation-facts.md, L14), and
    /// the origin's acceptance would never come here. Another error status, or no answer at
    /// all, leaves the store as it was.
    private static func afterUnsafe(_ result: Result<ReceivedResponse, Error>, for request: CacheRequest,
                                    keyRules: [CachingRule]) -> ExchangeOutcome {
        var outcome = passedOn(result, for: request, forward: .method)
        guard case .success(let received) = result, let target = request.urlRequest.url else { return outcome }
        if received.head.status == 401 || received.head.status == 407 {
            outcome.storage = .removeRecords([request.key])
            return outcome
        }
        guard received.head.status < 400 else { return outcome }
        var keys = [request.key]
        for name in ["Location", "Content-Location"] {
            guard let value = received.head.headers[name], let url = URL(string: value, relativeTo: target)?.absoluteURL,
                  isSameOrigin(url, target) else { continue }
            keys.append(keyRules.cacheKey(for: url))
        }
        outcome.storage = .removeRecords(keys)
        return outcome
    }

    /// Whether two URLs share scheme, host and port (RFC 6454 origins).
    private static func isSameOrigin(_ url: URL, _ other: URL) -> Bool {
        func parts(_ url: URL) -> (String, String, Int?) {
            let scheme = url.scheme?.lowercased() ?? ""
            let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
            return (scheme, url.host?.lowercased() ?? "", url.port ?? defaultPort)
        }
        return parts(url) == parts(other)
    }
}

// MARK: - The answer to a revalidation

/// What the origin's answer to a revalidation means for the stored response: the output of the
/// validation half of the decision core (RFC 9111 §4.3.3–4.3.5).
enum RevalidationOutcome: Sendable, Equatable {
    /// The origin confirmed the stored response: a 304 that does not name another
    /// representation, or a HEAD 200 that describes the stored one. Serve the stored body with
    /// `updated`: the stored headers merged with the answer's (§4.3.4), its dates, and the
    /// freshness computed again. When the merged headers forbid storing, `notStored` says why:
    /// it is served this once and the stored variant is dropped.
    case notModified(updated: CacheEntry, notStored: NotStoredReason?)
    /// The origin has another representation. A conditional GET's answer carries it
    /// (`bodyIncluded`): it is handled like any fetched response. A HEAD's answer does not (and a
    /// 304 naming another representation carries no body either): fetch it with a plain GET.
    case changed(bodyIncluded: Bool)
    /// The origin failed with a 5xx and the stored response may be served stale instead
    /// (stale-if-error, `mayServeAfterError`).
    case serverError
}

extension CachingPolicy {
    /// Judges the origin's answer to a revalidation of `entry` for `request`, sent with
    /// `method` (HEAD or GET) and the stored validators, given the answer's status and headers,
    /// when the request was sent and the answer received, and `now`.
    func revalidationOutcome(
        stored entry: CacheEntry,
        request: CacheRequest,
        method: String,
        status: Int,
        headers: HTTPHeaders,
        requestDate: Date,
        responseDate: Date,
        now: Date
    ) -> RevalidationOutcome {
        let isHead = method.isEqualIgnoringASCIICase("HEAD")
        let confirmed = (status == 304 && !Self.notModified(headers, namesAnotherRepresentationThan: entry))
            || (isHead && status == 200 && Self.headResponse(headers, describes: entry))
        if confirmed {
            return freshened(entry, by: headers, request: request, requestDate: requestDate, responseDate: responseDate)
        }
        if status >= 500, mayServeAfterError(entry, request: request, now: now) {
            return .serverError
        }
        // A conditional GET's answer other than a 304 is the new response itself.
        return .changed(bodyIncluded: !isHead && status != 304)
    }

    /// `entry` updated by a 304 (or a HEAD 200 that describes it), RFC 9111 §4.3.4: the answer's
    /// header fields replace the stored ones (`headersAfterValidation`), its dates become the
    /// entry's dates, and storage and freshness are decided again on the merged headers.
    private func freshened(
        _ entry: CacheEntry,
        by headers: HTTPHeaders,
        request: CacheRequest,
        requestDate: Date,
        responseDate: Date
    ) -> RevalidationOutcome {
        var updated = entry
        updated.revision = .next()
        updated.headers = Self.headersAfterValidation(stored: entry.headers, received: headers)
        updated.requestDate = requestDate
        updated.responseDate = responseDate
        switch storageDecision(for: request, status: entry.statusCode, headers: updated.headers,
                               requestDate: requestDate, responseDate: responseDate) {
        case .store(let lifetime, let initialAge):
            updated.freshnessLifetime = lifetime
            updated.initialAge = initialAge
            return .notModified(updated: updated, notStored: nil)
        case .doNotStore(_, let code):
            updated.freshnessLifetime = 0
            updated.initialAge = Self.correctedInitialAge(
                headers: updated.headers, date: updated.headers["Date"].flatMap(HTTPDate.parse),
                requestDate: requestDate, responseDate: responseDate)
            return .notModified(updated: updated, notStored: code)
        }
    }

    /// The stored header fields updated with those of a 304 or HEAD answer (RFC 9111 §4.3.4):
    /// each received field replaces the stored fields of that name, except the fields that
    /// describe the answer's own (empty) body or its connection (`headersNotUpdatedByValidation`).
    static func headersAfterValidation(stored: HTTPHeaders, received: HTTPHeaders) -> HTTPHeaders {
        var headers = stored
        for field in storableHeaders(received).fields where !headersNotUpdatedByValidation.contains(where: field.name.isEqualIgnoringASCIICase) {
            headers.set(field.name, field.value)
        }
        return headers
    }

    /// Fields a 304 or HEAD answer must not overwrite: they describe its own (empty) body or its
    /// connection, not the stored representation.
    static let headersNotUpdatedByValidation = ["Content-Length", "Content-Encoding", "Transfer-Encoding", "Content-Range",
                                                "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade"]

    /// Whether a HEAD answer describes the stored representation (RFC 9111 §4.3.5): the same
    /// strong ETag, or without ETags the same Last-Modified, and no different Content-Length.
    static func headResponse(_ head: HTTPHeaders, describes entry: CacheEntry) -> Bool {
        if let length = head["Content-Length"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
           entry.headers["Content-Encoding"] == nil, length != entry.body.count {
            return false
        }
        if let etag = head["ETag"], let storedTag = entry.headers["ETag"] {
            return !etag.hasPrefix("W/") && etag == storedTag
        }
        if head["ETag"] == nil, entry.headers["ETag"] == nil,
           let modified = head["Last-Modified"], let storedModified = entry.headers["Last-Modified"] {
            return modified == storedModified
        }
        return false
    }

    /// Whether a 304 names a different representation than the one stored (its ETag differs, by
    /// the weak comparison), in which case the stored body must not be served (RFC 9111 §4.3.4).
    static func notModified(_ headers: HTTPHeaders, namesAnotherRepresentationThan entry: CacheEntry) -> Bool {
        guard let etag = headers["ETag"], let storedTag = entry.headers["ETag"] else { return false }
        return weakTag(etag) != weakTag(storedTag)
    }

    private static func weakTag(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }
}
