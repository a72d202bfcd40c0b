import Foundation

/// The comparison as text a person reads at a glance: the network, one table row per client,
/// what the app waited per kind of answer, the offline phase, one line per rule, the cost of
/// each revalidation strategy, and what the columns mean.
public enum ReportText {
    public static func render(_ report: ComparisonReport) -> String {
        var lines: [String] = []
        let scenario = report.scenario
        let simulated = DurationText.label(scenario.phases.last?.offset ?? 0)
        var title = "CachingProtocol Demo — \(scenario.requestCount) requests per client, "
            + "\(scenario.phases.count) phases over \(simulated) of simulated time"
        if let offline = scenario.offline {
            title += ", then \(offline.actions.count) offline"
            title += offline.actions.count == 1 ? " request" : " requests"
        }
        lines.append(title)
        lines.append(contentsOf: networkLines(report))
        var phases = scenario.phases.map(\.name)
        if let offline = scenario.offline { phases.append(offline.name) }
        lines.append("phases: " + phases.joined(separator: " · "))
        lines.append("")
        lines.append(contentsOf: table(report.clients))
        lines.append("")
        lines.append(contentsOf: legend)
        let savings = savings(report)
        if !savings.isEmpty {
            lines.append("")
            lines.append(contentsOf: savings)
        }
        let waits = waits(report)
        if !waits.isEmpty {
            lines.append("")
            lines.append(contentsOf: waits)
        }
        let offline = offline(report)
        if !offline.isEmpty {
            lines.append("")
            lines.append(contentsOf: offline)
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
        "origin requests: what the origin's request log received, by method. bytes on the wire: every byte the",
        "  origin wrote (down: status lines, headers, bodies) and read (up: the requests). cache / reval. / fetched:",
        "  requests answered without the origin, after the origin confirmed the stored body (304), with a body from",
        "  the origin. wrong: a body that was not the origin's current one when the contract says it must be. stale",
        "  ok: an older body inside the window the contract grants (the ETag day, the no-cache minute…), not wrong.",
        "  app waited: the time from each request to its answer, summed over the client's requests (one at a time).",
    ]

    /// "network: 4g — 70 ms round trip, 12 Mbit/s down, acted out by the embedded origin", where
    /// the numbers come from, and how the clients ran.
    static func networkLines(_ report: ComparisonReport) -> [String] {
        let network = report.network
        let others = NetworkProfile.all.filter { $0 != network }.map(\.name).joined(separator: " | ")
        var lines: [String]
        if network.simulated == nil {
            lines = ["network: \(network.name) — \(network.summary): the embedded origin answers as fast as loopback allows"]
        } else {
            lines = ["network: \(network.name) — \(network.summary), acted out by the embedded origin (a new connection",
                     "  costs one more round trip). Numbers: \(network.source)."]
        }
        lines.append("  Other networks: --network \(others). "
                     + (report.concurrent ? "The clients ran at the same time, each against its own origin."
                                          : "The clients ran one after another, each against its own origin."))
        return lines
    }

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
        header1 += pad("   bytes on the wire", 20) + pad("   answers", 41) + "app waited"
        let header2 = pad("client", nameWidth) + methodColumns + leftPad("down", 11) + leftPad("up", 9)
            + leftPad("cache", 7) + leftPad("reval.", 8) + leftPad("fetched", 9) + leftPad("wrong", 7)
            + leftPad("stale ok", 10) + leftPad("total", 10)
        var lines = [header1.trimmingTrailing(), header2, String(repeating: "-", count: header2.count)]
        for client in clients {
            var row = pad(client.name, nameWidth)
            row += methods.map { leftPad(String(client.originRequests[$0] ?? 0), 6) }.joined()
            row += leftPad(String(client.originRequestTotal), 6)
            row += leftPad(grouped(client.originBytes), 11) + leftPad(grouped(client.originBytesReceived), 9)
            row += leftPad(String(client.fromCache), 7) + leftPad(String(client.revalidated), 8)
            row += leftPad(String(client.fetched), 9) + leftPad(String(client.wrongAnswers), 7)
            row += leftPad(String(client.allowedStale), 10)
            row += leftPad(seconds(client.waitedSeconds), 10)
            lines.append(row)
        }
        return lines
    }

