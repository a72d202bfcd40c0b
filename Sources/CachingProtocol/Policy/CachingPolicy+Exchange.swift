import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an exchange asks the origin: the network half of a `LoadPlan`.
enum ExchangePlan: Sendable {
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

/// The origin's response head, with how it was reached: all the policy needs to judge a
/// response before its body is in.
struct ReceivedHead: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is immutable after creation but not declared Sendable everywhere.
    let response: HTTPURLResponse
    let route: ResponseRoute
    /// When the request was sent and the response arrived (RFC 9111 `request_time`, `response_time`).
    let requestDate: Date
    let responseDate: Date
    /// The response's fields, read once: every reader shares them (reading Foundation's header
    /// dictionary bridges every field).
    let headers: HTTPHeaders

    init(response: HTTPURLResponse, route: ResponseRoute, requestDate: Date, responseDate: Date) {
        self.response = response
        self.route = route
        self.requestDate = requestDate
        self.responseDate = responseDate
        headers = HTTPHeaders(response.allHeaderFields)
    }

    var status: Int { response.statusCode }
}

/// A response from the origin whose transfer ended without an error.
struct ReceivedResponse: Sendable {
    let head: ReceivedHead
    /// The body as the upstream kept it: every byte that arrived, unless `isBodyKept` is false.
    let body: Data
    /// How many body bytes arrived, kept or not.
    let bodyLength: Int
    /// False when the upstream stopped keeping the body once it could not be stored (it was
    /// too large, or its head ruled storing out) and only handed it on as it arrived
    /// (`UpstreamListener.upstreamDidReceiveHead`).
    let isBodyKept: Bool
    /// Wall-clock seconds the transfer took, for the bandwidth estimate.
    let transferSeconds: TimeInterval

    init(head: ReceivedHead, body: Data, transferSeconds: TimeInterval, bodyLength: Int? = nil, isBodyKept: Bool = true) {
        self.head = head
        self.body = body
        self.bodyLength = bodyLength ?? body.count
        self.isBodyKept = isBodyKept
        self.transferSeconds = transferSeconds
    }
}

/// Which request of an exchange the origin answered.
enum SentRequest: Sendable, Equatable {
    /// The request the plan asked for, sent with `method`.
    case planned(method: String)
    /// The plain GET sent after a HEAD found the stored response changed.
    case bodyAfterHead

    var method: String {
        switch self {
        case .planned(let method): return method
        case .bodyAfterHead: return "GET"
        }
    }
}

/// What an exchange does after the origin answered one of its requests.
enum ExchangeStep {
    /// The HEAD found the stored response changed (or was refused): fetch it with a plain GET.
    case fetchBody
    /// The exchange ends with this outcome.
    case finish(ExchangeOutcome)
}

/// How an exchange ends: what is stored and what every waiting load is answered with.
struct ExchangeOutcome {
    /// Where the answer comes from.
    enum AnswerSource {
        /// The origin's response, as it came, with this `Cache-Status`.
        case received(CacheStatus)
        /// This stored response (for a request for one byte range, the part it asks for).
        case stored(CacheEntry, CacheStatus)
        /// A redirect, with this `Cache-Status`: each waiting load follows it to `target`, asks its
        /// app, or reports it, as its platform does (`CacheEngine+Redirects`).
        case redirect(to: URLRequest, CacheStatus)
        /// The cache's own `504 Gateway Timeout` (RFC 9111 §5.2.2.2).
        case gatewayTimeout(CacheStatus)
        case failure(Error)
    }

    /// What changes in the store.
    enum Storage: Sendable {
        case none
        /// Store this variant (in memory only when `memoryOnly`).
        case store(CacheEntry, memoryOnly: Bool)
        /// Drop the stored variant the request matches: it is outdated.
        case removeVariant
        /// Drop everything stored under these keys (an unsafe request the origin accepted).
        case removeRecords([String])
    }

    /// What happened, in the policy's terms.
    enum Verdict: Sendable {
        /// The origin's response is the answer.
        case received
        /// The origin confirmed the stored response.
        case notModified
        /// The origin failed and a stored response answers, stale.
        case staleAfterError
        /// No response: the answer is an error (or the cache's `504`).
        case failed
    }

    var answer: AnswerSource
    var storage = Storage.none
    var verdict: Verdict
    /// The response said `no-store`: the URL's next GETs may be left to Foundation for a while.
    var learnsNoStore = false
    /// The app answered a challenge with a credential on the way: only the load that started the
    /// exchange may have this answer.
    var isPrivateToStarter = false
    /// Why the origin's response was not stored, when it was fetched and not stored.
    var notStoredReason: NotStoredReason?
}

/// What the policy needs to judge an answer besides the answer itself.
struct ExchangeContext {
    /// The variant stored for the request now, for combining a `206` with it (read only when the
    /// answer is a `206`).
    var storedPart: CacheEntry?
    /// The largest response the store keeps (`RecordStore.maximumEntrySize`).
    var maximumEntrySize: Int
    var now: Date
    /// The configuration's rules, for the keys of the URLs an unsafe request invalidates.
    var keyRules: [CachingRule] = []
}

