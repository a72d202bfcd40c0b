import Foundation

/// The comparison as a picture (`Demo --svg FILE`): plain SVG text, no dependency.
///
/// One row per client: the time its app waited as a bar stacked by phase (a phase answered from
/// the cache is thin: a hit costs no round trip), then its origin requests and its bytes on
/// the wire as bars of their own, with the numbers. Above: the session, the network, the date and
/// the command that made it; under: what the rows are. Every bar of a column shares one scale,
/// the longest bar being the largest value. The same report always gives the same text.
public enum ReportSVG {
    /// The picture of `report`; `command` is printed under the title, e.g. "swift run Demo --svg
    /// Docs/demo.svg", so a reader can make it again.
    public static func render(_ report: ComparisonReport, command: String) -> String {
        var svg = SVGText()
        let clients = report.clients
        let phases = phaseLegend(report)
        let rowsTop = Layout.rowsTop
        let notes = notes(report)
        let height = rowsTop + Double(clients.count) * Layout.rowHeight + 14 + Double(notes.count) * 15 + 8
        let maxWaited = clients.map(\.waitedSeconds).max() ?? 0
        let maxRequests = clients.map(\.originRequestTotal).max() ?? 0
        let maxBytes = clients.map(\.bytesMoved).max() ?? 0

        svg.open("svg", ["xmlns": "http://www.w3.org/2000/svg", "width": n(Layout.width), "height": n(height),
                         "viewBox": "0 0 \(n(Layout.width)) \(n(height))",
                         "font-family": "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif", "font-size": "12"])
        let title = "CachingProtocol Demo: what the app waited per phase, and what the origin saw"
        svg.element("title", [:], text: title)
        svg.element("rect", ["width": "100%", "height": "100%", "fill": "#ffffff"])
        svg.element("text", ["x": n(Layout.left), "y": "24", "font-size": "16", "font-weight": "bold"], text: title)
        svg.element("text", ["x": n(Layout.left), "y": "44"], text: sessionLine(report))
        svg.element("text", ["x": n(Layout.left), "y": "61", "fill": "#57606a"],
                    text: "measured \(day(report.date)) on \(platformName) · \(command)")

        // The phases' colours, in the order of the stacks.
        var x = Layout.left
        for (index, phase) in phases.enumerated() {
            svg.element("rect", ["x": n(x), "y": "72", "width": "12", "height": "12", "fill": color(index)])
            svg.element("text", ["x": n(x + 16), "y": "82"], text: phase)
            x += 16 + Double(phase.count) * 7 + 18
        }

        let headerY = rowsTop - 8
        let headers: [(Double, String)] = [
            (Layout.left, "client"), (Layout.waitedX, "app waited, stacked by phase"),
            (Layout.requestsX, "origin requests"), (Layout.bytesX, "bytes on the wire"),
        ]
        for (x, text) in headers {
            svg.element("text", ["x": n(x), "y": n(headerY), "font-weight": "bold"], text: text)
        }

        for (row, client) in clients.enumerated() {
            let top = rowsTop + Double(row) * Layout.rowHeight
            svg.open("g", ["class": "client", "data-client": client.kind.rawValue])
            if row % 2 == 0 {
                svg.element("rect", ["x": n(Layout.left - 6), "y": n(top), "width": n(Layout.width - 2 * Layout.left + 12),
                                     "height": n(Layout.rowHeight), "fill": "#f6f8fa"])
            }
            svg.element("text", ["x": n(Layout.left), "y": n(top + 18), "font-size": "13"], text: ReportText.label(client))
            svg.element("text", ["x": n(Layout.left), "y": n(top + 34), "font-size": "11", "fill": "#57606a"],
                        text: detailLine(client))

            let barTop = top + 7
            var x = Layout.waitedX
            for (index, phase) in client.phases.enumerated() {
                let width = scaled(phase.waitedSeconds, maxWaited, Layout.waitedWidth)
                svg.open("rect", ["class": "phase", "data-phase": phase.phase, "x": n(x), "y": n(barTop),
                                  "width": n(width), "height": n(Layout.barHeight), "fill": color(phaseIndex(phase, phases) ?? index)])
                svg.element("title", [:], text: "\(phase.phase): \(ReportText.seconds(phase.waitedSeconds)) waited, "
                                        + ReportText.count(phase.originRequests, "origin request"))
                svg.close("rect")
                x += width
            }
            svg.element("text", ["class": "total", "x": n(x + 6), "y": n(barTop + 13)],
                        text: ReportText.seconds(client.waitedSeconds))

            let requests = scaled(Double(client.originRequestTotal), Double(maxRequests), Layout.smallBarWidth)
            svg.element("rect", ["class": "requests", "x": n(Layout.requestsX), "y": n(barTop), "width": n(requests),
                                 "height": n(Layout.barHeight), "fill": Layout.neutral])
            svg.element("text", ["x": n(Layout.requestsX + requests + 6), "y": n(barTop + 13)],
                        text: String(client.originRequestTotal))
            let bytes = scaled(Double(client.bytesMoved), Double(maxBytes), Layout.smallBarWidth)
            svg.element("rect", ["class": "bytes", "x": n(Layout.bytesX), "y": n(barTop), "width": n(bytes),
                                 "height": n(Layout.barHeight), "fill": Layout.neutral])
            svg.element("text", ["x": n(Layout.bytesX + bytes + 6), "y": n(barTop + 13)],
                        text: ReportText.grouped(client.bytesMoved) + " B")
            svg.close("g")
        }

        var noteY = rowsTop + Double(clients.count) * Layout.rowHeight + 20
        for note in notes {
            svg.element("text", ["x": n(Layout.left), "y": n(noteY), "font-size": "11", "fill": "#57606a"], text: note)
            noteY += 15
        }
        svg.close("svg")
        return svg.text
    }

