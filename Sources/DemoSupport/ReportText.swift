import Foundation

/// The comparison as text a person reads at a glance: one table row per client, one line per
/// rule, the cost of each revalidation strategy, and what the columns mean.
public enum ReportText {
    public static func render(_ report: ComparisonReport) -> String {
        var lines: [String] = []
        let scenario = report.scenario
        let simulated = DurationText.label(scenario.phases.last?.offset ?? 0)
        lines.append("CachingProtocol Demo — \(scenario.requestCount) requests per client, "
                     + "\(scenario.phases.count) phases over \(simulated) of simulated time, embedded loopback origin")
        lines.append("phases: " + scenario.phases.map(\.name).joined(separator: " · "))
        lines.append("")
        lines.append(contentsOf: table(report.clients))
        lines.append("")
        lines.append(contentsOf: legend)
        let savings = savings(report)
        if !savings.isEmpty {
            lines.append("")
            lines.append(contentsOf: savings)
        }
        if !report.rules.isEmpty, let client = report.rulesClient {
            lines.append("")
            lines.append("What each rule did (\(client.name), from the origin's log):")
            for rule in report.rules {
                lines.append("  \(rule.title)  \(rule.path)")
                lines.append("      " + rule.line)
            }
        }
        if !report.revalidationCosts.isEmpty {
            lines.append("")
            lines.append("Revalidation cost per check (origin round trips and bytes):")
            for cost in report.revalidationCosts {
                lines.append("  " + pad(cost.resource, 9) + "  " + pad(cost.client, 35)
                             + pad(cost.exchange, 26) + leftPad(format(cost.roundTrips), 2) + " trip(s)  "
                             + leftPad(grouped(Int(cost.bytes.rounded())), 7) + " B  (\(cost.checks) check\(cost.checks == 1 ? "" : "s"))")
            }
        }
        let anomalies = report.clients.flatMap(\.anomalies)
        if !anomalies.isEmpty {
            lines.append("")
            lines.append("Anomalies (the client's account and the origin's log disagree):")
            lines.append(contentsOf: anomalies.map { "  " + $0 })
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static let legend = [
        "origin requests: what the origin's request log received, by method. origin bytes: every byte it wrote",
        "  (status lines, headers, bodies). cache / reval. / fetched: requests answered without the origin, after",
        "  the origin confirmed the stored body (304), with a body from the origin. wrong: a body that was not the",
        "  origin's current one when the contract says it must be. stale ok: an older body inside the window the",
        "  contract grants (the ETag day, the no-cache minute…), not wrong. time: wall clock for the whole session.",
    ]

    /// Methods in a stable order: GET, HEAD, POST, then any other alphabetically.
    static func methods(_ clients: [ClientResult]) -> [String] {
        let seen = Set(clients.flatMap { $0.originRequests.keys })
        let known = ["GET", "HEAD", "POST"]
        return known.filter(seen.contains) + seen.subtracting(known).sorted()
    }

    static func table(_ clients: [ClientResult]) -> [String] {
        let methods = methods(clients)
        let nameWidth = max(34, (clients.map(\.name.count).max() ?? 0) + 2)
        let methodColumns = methods.map { leftPad($0, 6) }.joined() + leftPad("all", 6)
        let requestsWidth = methodColumns.count
        var header1 = pad("", nameWidth) + pad("  origin requests", requestsWidth)
        header1 += leftPad("origin", 12) + "  " + pad("   answers", 32)
        let header2 = pad("client", nameWidth) + methodColumns + leftPad("bytes", 12)
            + leftPad("cache", 7) + leftPad("reval.", 8) + leftPad("fetched", 9) + leftPad("wrong", 7)
            + leftPad("stale ok", 10) + leftPad("time", 9)
        var lines = [header1.trimmingTrailing(), header2, String(repeating: "-", count: header2.count)]
        for client in clients {
            var row = pad(client.name, nameWidth)
            row += methods.map { leftPad(String(client.originRequests[$0] ?? 0), 6) }.joined()
            row += leftPad(String(client.originRequestTotal), 6)
            row += leftPad(grouped(client.originBytes), 12)
            row += leftPad(String(client.fromCache), 7) + leftPad(String(client.revalidated), 8)
            row += leftPad(String(client.fetched), 9) + leftPad(String(client.wrongAnswers), 7)
            row += leftPad(String(client.allowedStale), 10)
            row += leftPad(String(format: "%.2f s", client.seconds), 9)
            lines.append(row)
        }
        return lines
    }

    /// "CachingProtocol (HEAD) against no cache: 36 % fewer origin requests, 61 % fewer origin bytes", one
    /// line per protocol client and baseline.
    static func savings(_ report: ComparisonReport) -> [String] {
        let others = report.clients.filter { !$0.kind.usesProtocol }
        return report.clients.filter(\.kind.usesProtocol).flatMap { ours in
            others.map { other in
                "\(ours.name) against \(other.name): "
                    + "\(percent(ours.originRequestTotal, other.originRequestTotal)) fewer origin requests, "
                    + "\(percent(ours.originBytes, other.originBytes)) fewer origin bytes"
            }
        }
    }

    private static func percent(_ ours: Int, _ theirs: Int) -> String {
        guard theirs > 0 else { return "n/a" }
        return "\(Int((Double(theirs - ours) / Double(theirs) * 100).rounded())) %"
    }

    // MARK: Rule lines

    /// One line from a resource's records, e.g. "GET → 200 at launch · 4× from cache (refresh
    /// +10 s … return +1 h) · HEAD If-None-Match → 304 at return +2 d, body from cache".
    static func ruleLine(_ records: [RequestRecord]) -> String {
        var parts: [String] = []
        var run: [RequestRecord] = []
        func flushRun() {
            guard let first = run.first, let last = run.last else { return }
            let span = first.offset == last.offset ? when(first) : "\(when(first)) … \(when(last))"
            var text = "\(run.count)× from cache (\(span))"
            let older = run.filter(\.isAllowedStale).count
            if older > 0 { text += ", \(older) of them the older body, inside the window" }
            let wrong = run.filter(\.isWrong).count
            if wrong > 0 { text += ", \(wrong) WRONG (stale)" }
            parts.append(text)
            run = []
        }
        for record in records {
            if record.answer == .fromCache {
                run.append(record)
                continue
            }
            flushRun()
            var text = record.hops.isEmpty ? "failed" : hops(record.hops)
            text += " at \(when(record))"
            if record.answer == .revalidated {
                text += ", body from cache"
            } else if record.hops.first?.validator != nil, record.answer == .fetched {
                text += record.isCurrent ? ", new body" : ""
            }
            if record.isWrong { text += ", WRONG (stale body)" }
            parts.append(text)
        }
        flushRun()
        return parts.joined(separator: " · ")
    }

    /// "launch", or the offset on the simulated clock: "+10 s", "+2 d".
    static func when(_ record: RequestRecord) -> String {
        record.offset == 0 ? "launch" : "+" + DurationText.label(record.offset)
    }

    /// "HEAD If-None-Match → 200, GET → 200"; without validator names, "HEAD → 200, GET → 200"
    /// and "conditional GET → 304".
    static func hops(_ hops: [OriginHop], namingValidators: Bool = true) -> String {
        hops.map { hop in
            guard let validator = hop.validator else { return "\(hop.method) → \(hop.status)" }
            if namingValidators { return "\(hop.method) \(validator) → \(hop.status)" }
            return hop.method == "GET" ? "conditional GET → \(hop.status)" : "\(hop.method) → \(hop.status)"
        }.joined(separator: ", ")
    }

    // MARK: Formatting

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func leftPad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    /// 1234567 → "1,234,567".
    static func grouped(_ value: Int) -> String {
        let digits = String(abs(value))
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out += "," }
            out.append(character)
        }
        return (value < 0 ? "-" : "") + out
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}

extension String {
    func trimmingTrailing() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
