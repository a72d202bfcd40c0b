import Foundation

/// The comparison as JSON for scripts: a top-level `clients` array (each with `name`,
/// `originRequests` keyed by method, `originBytes`, `fromCache`, `revalidated`, `fetched`,
/// `wrongAnswers`, `seconds`, plus a few extras), the per-rule lines, the revalidation costs,
/// the date and the scenario. Keys are sorted, so the output is stable.
public enum ReportJSON {
    struct Document: Encodable {
        var date: String
        var scenario: ScenarioJSON
        var clients: [ClientJSON]
        var rules: [RuleJSON]
        var rulesClient: String?
        var revalidationCosts: [RevalidationCost]
        var definitions: [String: String]
    }

    struct ScenarioJSON: Encodable {
        var requestsPerClient: Int
        var phases: [PhaseJSON]
    }

    struct PhaseJSON: Encodable {
        var name: String
        var offsetSeconds: Double
    }

    struct ClientJSON: Encodable {
        var name: String
        var id: String
        var originRequests: [String: Int]
        var originRequestTotal: Int
        var originBytes: Int
        var originBodyBytes: Int
        var fromCache: Int
        var revalidated: Int
        var fetched: Int
        var failed: Int
        var wrongAnswers: Int
        var allowedStale: Int
        var seconds: Double
        var cacheBytes: Int
        var anomalies: [String]
    }

    struct RuleJSON: Encodable {
        var rule: String
        var title: String
        var path: String
        var line: String
        var steps: [StepJSON]
    }

    struct StepJSON: Encodable {
        var phase: String
        var answer: String
        var origin: [OriginHop]
        var current: Bool
    }

    public static func data(_ report: ComparisonReport) throws -> Data {
        let formatter = ISO8601DateFormatter()
        let document = Document(
            date: formatter.string(from: report.date),
            scenario: ScenarioJSON(
                requestsPerClient: report.scenario.requestCount,
                phases: report.scenario.phases.map { PhaseJSON(name: $0.name, offsetSeconds: $0.offset) }),
            clients: report.clients.map { client in
                ClientJSON(
                    name: client.name, id: client.kind.rawValue, originRequests: client.originRequests,
                    originRequestTotal: client.originRequestTotal, originBytes: client.originBytes,
                    originBodyBytes: client.originBodyBytes, fromCache: client.fromCache,
                    revalidated: client.revalidated, fetched: client.fetched, failed: client.failed,
                    wrongAnswers: client.wrongAnswers, allowedStale: client.allowedStale,
                    seconds: (client.seconds * 1000).rounded() / 1000, cacheBytes: client.cacheBytes,
                    anomalies: client.anomalies)
            },
            rules: report.rules.map { trace in
                RuleJSON(rule: trace.rule.rawValue, title: trace.title, path: trace.path, line: trace.line,
                         steps: trace.records.map {
                             StepJSON(phase: $0.phase, answer: $0.answer.rawValue, origin: $0.hops, current: $0.isCurrent)
                         })
            },
            rulesClient: report.rulesClient?.name,
            revalidationCosts: report.revalidationCosts,
            definitions: [
                "originBytes": "every byte the origin wrote: status lines, headers and bodies",
                "originBodyBytes": "body bytes the origin wrote",
                "fromCache": "answered without contacting the origin",
                "revalidated": "the origin confirmed the stored body (304, or a HEAD with the same validators)",
                "fetched": "the body came from the origin",
                "wrongAnswers": "a body other than the origin's current one when the contract says it must be current",
                "allowedStale": "an older body served inside the reuse window the contract grants",
                "seconds": "wall-clock time of the whole session",
                "cacheBytes": "bytes the client's cache reports holding at the end (memory plus disk)",
            ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(document)
    }
}