extension CachingPolicy {
    /// The step after the origin answered `sent` for an exchange planned as `plan` for `request`:
    /// the pure half of the exchange (what OkHttp's `CacheInterceptor` does after `proceed`).
    /// Revalidation answers are judged with `revalidationOutcome` (a `304` freshens the stored
    /// response, RFC 9111 §4.3.4); fetched responses with `storageDecision`; a failure may fall
    /// back to a stale stored response (§4.2.4) or the cache's `504` (§5.2.2.2).
    func step(after result: Result<ReceivedResponse, Error>, to sent: SentRequest, of plan: ExchangePlan,
              for request: CacheRequest, context: ExchangeContext) -> ExchangeStep {
        switch (plan, sent) {
        case (.forward, _):
            return .finish(Self.passedOn(result, for: request, forward: .request))
        case (.unsafe, _):
            return .finish(Self.afterUnsafe(result, for: request, keyRules: context.keyRules))
        case (.fetch(let fallback, let forward), _):
            return .finish(fetched(result, to: sent.method, for: request, fallback: fallback, forward: forward, context: context))
        case (.revalidate(let entry, _), .bodyAfterHead):
            return .finish(fetched(result, to: sent.method, for: request, fallback: entry, forward: .stale, context: context))
        case (.revalidate(let entry, _), .planned(let method)):
            guard case .success(let received) = result else {
                return .finish(fetched(result, to: method, for: request, fallback: entry, forward: .stale, context: context))
            }
            let head = received.head
            if Self.redirectTarget(of: head, for: request) != nil {
                // The resource moves elsewhere now: a GET's answer is the redirect to store and
                // follow; a HEAD's is fetched again as a GET (a HEAD redirect leads to a HEAD).
                guard method == "HEAD" else {
                    return .finish(fetched(result, to: method, for: request, fallback: entry, forward: .stale, context: context))
                }
                return .fetchBody
            }
            switch revalidationOutcome(stored: entry, request: request, method: method, status: head.status,
                                       headers: head.headers, requestDate: head.requestDate,
                                       responseDate: head.responseDate, now: context.now) {
            case .notModified(let updated, let mayStore):
                let status = CacheStatus(forward: .stale, forwardStatus: head.status, stored: true,
                                         timeToLive: CacheStatus.timeToLive(of: updated, at: context.now))
                let storage: ExchangeOutcome.Storage = mayStore
                    ? .store(updated, memoryOnly: Self.isKeptInMemoryOnly(updated.headers)) : .removeVariant
                return .finish(ExchangeOutcome(answer: .stored(updated, status), storage: storage, verdict: .notModified))
            case .changed(bodyIncluded: true):
                return .finish(fetched(result, to: method, for: request, fallback: entry, forward: .stale, context: context))
            case .serverError:
                return .finish(Self.staleAfterError(entry, originStatus: head.status, now: context.now))
            case .changed(bodyIncluded: false):
                // Changed (or the HEAD was refused, or a 304 named another representation): the
                // body comes with a plain GET, which replaces the stored response.
                return .fetchBody
            }
        }
    }

    /// The `Cache-Status` a response head is streamed to the app with as its body arrives, or
    /// nil when its body must not be streamed: only a body that becomes the answer as it is — not
    /// a HEAD's, a `304`'s (the answer is the stored body), a redirect's (it is followed, or
    /// handed over whole), an unsafe request's, nor an error's a stale stored response replaces.
    func streamedStatus(of head: ReceivedHead, to sent: SentRequest, of plan: ExchangePlan, for request: CacheRequest,
                        context: ExchangeContext) -> CacheStatus? {
        guard head.status != 304,
              Self.redirectTarget(of: head, for: request) == nil
        else { return nil }
        let fallback: CacheEntry?
        let forward: CacheStatus.Forward
        switch (plan, sent) {
        case (.unsafe, _), (.revalidate, .planned(method: "HEAD")):
            return nil
        case (.forward, _):
            return CacheStatus(forward: .request, forwardStatus: head.status)
        case (.fetch(let stored, let reason), _):
            (fallback, forward) = (stored, reason)
        case (.revalidate(let entry, _), _):
            (fallback, forward) = (entry, .stale)
        }
        if head.status >= 500, let fallback, mayServeAfterError(fallback, request: request, now: context.now) { return nil }
        let decision = storageDecision(for: head, request: request, bodyBytes: nil, maximumEntrySize: context.maximumEntrySize)
        return cacheStatus(forFetched: head, decision: decision, forward: forward, now: context.now)
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
                if answersGatewayTimeoutWhenUnvalidated(fallback) {
                    return ExchangeOutcome(answer: .gatewayTimeout(CacheStatus(forward: forward, detail: "origin-unreachable")),
                                           verdict: .failed)
                }
            }
            return ExchangeOutcome(answer: .failure(error), verdict: .failed)
        case .success(let response):
            received = response
        }
        let head = received.head
        if head.status >= 500, let fallback, mayServeAfterError(fallback, request: request, now: context.now) {
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
                                      storage: storage, verdict: .received,
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
            return ExchangeOutcome(answer: Self.received(received.head, for: request, status: status), verdict: .received)
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
