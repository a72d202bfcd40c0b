import CachingProtocol
@testable import DemoSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// `Demo inspect DIR [--json]` on a directory the test fills: the table is largest first with
/// size, age, fresh or stale and pinned, the JSON says the same, and the directory is byte for
/// byte and file for file what it was.
final class InspectCommandTests: LoaderRulesTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("InspectCommandTests-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Every file under `directory` with its size, modification date and contents.
    private func snapshot() throws -> [String: (Int, Date, Data)] {
        var files: [String: (Int, Date, Data)] = [:]
        let root = directory.path
        for path in try FileManager.default.subpathsOfDirectory(atPath: root) {
            let full = root + "/" + path
            let attributes = try FileManager.default.attributesOfItem(atPath: full)
            let data = (attributes[.type] as? FileAttributeType) == .typeDirectory ? Data() : try Data(contentsOf: URL(fileURLWithPath: full))
            files[path] = ((attributes[.size] as? Int) ?? -1, (attributes[.modificationDate] as? Date) ?? .distantPast, data)
        }
        return files
    }

    private func store(_ cache: CachingURLCache, _ url: String, bytes: Int, maxAge: Int) {
        let url = URL(string: url)!
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=\(maxAge)", "ETag": "\"\(bytes)\""])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data(count: bytes)), for: URLRequest(url: url))
    }

    private func collect(_ run: (@escaping @Sendable (String) -> Void) -> Int32) -> (status: Int32, lines: [String]) {
        let lines = Locked<[String]>([])
        let status = run { line in lines.withLock { $0.append(line) } }
        return (status, lines.withLock { $0 }.flatMap { $0.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) })
    }

    func testInspectListsTheDirectoryLargestFirstAndChangesNothing() throws {
        // Given a cache directory with three responses: a small fresh one, a large stale one,
        // and a middle one that is pinned
        let cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 8 << 20, directory: directory)
        store(cache, "https://example.com/small", bytes: 500, maxAge: 3_600)
        store(cache, "https://example.com/large", bytes: 250_000, maxAge: 0)
        store(cache, "https://example.com/middle?x=1", bytes: 12_300, maxAge: 3_600)
        try cache.pin(URL(string: "https://example.com/middle?x=1")!)
        cache.waitUntilSettled()
        let before = try snapshot()
        let now = Date().addingTimeInterval(7)

        // When it is inspected as a table
        let table = collect { InspectCommand.run(directory: directory, json: false, now: now, output: $0, errorOutput: $0) }

        // Then there is a heading, and one line per response, largest first
        XCTAssertEqual(table.status, 0)
        XCTAssertEqual(table.lines.count, 5, table.lines.joined(separator: "\n"))
        XCTAssertTrue(table.lines[0].hasPrefix("3 stored responses, 262.8 KB of bodies, 1 pinned, in "), table.lines[0])
        XCTAssertEqual(table.lines[2], "  250.0 KB     7 s  stale           https://example.com/large")
        XCTAssertEqual(table.lines[3], "   12.3 KB     7 s  fresh   pinned  https://example.com/middle?x=1")
        XCTAssertEqual(table.lines[4], "     500 B     7 s  fresh           https://example.com/small")

        // When it is inspected as JSON
        let json = collect { InspectCommand.run(directory: directory, json: true, now: now, output: $0, errorOutput: $0) }
        let document = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.lines.joined(separator: "\n").utf8)) as? [String: Any])
        let entries = try XCTUnwrap(document["entries"] as? [[String: Any]])
        // Then it says the same
        XCTAssertEqual(entries.map { $0["url"] as? String }, ["https://example.com/large", "https://example.com/middle?x=1",
                                                            "https://example.com/small"])
        XCTAssertEqual(entries.map { $0["bytes"] as? Int }, [250_000, 12_300, 500])
        XCTAssertEqual(entries.map { $0["pinned"] as? Bool }, [false, true, false])
        XCTAssertEqual(entries.map { $0["fresh"] as? Bool }, [false, true, true])
        XCTAssertEqual(entries.map { $0["etag"] as? String }, ["\"250000\"", "\"12300\"", "\"500\""])

        // And the directory is exactly as it was
        let after = try snapshot()
        XCTAssertEqual(Set(after.keys), Set(before.keys))
        for (path, file) in before {
            XCTAssertEqual(after[path]?.0, file.0, path)
            XCTAssertEqual(after[path]?.1, file.1, path)
            XCTAssertEqual(after[path]?.2, file.2, path)
        }
    }

    func testADirectoryWithoutACacheIsOneErrorAndArgumentsAreChecked() throws {
        let missing = collect { InspectCommand.run(directory: directory, json: false, output: { _ in }, errorOutput: $0) }
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.lines.first?.hasPrefix("Demo: CachingError.diskUnavailable: no cache directory at ") == true, "\(missing.lines)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path), "inspect created nothing")

        XCTAssertEqual(try DemoCommand.parse(["inspect", "/tmp/c"]), .inspect(directory: URL(fileURLWithPath: "/tmp/c", isDirectory: true), json: false))
        XCTAssertEqual(try DemoCommand.parse(["inspect", "--json", "/tmp/c"]),
                       .inspect(directory: URL(fileURLWithPath: "/tmp/c", isDirectory: true), json: true))
        XCTAssertThrowsError(try DemoCommand.parse(["inspect"]))
        XCTAssertThrowsError(try DemoCommand.parse(["inspect", "a", "b"]))
        XCTAssertThrowsError(try DemoCommand.parse(["inspect", "a", "--all"]))
        XCTAssertTrue(DemoCommand.usage.contains("Demo inspect DIR [--json]"))
    }
}
