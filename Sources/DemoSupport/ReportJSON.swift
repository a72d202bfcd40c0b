import Foundation

/// The comparison as JSON for scripts: the network, a top-level `clients` array (each with
/// `name`, `originRequests` keyed by method, `originBytes`, `originBytesReceived`, `fromCache`,
/// `revalidated`, `fetched`, `wrongAnswers`, `otherUsersAnswers`, `waitedSeconds`, `offline`, `phases`, plus a few
/// extras), the per-rule lines of a heuristic client and of the header-only client, the
/// revalidation costs, the date and the scenario. Keys are sorted, so the
/// output is stable; ``decode(_:)`` reads it back.
public enum ReportJSON {
    public struct Document: Codable, Equatable, Sendable {
        public var date: String
        public var network: NetworkJSON
        /// Whether the clients ran at the same time.
        public var concurrent: Bool
        public var scenario: ScenarioJSON
        public var clients: [ClientJSON]
        public var rules: [RuleJSON]
        public var rulesClient: String?
        /// The same per-rule lines for the header-only client; empty when it did not run.
        public var headerOnlyRules: [RuleJSON]
        public var revalidationCosts: [RevalidationCost]
        public var definitions: [String: String]
    }

    public struct NetworkJSON: Codable, Equatable, Sendable {
        public var name: String
        public var roundTripMilliseconds: Double
        /// Nil: no bandwidth limit.
        public var downloadBitsPerSecond: Double?
        public var source: String
    }

    public struct ScenarioJSON: Codable, Equatable, Sendable {
        public var requestsPerClient: Int
        public var phases: [PhaseJSON]
        public var offlinePhase: PhaseJSON?
        public var offlineRequestsPerClient: Int
    }

    public struct PhaseJSON: Codable, Equatable, Sendable {
        public var name: String
        public var offsetSeconds: Double
    }

    public struct ClientJSON: Codable, Equatable, Sendable {
        public var name: String
        public var id: String
        public var originRequests: [String: Int]
        public var originRequestTotal: Int
        public var originBytes: Int
        public var originBodyBytes: Int
        public var originBytesReceived: Int
        public var bytesMoved: Int
        public var originConnections: Int
        public var fromCache: Int
        public var revalidated: Int
        public var fetched: Int
        public var failed: Int
        public var wrongAnswers: Int
        /// Answers with a body the origin made for another user (counted in `wrongAnswers` too).
        public var otherUsersAnswers: Int
        public var allowedStale: Int
        public var waitedSeconds: Double
        /// Median milliseconds per answer kind ("fromCache", "revalidated", "fetched"), for the
        /// kinds the client had.
        public var medianMilliseconds: [String: Double]
        public var seconds: Double
        public var cacheBytes: Int
        public var offline: OfflineJSON?
        public var offlineSwitched: OfflineJSON?
        /// What each phase with requests cost, in order.
        public var phases: [PhaseCostJSON]
        public var anomalies: [String]
    }

    public struct PhaseCostJSON: Codable, Equatable, Sendable {
        public var phase: String
        public var offsetSeconds: Double
        public var requests: Int
        public var originRequests: Int
        public var originBytes: Int
        public var waitedSeconds: Double
    }

    public struct OfflineJSON: Codable, Equatable, Sendable {
        public var requests: Int
        public var answered: Int
        public var failed: Int
        public var staleAnswers: Int
        public var wrongAnswers: Int
        public var waitedSeconds: Double
        /// "GET /api/feed.json: cannot connect", one per request without an answer.
        public var unanswered: [String]
    }

    public struct RuleJSON: Codable, Equatable, Sendable {
        public var rule: String
        public var title: String
        /// What the client's policy does with the resource, e.g. "1 d window"; nil where every
        /// policy does the same.
        public var treatment: String?
        public var path: String
        public var line: String
        public var steps: [StepJSON]
    }

    public struct StepJSON: Codable, Equatable, Sendable {
        public var phase: String
        public var answer: String
        public var origin: [OriginHop]
        public var current: Bool
        public var milliseconds: Double
    }

