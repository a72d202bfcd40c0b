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
        lines.append(usersLine(scenario))
        lines.append("")
        lines.append(contentsOf: table(report.clients))
        if report.clients.contains(where: storedNothing) {
            lines.append(contentsOf: storedNothingNote)
        }
        lines.append("")
        lines.append(contentsOf: legend)
        if report.client(.cachingProtocolRFC9111) != nil {
            lines.append(contentsOf: headerOnlyLegend)
        }
        let savings = savings(report)
        if !savings.isEmpty {
            lines.append("")
            lines.append(contentsOf: savings)
        }
        let phaseLines = phaseSection(report)
        if !phaseLines.isEmpty {
            lines.append("")
            lines.append(contentsOf: phaseLines)
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
        let ruleLines = ruleSection(report)
        if !ruleLines.isEmpty {
            lines.append("")
            lines.append(contentsOf: ruleLines)
        }
        if !report.revalidationCosts.isEmpty {
            lines.append("")
            lines.append("Revalidation cost per check (origin round trips and bytes):")
            for cost in report.revalidationCosts {
                lines.append("  " + pad(cost.resource, 9) + "  " + pad(cost.client, nameWidth(report.clients) + 1)
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

    /// Who is signed in, e.g. "signed in: alice, bob from account switch +8 d 10 min (every /api/
    /// request carries the user's bearer token and session cookie)".
    static func usersLine(_ scenario: Scenario) -> String {
        var users = [DemoUser.alice.name]
        for phase in scenario.phases + (scenario.offline.map { [$0] } ?? []) {
            for case .signIn(let user) in phase.actions {
                users.append("\(user.name) from \(phase.name)")
            }
        }
        return "signed in: " + users.joined(separator: ", ")
            + " (every \(DemoSite.apiPrefix) request carries the user's bearer token, every request the session cookie)"
    }

    static let legend = [
        "origin requests: what the origin's request log received, by method. bytes on the wire: every byte the",
        "  origin wrote (down: status lines, headers, bodies) and read (up: the requests). cache / reval. / fetched:",
        "  requests answered without the origin, after the origin confirmed the stored body (304), with a body from",
        "  the origin. wrong: a body that was not the origin's current one when the client's own rules say it must",
        "  be, or one the origin made for another user (profile and feed are each user's own). stale ok: an older",
        "  body inside the window those rules grant (the ETag day, the no-cache minute…), not wrong. app waited: the",
        "  time from each request to its answer, summed over the client's requests (one at a time).",
    ]

    static let headerOnlyLegend = [
        "header-only (CachingProtocol .rfc9111): the same layer with the .rfc9111 preset, caching by the headers",
        "  alone as RFC 9111 states them: an ETag alone or no-cache revalidated on every use, Last-Modified fresh for",
        "  10 % of its age, an image without caching headers not stored. That is what an AFNetworking-style URLCache",
        "  setup aims for on Apple platforms. The two CachingProtocol rows below it use the heuristic rules.",
    ]

    /// Whether `client` is the URLCache client and stored nothing: its cache empty at the end,
    /// no answer from it, every request at the origin (Linux, `Docs/foundation-facts.md` L5).
    static func storedNothing(_ client: ClientResult) -> Bool {
        client.kind == .urlCache && client.cacheBytes == 0 && client.fromCache == 0 && client.revalidated == 0
    }

    static let storedNothingNote = [
        "* stored nothing: its cache held 0 bytes at the end and every request went to the origin, as without a",
        "  cache. Foundation's URLCache caches nothing through URLSession on Linux (Docs/foundation-facts.md L5). On",
        "  Apple platforms it caches by the headers (Apple's documentation of .useProtocolCachePolicy; not run here):",
        "  the header-only row shows such caching on this machine.",
    ]

    /// The client's name, marked "*" when it stored nothing (see ``storedNothingNote``).
    static func label(_ client: ClientResult) -> String {
        storedNothing(client) ? client.name + " *" : client.name
    }

    /// The width of a column of client labels, with room to spare.
    static func nameWidth(_ clients: [ClientResult]) -> Int {
        max(34, (clients.map { label($0).count }.max() ?? 0) + 2)
    }

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
        let nameWidth = nameWidth(clients)
        let methodColumns = methods.map { leftPad($0, 6) }.joined() + leftPad("all", 6)
        let requestsWidth = methodColumns.count
        var header1 = pad("", nameWidth) + pad("  origin requests", requestsWidth)
        header1 += pad("   bytes on the wire", 20) + pad("   answers", 41) + "app waited"
        let header2 = pad("client", nameWidth) + methodColumns + leftPad("down", 11) + leftPad("up", 9)
            + leftPad("cache", 7) + leftPad("reval.", 8) + leftPad("fetched", 9) + leftPad("wrong", 7)
            + leftPad("stale ok", 10) + leftPad("total", 10)
        var lines = [header1.trimmingTrailing(), header2, String(repeating: "-", count: header2.count)]
        for client in clients {
            var row = pad(label(client), nameWidth)
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
    /// the wire, 35 % less waiting": each heuristic client against the header-only client first,
    /// then against the clients without the protocol; then the header-only client against those.
    static func savings(_ report: ComparisonReport) -> [String] {
        let headerOnly = report.clients.filter { $0.kind == .cachingProtocolRFC9111 }
        let others = report.clients.filter { !$0.kind.usesProtocol }
        func line(_ ours: ClientResult, _ other: ClientResult) -> String {
            "\(ours.name) against \(label(other)): "
                + "\(percent(ours.originRequestTotal, other.originRequestTotal)) fewer origin requests, "
                + "\(percent(ours.bytesMoved, other.bytesMoved)) fewer bytes on the wire, "
                + "\(percent(ours.waitedSeconds, other.waitedSeconds)) less waiting"
        }
        let heuristic = report.clients.filter(\.kind.isHeuristic).flatMap { ours in
            (headerOnly + others).map { line(ours, $0) }
        }
        return heuristic + headerOnly.flatMap { ours in others.map { line(ours, $0) } }
    }

    /// Per phase, each client's origin requests and the time its app waited; then, when the
    /// header-only client ran, how each heuristic client stands against it phase by phase and the
    /// requests where the header-only client did better.
    static func phaseSection(_ report: ComparisonReport) -> [String] {
        guard let first = report.clients.first, !first.phases.isEmpty else { return [] }
        let width = nameWidth(report.clients)
        var lines = ["Per phase: origin requests · what the app waited"]
        lines.append("  " + pad("client", width) + first.phases.map { leftPad($0.label, 12) }.joined())
        for client in report.clients {
            lines.append("  " + pad(label(client), width) + client.phases.map { phase in
                leftPad("\(phase.originRequests) · " + seconds(phase.waitedSeconds), 12)
            }.joined())
        }
        guard let headerOnly = report.client(.cachingProtocolRFC9111) else { return lines }
        let heuristic = report.clients.filter(\.kind.isHeuristic)
        guard !heuristic.isEmpty else { return lines }
        lines.append("Against \(headerOnly.name), phase by phase (origin requests, then bytes down):")
        for client in heuristic {
            let standings = report.standings(of: client.kind, against: .cachingProtocolRFC9111)
            func at(_ standing: PhaseStanding.Standing) -> String? {
                let phases = standings.filter { $0.standing == standing }.map(\.ours.label)
                return phases.isEmpty ? nil : phases.joined(separator: ", ")
            }
            var parts: [String] = []
            if let ahead = at(.ahead) { parts.append("ahead at \(ahead)") }
            if let same = at(.same) { parts.append("the same at \(same)") }
            if let mixed = at(.mixed) { parts.append("fewer of one, more of the other at \(mixed)") }
            parts.append(at(.behind).map { "behind at \($0)" } ?? "behind nowhere")
            lines.append("  \(client.name): " + parts.joined(separator: "; "))
        }
        lines.append("Request by request, where \(headerOnly.name) did better:")
        for client in heuristic {
            let better = report.requests(where: .cachingProtocolRFC9111, didBetterThan: client.kind)
            let items = better.map { ours, theirs -> String in
                var text = "\(ours.path) at \(when(ours)) ("
                if theirs.isCurrent != ours.isCurrent {
                    text += "the current body for \(count(theirs.hops.count, "origin request")); this client the older one, "
                    text += ours.isAllowedStale ? "inside its rules' window" : "WRONG"
                } else if theirs.hops.count != ours.hops.count {
                    text += "\(count(theirs.hops.count, "origin request")), not \(ours.hops.count)"
                } else {
                    text += "\(grouped(theirs.originBytes)) B down, not \(grouped(ours.originBytes))"
                }
                return text + ")"
            }
            lines.append("  \(client.name): " + (items.isEmpty ? "nowhere" : items.joined(separator: "; ")))
        }
        return lines
    }

    /// "1 origin request", "2 origin requests".
    static func count(_ value: Int, _ noun: String) -> String {
        "\(value) \(noun)\(value == 1 ? "" : "s")"
    }

    /// One line per rule from the heuristic client's records; with the header-only client, its
    /// line under each, and what each set of rules does with the resource.
    static func ruleSection(_ report: ComparisonReport) -> [String] {
        guard !report.rules.isEmpty, let client = report.rulesClient else { return [] }
        guard let headerOnly = report.client(.cachingProtocolRFC9111), !report.headerOnlyRules.isEmpty else {
            var lines = ["What each rule did (\(client.name), from the origin's log):"]
            for rule in report.rules {
                lines.append("  \(rule.title)  \(rule.path)")
                lines.append("      " + rule.line)
            }
            return lines
        }
        var lines = ["What each rule did, from the origin's log (heuristic: \(client.name); header-only: \(headerOnly.name)):"]
        for rule in report.rules {
            let other = report.headerOnlyRules.first { $0.path == rule.path }
            let treatments = [("heuristic", rule), ("header-only", other)].compactMap { name, trace -> String? in
                trace?.treatment.map { "\(name): \($0)" }
            }
            lines.append("  \(rule.rule.name)  \(rule.path)" + (treatments.isEmpty ? "" : "  — " + treatments.joined(separator: "; ")))
            lines.append("      heuristic:   " + rule.line)
            if let other { lines.append("      header-only: " + other.line) }
        }
        return lines
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
        let width = nameWidth(report.clients)
        var lines = ["What the app waited per request (median, \(report.network.name)):"]
        lines.append("  " + pad("client", width) + kinds.map { leftPad($0.1, 13) }.joined())
        for client in report.clients {
            lines.append("  " + pad(label(client), width) + kinds.map { kind in
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
        let width = nameWidth(report.clients)
        lines.append("  " + pad("client", width) + leftPad("answered", 10) + leftPad("failed", 8) + leftPad("stale", 7)
                     + leftPad("waited", 10))
        func row(_ name: String, _ result: OfflineResult) -> [String] {
            var lines = ["  " + pad(name, width) + leftPad("\(result.answered) of \(result.requests)", 10)
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
            lines += row(label(client), offline)
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
            let wrong = run.filter { $0.isWrong && !$0.isOtherUsers }.count
            if wrong > 0 { text += ", \(wrong) WRONG (stale)" }
            let otherUsers = run.filter(\.isOtherUsers).count
            if otherUsers > 0 { text += ", \(otherUsers) WRONG (another user's body)" }
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
            if record.isWrong { text += record.isOtherUsers ? ", WRONG (another user's body)" : ", WRONG (stale body)" }
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