    /// Writes ``render(_:command:)`` to `url` (replacing what is there).
    public static func write(_ report: ComparisonReport, command: String, to url: URL) throws {
        try Data(render(report, command: command).utf8).write(to: url, options: .atomic)
    }

    // MARK: Parts

    enum Layout {
        static let width = 1000.0
        static let left = 16.0
        static let rowsTop = 114.0
        static let rowHeight = 44.0
        static let barHeight = 18.0
        /// Room for the longest client name at 13 px.
        static let waitedX = 300.0
        static let waitedWidth = 340.0
        static let requestsX = 720.0
        static let bytesX = 850.0
        static let smallBarWidth = 60.0
        static let neutral = "#8c959f"
    }

    /// One colour per phase, distinct side by side (Tableau 10).
    private static let palette = ["#4e79a7", "#f28e2b", "#edc948", "#ff9da7", "#59a14f", "#76b7b2", "#b07aa1",
                                  "#e15759", "#9c755f", "#bab0ac"]

    private static func color(_ index: Int) -> String {
        palette[index % palette.count]
    }

    /// The phases with requests, as the first client played them: the legend's labels, in order.
    private static func phaseLegend(_ report: ComparisonReport) -> [String] {
        report.clients.first?.phases.map(\.label) ?? []
    }

    private static func phaseIndex(_ phase: PhaseCost, _ legend: [String]) -> Int? {
        legend.firstIndex(of: phase.label)
    }

    /// "45 requests per client, one at a time, 7 phases over 8 d of simulated time · 4g: 70 ms
    /// round trip, 12 Mbit/s down".
    private static func sessionLine(_ report: ComparisonReport) -> String {
        let scenario = report.scenario
        let withRequests = report.clients.first?.phases.count ?? 0
        let simulated = DurationText.label(scenario.phases.last?.offset ?? 0)
        return "\(scenario.requestCount) requests per client, one at a time, in \(withRequests) phases over "
            + "\(simulated) of simulated time · network \(report.network.name): \(report.network.summary)"
    }

    /// "0 wrong · 1 stale ok · 17 from the cache · offline: 5 of 8 answered".
    private static func detailLine(_ client: ClientResult) -> String {
        var parts = ["\(client.wrongAnswers) wrong", "\(client.allowedStale) stale ok",
                     "\(client.fromCache) from the cache", "\(client.revalidated) revalidated"]
        if let offline = client.offline {
            parts.append("offline: \(offline.answered) of \(offline.requests) answered")
        }
        return parts.joined(separator: " · ")
    }

    private static func notes(_ report: ComparisonReport) -> [String] {
        var notes: [String] = []
        if report.client(.cachingProtocolRFC9111) != nil {
            notes.append("header-only: the same layer with the .rfc9111 preset, caching by the headers alone as RFC 9111 states them "
                         + "(what an AFNetworking-style URLCache setup aims for on Apple);")
            notes.append("the CachingProtocol rows under it use the heuristic rules. wrong / stale ok: judged by each client's own rules.")
        }
        if report.clients.contains(where: ReportText.storedNothing) {
            notes.append("* stored nothing on this machine: Foundation's URLCache caches nothing through URLSession on Linux "
                         + "(Docs/foundation-facts.md L5), so its row is the same as no cache.")
        }
        notes.append("app waited: each request's time to its answer, summed per phase (a hit costs no round trip). "
                     + "bytes on the wire: both ways. Table and details: swift run Demo.")
        return notes
    }

    /// `value` of `maximum` as a share of `width`.
    private static func scaled(_ value: Double, _ maximum: Double, _ width: Double) -> Double {
        maximum > 0 ? value / maximum * width : 0
    }

    /// A coordinate with at most one decimal: "12", "12.5".
    private static func n(_ value: Double) -> String {
        let tenths = (value * 10).rounded()
        return tenths.truncatingRemainder(dividingBy: 10) == 0 ? String(Int(tenths / 10)) : String(tenths / 10)
    }

    /// "2026-11-26" (UTC).
    private static func day(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: date)
    }

    private static var platformName: String {
        #if os(Linux)
        return "Linux"
        #elseif os(macOS)
        return "macOS"
        #elseif os(iOS)
        return "iOS"
        #elseif os(tvOS)
        return "tvOS"
        #else
        return "this platform"
        #endif
    }
}

/// SVG written as text: elements with their attributes in a stable order, text escaped.
private struct SVGText {
    private(set) var text = ""
    private var depth = 0

    mutating func open(_ name: String, _ attributes: [String: String]) {
        text += indent + "<\(name)\(Self.attributes(attributes))>\n"
        depth += 1
    }

    mutating func close(_ name: String) {
        depth -= 1
        text += indent + "</\(name)>\n"
    }

    /// An element on one line: empty (`<rect … />`) without `text`.
    mutating func element(_ name: String, _ attributes: [String: String], text content: String? = nil) {
        if let content {
            text += indent + "<\(name)\(Self.attributes(attributes))>\(Self.escape(content))</\(name)>\n"
        } else {
            text += indent + "<\(name)\(Self.attributes(attributes))/>\n"
        }
    }

    private var indent: String { String(repeating: "  ", count: depth) }

    /// ` a="1" b="2"`, sorted by name so the same picture is the same text.
    private static func attributes(_ attributes: [String: String]) -> String {
        attributes.sorted { $0.key < $1.key }.map { " \($0.key)=\"\(escape($0.value))\"" }.joined()
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