    /// "CachingProtocol (HEAD) against no cache: 36 % fewer origin requests, 60 % fewer bytes on
    /// the wire, 35 % less waiting", one line per protocol client and baseline.
    static func savings(_ report: ComparisonReport) -> [String] {
        let others = report.clients.filter { !$0.kind.usesProtocol }
        return report.clients.filter(\.kind.usesProtocol).flatMap { ours in
            others.map { other in
                "\(ours.name) against \(other.name): "
                    + "\(percent(ours.originRequestTotal, other.originRequestTotal)) fewer origin requests, "
                    + "\(percent(ours.bytesMoved, other.bytesMoved)) fewer bytes on the wire, "
                    + "\(percent(ours.waitedSeconds, other.waitedSeconds)) less waiting"
            }
        }
    }

    private static func percent(_ ours: Int, _ theirs: Int) -> String {
        percent(Double(ours), Double(theirs))
    }

    private static func percent(_ ours: Double, _ theirs: Double) -> String {
        guard theirs > 0 else { return "n/a" }
        return "\(Int(((theirs - ours) / theirs * 100).rounded())) %"
    }

    /// The median wait per kind of answer, per client: what a hit, a revalidation and a fetch
    /// feel like on this network.
    static func waits(_ report: ComparisonReport) -> [String] {
        guard !report.clients.isEmpty else { return [] }
        let kinds: [(AnswerKind, String)] = [(.fromCache, "from cache"), (.revalidated, "revalidated"), (.fetched, "fetched")]
        var lines = ["What the app waited per request (median, \(report.network.name)):"]
        lines.append("  " + pad("client", 35) + kinds.map { leftPad($0.1, 13) }.joined())
        for client in report.clients {
            lines.append("  " + pad(client.name, 35) + kinds.map { kind in
                leftPad(client.medianMilliseconds(kind.0).map(milliseconds) ?? "-", 13)
            }.joined())
        }
        return lines
    }

    /// The offline phase: per client, how many requests got an answer, and why the others did not.
    static func offline(_ report: ComparisonReport) -> [String] {
        guard let phase = report.scenario.offline, report.clients.contains(where: { $0.offline != nil }) else { return [] }
        let gets = phase.actions.filter { if case .get = $0 { return true } else { return false } }.count
        let posts = phase.actions.filter { if case .post = $0 { return true } else { return false } }.count
        var sent = ["\(gets) GET\(gets == 1 ? "" : "s")"]
        if posts > 0 { sent.append("\(posts) POST\(posts == 1 ? "" : "s")") }
        var lines = ["Offline (\(phase.name)): the origin refuses every connection, as a phone without a network fails"
                     + " at once; the app sends its requests again (\(sent.joined(separator: ", ")))"]
        lines.append("  " + pad("client", 35) + leftPad("answered", 10) + leftPad("failed", 8) + leftPad("stale", 7)
                     + leftPad("waited", 10))
        func row(_ name: String, _ result: OfflineResult) -> [String] {
            var lines = ["  " + pad(name, 35) + leftPad("\(result.answered) of \(result.requests)", 10)
                         + leftPad(String(result.failed), 8) + leftPad(String(result.staleAnswers), 7)
                         + leftPad(milliseconds(result.waitedSeconds * 1000), 10)]
            let missing = result.records.filter { !$0.isAnswered }
            let reasons = Set(missing.map { $0.failure ?? "status \($0.status)" })
            if missing.count == result.requests, missing.count > 1, reasons.count == 1, let reason = reasons.first {
                lines.append("      no answer for any request: \(reason)")
            } else if !missing.isEmpty {
                lines.append("      no answer: " + missing.map { record in
                    (record.method == "GET" ? "" : record.method + " ") + record.path
                        + " (\(record.failure ?? "status \(record.status)"))"
                }.joined(separator: ", "))
            }
            return lines
        }
        for client in report.clients {
            guard let offline = client.offline else { continue }
            lines += row(client.name, offline)
            if let switched = client.offlineSwitched {
                lines += row("  told isOffline = true", switched)
            }
        }
        lines.append("  answered: a 2xx answer with a body. stale: answered from a stored response past its freshness")
        lines.append("  (stale-if-error, or offline mode). 504 from the cache: a response stored with no-cache or")
        lines.append("  must-revalidate is never served without the origin's confirmation (RFC 9111 §4.2.4); offline mode")
        lines.append("  (isOffline = true) serves whatever is stored, and fails at once for the rest.")
        return lines
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

    /// "3.62 s".
    static func seconds(_ value: Double) -> String {
        String(format: "%.2f s", value)
    }

    /// "79 ms", "0.4 ms" below ten.
    static func milliseconds(_ value: Double) -> String {
        value < 10 ? String(format: "%.1f ms", value) : "\(Int(value.rounded())) ms"
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
