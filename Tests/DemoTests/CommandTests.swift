import CachingProtocol
@testable import DemoSupport
import Foundation
import LoopbackOrigin
import XCTest

/// The JSON for scripts, the argument handling and `Demo fetch`.
final class CommandTests: LoaderRulesTestCase {
    // MARK: JSON

    func testJSONHasTheDocumentedShape() async throws {
        let report = try await Comparison().run()
        let object = try JSONSerialization.jsonObject(with: try ReportJSON.data(report))
        let document = try XCTUnwrap(object as? [String: Any])
        let clients = try XCTUnwrap(document["clients"] as? [[String: Any]])
        XCTAssertEqual(clients.count, ClientKind.allCases.count)
        for (client, result) in zip(clients, report.clients) {
            XCTAssertEqual(client["name"] as? String, result.name)
            let requests = try XCTUnwrap(client["originRequests"] as? [String: Int])
            XCTAssertEqual(requests, result.originRequests)
            XCTAssertEqual(client["originBytes"] as? Int, result.originBytes)
            XCTAssertEqual(client["fromCache"] as? Int, result.fromCache)
            XCTAssertEqual(client["revalidated"] as? Int, result.revalidated)
            XCTAssertEqual(client["fetched"] as? Int, result.fetched)
            XCTAssertEqual(client["wrongAnswers"] as? Int, result.wrongAnswers)
            XCTAssertNotNil(client["seconds"] as? Double)
            // Per phase, adding up to the client's totals
            let phases = try XCTUnwrap(client["phases"] as? [[String: Any]])
            XCTAssertEqual(phases.compactMap { $0["originRequests"] as? Int }.reduce(0, +), result.originRequestTotal)
            XCTAssertEqual(phases.compactMap { $0["originBytes"] as? Int }.reduce(0, +), result.originBytes)
            XCTAssertEqual(phases.compactMap { $0["phase"] as? String }, result.phases.map(\.phase))
        }
        // The header-only client, with its numbers and its rule lines
        let headerOnly = try XCTUnwrap(clients.first { $0["id"] as? String == "cachingProtocolRFC9111" })
        XCTAssertEqual(headerOnly["name"] as? String, "header-only (CachingProtocol .rfc9111)")
        XCTAssertEqual(headerOnly["wrongAnswers"] as? Int, 0)
        XCTAssertEqual(headerOnly["originRequests"] as? [String: Int], report.client(.cachingProtocolRFC9111)?.originRequests)
        let headerOnlyRules = try XCTUnwrap(document["headerOnlyRules"] as? [[String: Any]])
        XCTAssertEqual(headerOnlyRules.count, DemoRule.allCases.count)
        XCTAssertEqual(headerOnlyRules.first { $0["rule"] as? String == "image" }?["treatment"] as? String, "not stored")
        let rules = try XCTUnwrap(document["rules"] as? [[String: Any]])
        XCTAssertEqual(rules.count, DemoRule.allCases.count)
        XCTAssertNotNil(rules.first?["line"] as? String)
        XCTAssertNotNil(document["date"] as? String)
    }

    // MARK: Arguments

    func testArgumentsSelectTheCommand() throws {
        XCTAssertEqual(try DemoCommand.parse([]), .compare(json: false))
        XCTAssertEqual(try DemoCommand.parse(["--json"]), .compare(json: true))
        XCTAssertEqual(try DemoCommand.parse(["compare", "--json"]), .compare(json: true))
        XCTAssertEqual(try DemoCommand.parse(["--help"]), .help)
        XCTAssertEqual(try DemoCommand.parse(["-h"]), .help)
        XCTAssertEqual(try DemoCommand.parse(["sessions"]), .sessions)
        XCTAssertThrowsError(try DemoCommand.parse(["sessions", "extra"]))
        XCTAssertEqual(try DemoCommand.parse(["fetch", "--help"]), .help)
        let url = try XCTUnwrap(URL(string: "https://example.com/a?b=1"))
        XCTAssertEqual(try DemoCommand.parse(["fetch", url.absoluteString]), .fetch(FetchOptions(url: url, times: 2)))
        XCTAssertEqual(try DemoCommand.parse(["fetch", url.absoluteString, "--times", "5", "--cache-dir", "/tmp/c"]),
                       .fetch(FetchOptions(url: url, times: 5, cacheDirectory: URL(fileURLWithPath: "/tmp/c", isDirectory: true))))
        XCTAssertEqual(try DemoCommand.parse(["fetch", "--times", "3", url.absoluteString]), .fetch(FetchOptions(url: url, times: 3)))
        XCTAssertEqual(try DemoCommand.parse(["--svg", "Docs/demo.svg"]),
                       .compare(json: false, svg: URL(fileURLWithPath: "Docs/demo.svg")))
        XCTAssertEqual(try DemoCommand.parse(["--network", "3g", "--svg=/tmp/a.svg", "--json"]),
                       .compare(json: true, network: .threeG, svg: URL(fileURLWithPath: "/tmp/a.svg")))
    }

