import Foundation

/// The clients the Demo compares.
public enum ClientKind: String, Sendable, CaseIterable, Codable {
    /// A plain `URLSession` with no cache at all.
    case noCache
    /// The "AFNetworking-style" setup: `URLCache(memoryCapacity: 2 MB, diskCapacity: 100 MB)`
    /// with `.useProtocolCachePolicy`.
    case urlCache
    /// `CachingURLProtocol` injected, default heuristic policy, HEAD revalidation.
    case cachingProtocolHead
    /// The same with conditional-GET revalidation.
    case cachingProtocolConditionalGet

    /// The name in the table and the JSON.
    public var name: String {
        switch self {
        case .noCache: return "no cache"
        case .urlCache: return "URLCache (AFNetworking-style)"
        case .cachingProtocolHead: return "CachingProtocol (HEAD)"
        case .cachingProtocolConditionalGet: return "CachingProtocol (conditional GET)"
        }
    }

    var usesProtocol: Bool {
        self == .cachingProtocolHead || self == .cachingProtocolConditionalGet
    }
}

/// How a client's request was answered.
public enum AnswerKind: String, Sendable, Codable {
    /// The origin was not contacted.
    case fromCache
    /// The origin confirmed the stored body (304, or a HEAD with the same validators).
    case revalidated
    /// The body came from the origin (first fetch, refetch, or a changed resource).
    case fetched
    /// The request failed.
    case failed
}

/// One request exchanged with the origin on behalf of a client request, e.g. `HEAD → 304`.
public struct OriginHop: Sendable, Equatable, Codable {
    public var method: String
    public var status: Int
    /// `If-None-Match` or `If-Modified-Since` when the request was conditional.
    public var validator: String?
}

/// One client request and everything measured about it.
public struct RequestRecord: Sendable, Equatable {
    public var phase: String
    /// Seconds after launch on the simulated clock.
    public var offset: TimeInterval
    public var method: String
    public var path: String
    public var rule: DemoRule
    /// The status the app saw (0 when the request failed).
    public var status: Int
    public var bodyBytes: Int
    public var answer: AnswerKind
    /// What the origin received and answered for this request, in order (from its logs).
    public var hops: [OriginHop]
    /// Bytes the origin wrote for this request (status lines, headers and bodies).
    public var originBytes: Int
    /// The body equals what the origin serves at this moment.
    public var isCurrent: Bool
    /// An older body, served inside the reuse window the contract grants (not a wrong answer).
    public var isAllowedStale: Bool
    /// An older body the contract says must not be served.
    public var isWrong: Bool
    /// The protocol's own account (`CacheEvent.Outcome`), nil for other clients.
    public var cacheOutcome: String?
    /// The `Cache-Status` header the app saw, if any.
    public var cacheStatus: String?
    /// Wall-clock milliseconds the app waited for the answer (or the error).
    public var milliseconds: Double
    /// Why the request got no answer, e.g. "cannot connect" or "504 from the cache";
    /// nil when it got one.
    public var failure: String? = nil

    /// Whether the app got a usable answer: a 2xx response (a 504 the cache makes up when it
    /// may not serve what it holds is not one).
    public var isAnswered: Bool { answer != .failed && (200..<300).contains(status) }
}

/// What one client did over the whole session.
public struct ClientResult: Sendable {
    public var kind: ClientKind
    public var name: String { kind.name }
    /// Requests the origin received, by method (from `LoopbackOrigin`'s request log).
    public var originRequests: [String: Int]
    public var originRequestTotal: Int { originRequests.values.reduce(0, +) }
    /// Every byte the origin wrote: status lines, headers and bodies (`totalBytesSent`): the
    /// bytes the app downloaded.
    public var originBytes: Int
    /// Body bytes only (`bodyBytesSent`).
    public var originBodyBytes: Int
    /// Every byte the origin read (`totalBytesReceived`): the requests the app uploaded.
    public var originBytesReceived: Int
    /// TCP connections the origin accepted (each cost a handshake round trip).
    public var originConnections: Int
    public var records: [RequestRecord]
    /// Wall-clock seconds for the whole session (the phases, not the offline phase).
    public var seconds: Double
    /// The offline phase with the origin unreachable; nil when the scenario has none.
    public var offline: OfflineResult?
    /// The offline phase again with `CachingConfiguration.isOffline` set, as an app that knows
    /// it is offline would (protocol clients only).
    public var offlineSwitched: OfflineResult?
    /// Bytes the client's cache held at the end (memory plus disk usage as the cache reports it).
    public var cacheBytes: Int
    /// Disagreements between the client's own account and the origin's logs (expected empty).
    public var anomalies: [String]

