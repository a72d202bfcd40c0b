@testable import DemoSupport
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import XCTest

/// `Demo --svg FILE`: well-formed SVG with one row per client, the time its app waited stacked by
/// phase, and its origin requests and bytes, every bar to the scale of the report's numbers.
final class ReportSVGTests: LoaderRulesTestCase {
    func testOneRowPerClientWithItsPhasesStackedToScale() async throws {
        // Given a comparison of every client
        let report = try await Comparison(scenario: NetworkAndOfflineTests.small, network: NetworkAndOfflineTests.fast).run()
        // When it is drawn, with a command that needs escaping
        let command = "swift run Demo --svg 'a&b <c>.svg'"
        let picture = try SVGElements(ReportSVG.render(report, command: command))

        // Then it parses, and says how it was made
        XCTAssertEqual(picture.elements.first?.name, "svg")
        XCTAssertTrue(picture.elements.contains { $0.name == "text" && $0.text.hasSuffix(command) }, "the command, unescaped")
        // with one row per client, in the report's order
        XCTAssertEqual(picture.elements.filter { $0.name == "g" }.map { $0.attributes["data-client"] },
                       report.clients.map(\.kind.rawValue))
        let maxWaited = try XCTUnwrap(report.clients.map(\.waitedSeconds).max())
        let maxRequests = try XCTUnwrap(report.clients.map(\.originRequestTotal).max())
        let maxBytes = try XCTUnwrap(report.clients.map(\.bytesMoved).max())
        for client in report.clients {
            let row = picture.elements.filter { $0.client == client.kind.rawValue }
            XCTAssertTrue(row.contains { $0.name == "text" && $0.text == ReportText.label(client) }, client.name)
            // each phase a segment, side by side, as wide as its share of the longest total
            let segments = row.filter { $0.attributes["class"] == "phase" }
            XCTAssertEqual(segments.map { $0.attributes["data-phase"] }, client.phases.map(\.phase), client.name)
            var x = ReportSVG.Layout.waitedX
            for (segment, phase) in zip(segments, client.phases) {
                XCTAssertEqual(segment.number("x"), x, accuracy: 0.11, "\(client.name) \(phase.phase)")
                XCTAssertEqual(segment.number("width"), phase.waitedSeconds / maxWaited * ReportSVG.Layout.waitedWidth,
                               accuracy: 0.06, "\(client.name) \(phase.phase)")
                x += segment.number("width")
            }
            let total = try XCTUnwrap(row.first { $0.attributes["class"] == "total" })
            XCTAssertEqual(total.text, ReportText.seconds(client.waitedSeconds))
            // the requests and bytes bars, with their numbers
            let requests = try XCTUnwrap(row.first { $0.attributes["class"] == "requests" })
            XCTAssertEqual(requests.number("width"),
                           Double(client.originRequestTotal) / Double(maxRequests) * ReportSVG.Layout.smallBarWidth, accuracy: 0.06)
            let bytes = try XCTUnwrap(row.first { $0.attributes["class"] == "bytes" })
            XCTAssertEqual(bytes.number("width"),
                           Double(client.bytesMoved) / Double(maxBytes) * ReportSVG.Layout.smallBarWidth, accuracy: 0.06)
            XCTAssertTrue(row.contains { $0.text == String(client.originRequestTotal) }, client.name)
            XCTAssertTrue(row.contains { $0.text == ReportText.grouped(client.bytesMoved) + " B" }, client.name)
        }
        // and the longest wait fills the column
        let longest = picture.elements.filter { $0.attributes["class"] == "phase" }
            .reduce(into: [String: Double]()) { $0[$1.client ?? "", default: 0] += $1.number("width") }.values.max()
        XCTAssertEqual(try XCTUnwrap(longest), ReportSVG.Layout.waitedWidth, accuracy: 0.5)
    }

    func testWriteStoresThePicture() async throws {
        let report = try await Comparison(scenario: NetworkAndOfflineTests.small, clients: [.noCache, .cachingProtocolHead]).run()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ReportSVGTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("demo.svg")
        try ReportSVG.write(report, command: "swift run Demo --svg demo.svg", to: file)
        XCTAssertEqual(try String(contentsOf: file, encoding: .utf8), ReportSVG.render(report, command: "swift run Demo --svg demo.svg"))
        XCTAssertThrowsError(try ReportSVG.write(report, command: "", to: directory.appendingPathComponent("missing/demo.svg")))
    }
}

/// The elements of an SVG document in document order, each with the client row it is in.
private final class SVGElements: NSObject, XMLParserDelegate {
    struct Element {
        var name: String
        var attributes: [String: String]
        var text = ""
        /// The `data-client` of the enclosing row, if any.
        var client: String?

        func number(_ attribute: String) -> Double {
            attributes[attribute].flatMap(Double.init) ?? .nan
        }
    }

    private(set) var elements: [Element] = []
    private var open: [Int] = []
    private var client: String?

    init(_ text: String) throws {
        super.init()
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = self
        guard parser.parse() else {
            throw parser.parserError ?? CocoaError(.fileReadCorruptFile)
        }
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        if name == "g" { client = attributes["data-client"] }
        elements.append(Element(name: name, attributes: attributes, client: client))
        open.append(elements.count - 1)
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if let index = open.last { elements[index].text += string }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        open.removeLast()
        if name == "g" { client = nil }
    }
}
