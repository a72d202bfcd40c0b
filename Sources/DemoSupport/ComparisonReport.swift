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
    /// Wall-clock milliseconds.
    public var milliseconds: Double
}

/// What one client did over the whole session.
public struct ClientResult: Sendable {
    public var kind: ClientKind
    public var name: String { kind.name }
    /// Requests the origin received, by method (from `LoopbackOrigin`'s request log).
    public var originRequests: [String: Int]
    public var originRequestTotal: Int { originRequests.values.reduce(0, +) }
    /// Every byte the origin wrote: status lines, headers and bodies (`totalBytesSent`).
    public var originBytes: Int
    /// Body bytes only (`bodyBytesSent`).
    public var originBodyBytes: Int
    public var records: [RequestRecord]
    /// Wall-clock seconds for the whole session.
    public var seconds: Double
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

    private func count(_ answer: AnswerKind) -> Int {
        records.filter { $0.answer == answer }.count
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