    public var fromCache: Int { count(.fromCache) }
    public var revalidated: Int { count(.revalidated) }
    public var fetched: Int { count(.fetched) }
    public var failed: Int { count(.failed) }
    public var wrongAnswers: Int { records.filter(\.isWrong).count }
    public var allowedStale: Int { records.filter(\.isAllowedStale).count }
    /// Bytes on the wire both ways: ``originBytes`` down plus ``originBytesReceived`` up.
    public var bytesMoved: Int { originBytes + originBytesReceived }
    /// Seconds the app waited for its answers: the sum over its requests.
    public var waitedSeconds: Double { records.reduce(0) { $0 + $1.milliseconds } / 1000 }

    /// The median wait of the requests answered `answer`, in milliseconds; nil when none was.
    public func medianMilliseconds(_ answer: AnswerKind) -> Double? {
        Self.median(records.filter { $0.answer == answer }.map(\.milliseconds))
    }

    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    private func count(_ answer: AnswerKind) -> Int {
        records.filter { $0.answer == answer }.count
    }
}

/// One client's offline phase: the app's requests while the origin is unreachable.
public struct OfflineResult: Sendable {
    /// The phase's name, e.g. "offline +8 d 1 h".
    public var phase: String
    public var records: [RequestRecord]

    public var requests: Int { records.count }
    /// Requests that got a usable answer (a 2xx response).
    public var answered: Int { records.filter(\.isAnswered).count }
    public var failed: Int { requests - answered }
    /// Answers from a stored response past its freshness (the cache's stale-if-error or
    /// offline answers).
    public var staleAnswers: Int {
        records.filter { $0.isAnswered && ($0.cacheOutcome == "staleAfterError" || $0.cacheOutcome == "staleHit") }.count
    }
    /// Answers that were not the origin's current body when the contract says they must be.
    public var wrongAnswers: Int { records.filter(\.isWrong).count }
    /// Seconds the app waited for its answers and errors: the sum over its requests.
    public var waitedSeconds: Double { records.reduce(0) { $0 + $1.milliseconds } / 1000 }
    /// "GET /api/feed.json: cannot connect", one per request without an answer.
    public var unanswered: [String] {
        records.filter { !$0.isAnswered }.map { "\($0.method) \($0.path): \($0.failure ?? "status \($0.status)")" }
    }
}

/// What one rule's resource went through in one client's session.
public struct RuleTrace: Sendable {
    public var rule: DemoRule
    public var title: String
    public var path: String
    public var records: [RequestRecord]
    /// One line, generated from `records`.
    public var line: String
}

/// The cost of revalidating, per strategy, measured in the two protocol runs.
public struct RevalidationCost: Sendable, Equatable, Codable {
    /// "unchanged" or "changed".
    public var resource: String
    public var client: String
    public var checks: Int
    /// Origin round trips per check.
    public var roundTrips: Double
    /// Origin bytes per check.
    public var bytes: Double
    /// E.g. "HEAD → 304" or "HEAD → 200, GET → 200".
    public var exchange: String
}

/// The whole comparison.
public struct ComparisonReport: Sendable {
    public var date: Date
    public var scenario: Scenario
    /// The network the origin acted out.
    public var network: NetworkProfile
    /// Whether the clients ran at the same time (each against its own origin) or one after another.
    public var concurrent: Bool
    public var clients: [ClientResult]
    /// One trace per rule, from the first protocol client (HEAD revalidation when it ran).
    public var rules: [RuleTrace]
    public var revalidationCosts: [RevalidationCost]
    /// The client the rule traces come from.
    public var rulesClient: ClientKind?

    public func client(_ kind: ClientKind) -> ClientResult? {
        clients.first { $0.kind == kind }
    }

    public func rule(_ rule: DemoRule) -> RuleTrace? {
        rules.first { $0.rule == rule }
    }
}