    func testBadArgumentsAreOneClearError() {
        let cases: [([String], String)] = [
            (["--bogus"], "unknown option '--bogus'"),
            (["frobnicate"], "unknown command 'frobnicate'"),
            (["--json", "extra"], "unexpected argument 'extra'"),
            (["fetch"], "fetch needs a URL"),
            (["fetch", "ftp://example.com/"], "'ftp://example.com/' is not an http or https URL"),
            (["fetch", "not a url"], "'not a url' is not an http or https URL"),
            (["fetch", "http://a/", "http://b/"], "fetch takes one URL, got a second: 'http://b/'"),
            (["fetch", "http://a/", "--times"], "--times needs a value"),
            (["fetch", "http://a/", "--times", "0"], "--times needs a whole number of at least 1, not '0'"),
            (["fetch", "http://a/", "--times", "two"], "--times needs a whole number of at least 1, not 'two'"),
            (["fetch", "http://a/", "--fast"], "unknown option '--fast' for fetch"),
            (["--svg"], "--svg needs a file to write"),
            (["--svg", "--json"], "--svg needs a file to write"),
            (["--svg="], "--svg needs a file to write"),
        ]
        for (arguments, message) in cases {
            XCTAssertThrowsError(try DemoCommand.parse(arguments), "\(arguments)") { error in
                XCTAssertEqual((error as? UsageError)?.message, message)
                XCTAssertFalse(message.contains("\n"))
            }
        }
        XCTAssertEqual(DemoCommand.usageExitCode, 64)
        XCTAssertTrue(DemoCommand.usage.contains("fetch URL [--times N]"))
    }

    // MARK: fetch

    /// The two sessions keep their caches apart and follow their own rules: the numbers are
    /// those the scenario's script makes certain (see `SessionsScenario`).
    func testTheSessionsScenarioCountsEachSessionOnItsOwn() async throws {
        let results = try await SessionsScenario().run()
        XCTAssertEqual(results.map(\.name), ["images", "api"])
        let images = results[0], api = results[1]
        // 8 images at 4 moments: fetched once each, then kept for 7 days
        XCTAssertEqual([images.appRequests, images.originRequests, images.statistics.hits], [32, 8, 24])
        XCTAssertEqual([images.storedEntries, images.originBodyBytes], [8, 8 * 24_000])
        // API: the catalog fetched at launch, a hit at +2 min (fresh 300 s), fetched at +10 min and
        // +2 days; the profile revalidated every time after launch (RFC 9111 no-cache); analytics
        // bypassed: 4 origin requests the layer never counted
        XCTAssertEqual([api.appRequests, api.originRequests], [12, 11])
        XCTAssertEqual([api.statistics.hits, api.statistics.fetched, api.statistics.revalidatedNotModified], [1, 4, 3])
        XCTAssertEqual(api.storedEntries, 2, "catalog and profile; the analytics beacon was never stored")
        XCTAssertTrue(SessionsScenario.render(results).contains("images             32                8"))
    }

    func testFetchReportsWhatEachFetchDid() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.serve("/etag", OriginResource(body: Data(repeating: 7, count: 5_000), contentType: "application/json",
                                             lastModified: .none))
        let output = Locked<[String]>([])
        let errors = Locked<[String]>([])
        let status = await FetchCommand.run(
            FetchOptions(url: origin.url("/etag"), times: 3),
            output: { line in output.withLock { $0.append(line) } },
            errorOutput: { line in errors.withLock { $0.append(line) } })

        XCTAssertEqual(status, 0)
        XCTAssertEqual(errors.withLock { $0 }, [])
        let lines = output.withLock { $0 }
        XCTAssertEqual(lines.count, 4, lines.joined(separator: "\n"))
        XCTAssertTrue(lines[1].hasPrefix("#1  fetched (200)"), lines[1])
        XCTAssertTrue(lines[2].hasPrefix("#2  hit"), lines[2])
        XCTAssertTrue(lines[3].hasPrefix("#3  hit"), lines[3])
        XCTAssertTrue(lines[2].contains("5,000 B"), lines[2])
        XCTAssertEqual(origin.requestCount(), 1, "two of three fetches never reached the origin")
        XCTAssertNil(CachingURLProtocol.configuration, "the command uninstalls the protocol")
    }

    func testFetchOfAnUnreachableURLIsOneLineAndExitOne() async throws {
        let output = Locked<[String]>([])
        let errors = Locked<[String]>([])
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1:1/"))
        let status = await FetchCommand.run(
            FetchOptions(url: url, times: 2),
            output: { line in output.withLock { $0.append(line) } },
            errorOutput: { line in errors.withLock { $0.append(line) } })

        XCTAssertEqual(status, 1)
        let messages = errors.withLock { $0 }
        XCTAssertEqual(messages.count, 1)
        XCTAssertTrue(messages.first?.hasPrefix("Demo: cannot fetch http://127.0.0.1:1/: ") ?? false, "\(messages)")
        XCTAssertEqual(output.withLock { $0 }, [], "nothing but the one error line")
    }

    // MARK: Progress

    func testProgressAppearsOnceTheDelayHasPassed() {
        let shown = expectation(description: "progress written")
        shown.assertForOverFulfill = false
        let written = Locked<[String]>([])
        let progress = ProgressReporter(delay: 0, isTerminal: false) { text in
            written.withLock { $0.append(text) }
            shown.fulfill()
        }
        progress.stage("[1/4] no cache")
        wait(for: [shown], timeout: 5)
        progress.finish()
        XCTAssertTrue(written.withLock { $0 }.contains { $0.contains("[1/4] no cache") })
    }
}
