import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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

    /// What happened, in the policy's terms: one for each outcome an exchange reports in its
    /// event (`CacheEvent.Outcome`, which the policy's layer does not name).
    enum Verdict: Sendable {
        /// The origin's response is the answer, to a fetch (or a forwarded or unsafe request).
        case fetched
        /// The origin's response is the answer, to a revalidation: the stored one changed.
        case revalidatedChanged
        /// The origin confirmed the stored response.
        case revalidatedNotModified
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
    /// Why the origin's response was not stored, when it was fetched (or confirmed by a `304`
    /// whose fields forbid storing) and not stored.
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
