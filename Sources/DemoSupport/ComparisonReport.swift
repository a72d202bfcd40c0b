import Foundation

/// The clients the Demo compares.
public enum ClientKind: String, Sendable, CaseIterable, Codable {
    /// A plain `URLSession` with no cache at all.
    case noCache
    /// The "AFNetworking-style" setup: `URLCache(memoryCapacity: 2 MB, diskCapacity: 100 MB)`
    /// with `.useProtocolCachePolicy`. It stores nothing through `URLSession` on Linux
    /// (`Docs/foundation-facts.md` L5).
    case urlCache
    /// `CachingURLProtocol` injected with the ``CachingPolicy/rfc9111`` preset and conditional-GET
    /// revalidation: caching by the headers alone, as RFC 9111 states it, which is what an
    /// AFNetworking-style `URLCache` setup aims for on Apple platforms.
    case cachingProtocolRFC9111
    /// `CachingURLProtocol` injected, default heuristic policy, HEAD revalidation.
    case cachingProtocolHead
    /// The same with conditional-GET revalidation.
    case cachingProtocolConditionalGet

    /// The name in the table, the picture and the JSON.
    public var name: String {
        switch self {
        case .noCache: return "no cache"
        case .urlCache: return "URLCache (AFNetworking-style)"
        case .cachingProtocolRFC9111: return "header-only (CachingProtocol .rfc9111)"
        case .cachingProtocolHead: return "CachingProtocol (HEAD)"
        case .cachingProtocolConditionalGet: return "CachingProtocol (conditional GET)"
        }
    }

    /// Whether the client's session goes through `CachingURLProtocol`.
    var usesProtocol: Bool {
        self == .cachingProtocolRFC9111 || isHeuristic
    }

    /// Whether the client caches with the heuristic rules (`Comparison.policy`); the others cache
    /// by the headers alone, or not at all.
    var isHeuristic: Bool {
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
    /// The user signed in when the request was sent (``DemoUser/name``).
    public var user: String
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
    /// An older body the contract says must not be served, or another user's (`isOtherUsers`).
    public var isWrong: Bool
    /// A body the origin made for another user than `user`.
    public var isOtherUsers: Bool
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
    /// Answers with a body the origin made for another user (counted in ``wrongAnswers`` too).
    public var otherUsersAnswers: Int { records.filter(\.isOtherUsers).count }
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

    /// What each phase cost, in the order the client played them (phases without requests,
    /// such as a change at the origin, have none).
    public var phases: [PhaseCost] {
        var costs: [PhaseCost] = []
        for record in records {
            if costs.last?.phase != record.phase {
                costs.append(PhaseCost(phase: record.phase, offset: record.offset, requests: 0, originRequests: 0,
                                       originBytes: 0, waitedSeconds: 0))
            }
            costs[costs.count - 1].requests += 1
            costs[costs.count - 1].originRequests += record.hops.count
            costs[costs.count - 1].originBytes += record.originBytes
            costs[costs.count - 1].waitedSeconds += record.milliseconds / 1000
        }
        return costs
    }

    private func count(_ answer: AnswerKind) -> Int {
        records.filter { $0.answer == answer }.count
    }
}

/// What one phase of the session cost one client.
public struct PhaseCost: Sendable, Equatable, Codable {
    /// E.g. "refresh +10 s".
    public var phase: String
    /// Seconds after launch on the simulated clock.
    public var offset: TimeInterval
    /// The client's requests in the phase.
    public var requests: Int
    /// Requests the origin received for them (its log, request by request).
    public var originRequests: Int
    /// Bytes the origin wrote for them (down).
    public var originBytes: Int
    /// Seconds the app waited for their answers.
    public var waitedSeconds: Double

    /// "launch", or the offset on the simulated clock: "+10 s", "+2 d".
    public var label: String {
        offset == 0 ? "launch" : "+" + DurationText.label(offset)
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
    /// E.g. "1 ETag (1 d window)": the rule with what the client's policy does with it.
    public var title: String
    /// What the client's policy does with the rule's resource, e.g. "1 d window" or "not
    /// stored"; nil where every policy does the same.
    public var treatment: String?
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
    /// One trace per rule, from the first heuristic client (HEAD revalidation when it ran).
    public var rules: [RuleTrace]
    public var revalidationCosts: [RevalidationCost]
    /// The client the rule traces come from.
    public var rulesClient: ClientKind?
    /// One trace per rule from the header-only client; empty when it did not run.
    public var headerOnlyRules: [RuleTrace]

    public func client(_ kind: ClientKind) -> ClientResult? {
        clients.first { $0.kind == kind }
    }

    public func rule(_ rule: DemoRule) -> RuleTrace? {
        rules.first { $0.rule == rule }
    }

    /// Phase by phase, how `kind` stands against `baseline` on what the origin saw for it;
    /// empty unless both ran.
    public func standings(of kind: ClientKind, against baseline: ClientKind) -> [PhaseStanding] {
        guard let ours = client(kind), let theirs = client(baseline) else { return [] }
        return zip(ours.phases, theirs.phases).compactMap { ours, theirs in
            guard ours.phase == theirs.phase else { return nil }
            return PhaseStanding(ours: ours, theirs: theirs)
        }
    }

    /// The requests where `baseline` did better than `kind`: the origin's current body where
    /// `kind` answered an older one (whatever it cost), fewer origin requests, or as many and
    /// fewer bytes. Both clients replay the same scenario, so their records pair up one to one.
    public func requests(where baseline: ClientKind, didBetterThan kind: ClientKind)
        -> [(ours: RequestRecord, theirs: RequestRecord)] {
        guard let ours = client(kind), let theirs = client(baseline) else { return [] }
        return zip(ours.records, theirs.records).filter { ours, theirs in
            guard ours.phase == theirs.phase, ours.path == theirs.path, theirs.isAnswered else { return false }
            if theirs.isCurrent != ours.isCurrent { return theirs.isCurrent }
            if theirs.hops.count != ours.hops.count { return theirs.hops.count < ours.hops.count }
            return theirs.originBytes < ours.originBytes
        }
    }
}

/// One phase of two clients side by side: how the first stands against the second on what the
/// origin saw for it, origin requests and bytes down. (On a simulated network the time the app
/// waited follows from them; on a shared machine it also carries noise.)
public struct PhaseStanding: Sendable, Equatable {
    public enum Standing: String, Sendable, Equatable {
        /// No more requests and no more bytes, and fewer of one.
        case ahead
        /// As many requests and as many bytes.
        case same
        /// No fewer requests and no fewer bytes, and more of one.
        case behind
        /// Fewer of one and more of the other.
        case mixed
    }

    public var ours: PhaseCost
    public var theirs: PhaseCost

    public var standing: Standing {
        let requests = ours.originRequests - theirs.originRequests
        let bytes = ours.originBytes - theirs.originBytes
        if requests == 0 && bytes == 0 { return .same }
        if requests <= 0 && bytes <= 0 { return .ahead }
        if requests >= 0 && bytes >= 0 { return .behind }
        return .mixed
    }
}