    public static func document(_ report: ComparisonReport) -> Document {
        let formatter = ISO8601DateFormatter()
        let network = report.network
        return Document(
            date: formatter.string(from: report.date),
            network: NetworkJSON(name: network.name, roundTripMilliseconds: rounded(network.roundTrip * 1000),
                                 downloadBitsPerSecond: network.bitsPerSecond, source: network.source),
            concurrent: report.concurrent,
            scenario: ScenarioJSON(
                requestsPerClient: report.scenario.requestCount,
                phases: report.scenario.phases.map { PhaseJSON(name: $0.name, offsetSeconds: $0.offset) },
                offlinePhase: report.scenario.offline.map { PhaseJSON(name: $0.name, offsetSeconds: $0.offset) },
                offlineRequestsPerClient: report.scenario.offline?.actions.filter(\.isRequest).count ?? 0),
            clients: report.clients.map { client in
                var medians: [String: Double] = [:]
                for kind in [AnswerKind.fromCache, .revalidated, .fetched] {
                    if let median = client.medianMilliseconds(kind) { medians[kind.rawValue] = rounded(median) }
                }
                return ClientJSON(
                    name: client.name, id: client.kind.rawValue, originRequests: client.originRequests,
                    originRequestTotal: client.originRequestTotal, originBytes: client.originBytes,
                    originBodyBytes: client.originBodyBytes, originBytesReceived: client.originBytesReceived,
                    bytesMoved: client.bytesMoved, originConnections: client.originConnections,
                    fromCache: client.fromCache, revalidated: client.revalidated, fetched: client.fetched,
                    failed: client.failed, wrongAnswers: client.wrongAnswers,
                    otherUsersAnswers: client.otherUsersAnswers, allowedStale: client.allowedStale,
                    waitedSeconds: rounded(client.waitedSeconds), medianMilliseconds: medians,
                    seconds: rounded(client.seconds), cacheBytes: client.cacheBytes,
                    offline: client.offline.map(offline), offlineSwitched: client.offlineSwitched.map(offline),
                    phases: client.phases.map {
                        PhaseCostJSON(phase: $0.phase, offsetSeconds: $0.offset, requests: $0.requests,
                                      originRequests: $0.originRequests, originBytes: $0.originBytes,
                                      waitedSeconds: rounded($0.waitedSeconds))
                    },
                    anomalies: client.anomalies)
            },
            rules: report.rules.map(rule),
            rulesClient: report.rulesClient?.name,
            headerOnlyRules: report.headerOnlyRules.map(rule),
            revalidationCosts: report.revalidationCosts,
            definitions: [
                "network": "what the embedded origin acted out: a round trip before every response (two on a new connection) and the download bandwidth",
                "originBytes": "every byte the origin wrote (downloaded by the app): status lines, headers and bodies",
                "originBodyBytes": "body bytes the origin wrote",
                "originBytesReceived": "every byte the origin read (uploaded by the app): the requests",
                "bytesMoved": "originBytes plus originBytesReceived",
                "originConnections": "TCP connections the origin accepted",
                "fromCache": "answered without contacting the origin",
                "revalidated": "the origin confirmed the stored body (304, or a HEAD with the same validators)",
                "fetched": "the body came from the origin",
                "wrongAnswers": "a body other than the origin's current one when the client's own rules say it must be current (the heuristic policy for the heuristic clients, the .rfc9111 preset for the others), or one the origin made for another user",
                "otherUsersAnswers": "answers with a body the origin made for another user than the one signed in (the profile and the feed are each user's own; the scenario switches accounts)",
                "allowedStale": "an older body served inside the reuse window the client's own rules grant",
                "waitedSeconds": "the time from each request to its answer, summed over the client's requests (sent one at a time)",
                "medianMilliseconds": "the median time from request to answer, per kind of answer",
                "seconds": "wall-clock time of the client's phases (the offline phase excluded)",
                "cacheBytes": "bytes the client's cache reports holding at the end (memory plus disk)",
                "offline": "the offline phase, origin unreachable: requests, answered (a 2xx answer), failed, stale answers (a stored response past its freshness)",
                "offlineSwitched": "the offline phase again with CachingConfiguration.isOffline set (protocol clients only)",
                "phases": "per phase with requests: the client's requests, the origin requests and bytes down they caused, and the seconds the app waited",
                "headerOnlyRules": "the per-rule lines of the header-only client (CachingProtocol with the .rfc9111 preset); rules are those of rulesClient, a heuristic client",
            ])
    }

    public static func data(_ report: ComparisonReport) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(document(report))
    }

    /// Reads back what ``data(_:)`` wrote.
    public static func decode(_ data: Data) throws -> Document {
        try JSONDecoder().decode(Document.self, from: data)
    }

    private static func rule(_ trace: RuleTrace) -> RuleJSON {
        RuleJSON(rule: trace.rule.rawValue, title: trace.title, treatment: trace.treatment, path: trace.path,
                 line: trace.line, steps: trace.records.map {
                     StepJSON(phase: $0.phase, answer: $0.answer.rawValue, origin: $0.hops, current: $0.isCurrent,
                              milliseconds: rounded($0.milliseconds))
                 })
    }

    private static func offline(_ result: OfflineResult) -> OfflineJSON {
        OfflineJSON(requests: result.requests, answered: result.answered, failed: result.failed,
                    staleAnswers: result.staleAnswers, wrongAnswers: result.wrongAnswers,
                    waitedSeconds: rounded(result.waitedSeconds), unanswered: result.unanswered)
    }

    /// Three decimals, so the JSON reads as measured (no binary noise) and reads back equal.
    private static func rounded(_ value: Double) -> Double {
        (value * 1000).rounded() / 1000
    }
}
