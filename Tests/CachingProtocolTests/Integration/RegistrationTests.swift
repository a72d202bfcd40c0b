import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

#if os(macOS) || os(Linux)
/// `register()` for `URLSession.shared`. The shared session exists once per process, so each
/// case runs in a process of its own (CacheTestTool).
final class RegistrationTests: LoaderRulesTestCase {
    private var origin: LoopbackOrigin!
    private var directory: URL!

    override func setUpWithError() throws {
        origin = try LoopbackOrigin()
        origin.handle("/shared") { _ in .text("via shared", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("registration-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        origin.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// What `register()` returns where it cannot look (Linux) or need not (Apple).
    private var unverifiedOrActive: String {
        #if canImport(FoundationNetworking)
        "registration=unverified"
        #else
        "registration=active"
        #endif
    }

    func testRegisteringBeforeTheSharedSessionExistsCaches() throws {
        let run = try CacheTestToolRunner.run(["register", "early", directory.path, origin.url("/shared").absoluteString])
        XCTAssertEqual(run.status, 0, run.errors)
        XCTAssertTrue(run.output.contains(unverifiedOrActive), run.output)
        XCTAssertTrue(run.output.contains("cache-status=CachingProtocol; hit"), run.output)
        XCTAssertEqual(origin.requestCount(path: "/shared"), 1, "the second GET was a hit")
    }

    /// A session existed before `register()` (the shared one, or another and then the shared
    /// one). On Linux Foundation's HTTP protocol comes first for the shared session and the layer
    /// is never asked; `register()` cannot see that without making a session itself — which
    /// would put Foundation's protocols ahead of those the app registers later — so it neither
    /// looks nor blames: nothing is cached, nothing is claimed. Apple's shared session consults
    /// registered classes at every task (apple note 9): it caches there.
    func testRegisteringAfterASessionExistedIsNotClaimedToWork() throws {
        for order in ["shared-first", "late"] {
            origin.resetLog()
            let run = try CacheTestToolRunner.run(["register", order, directory.path, origin.url("/shared").absoluteString])
            XCTAssertEqual(run.status, 0, run.errors)
            XCTAssertTrue(run.output.contains(unverifiedOrActive), "\(order): \(run.output)")
            XCTAssertFalse(run.errors.contains("existed before"), run.errors)
            #if canImport(FoundationNetworking)
            XCTAssertEqual(origin.requestCount(path: "/shared"), 2, "\(order): Foundation loaded both")
            #else
            XCTAssertEqual(origin.requestCount(path: "/shared"), 1, "\(order): the second GET was a hit")
            #endif
        }
    }

    // MARK: Protocols the app registers

    /// Runs `scenario` of `registered-protocols` without and then with the layer; the origin's
    /// log is reset before each. What each printed, and the origin traffic of each.
    private func registeredProtocols(_ scenario: String) throws -> [(output: String, traffic: [String])] {
        try ["without", "with"].map { side in
            origin.resetLog()
            let run = try CacheTestToolRunner.run(["registered-protocols", scenario, side, origin.baseURL.absoluteString,
                                                   directory.appendingPathComponent(side).path])
            XCTAssertEqual(run.status, 0, "\(side): \(run.errors)")
            return (run.output, origin.requests.map { "\($0.method) \($0.target)" })
        }
    }

    /// The lines both runs must print alike: the app's results and what its protocol did.
    private func appLines(_ output: String) -> [String] {
        output.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("status=") && !$0.hasPrefix("layer ") }
    }

    private func layerLine(_ output: String) -> String {
        output.split(separator: "\n").map(String.init).first { $0.hasPrefix("layer ") } ?? "(no layer line)"
    }

    /// OHHTTPStubs registered after `register()`: it answers /stubbed as without the layer. On
    /// Linux the shared session asks the layer first (registered first), and the layer's own
    /// request goes through the stub; /real goes to the origin.
    func testAStubRegisteredAfterRegisterStillAnswers() throws {
        let (without, with) = try pairOfRuns("stub-after")
        XCTAssertEqual(appLines(without.output), [
            "result stubbed: status 200 bytes 7 stubbed", "result real: status 200 bytes 6 origin",
            "result stubbed: status 200 bytes 7 stubbed", "result real: status 200 bytes 6 origin",
            "stub answered [\"GET /stubbed\", \"GET /stubbed\"]",
        ], without.output)
        XCTAssertEqual(appLines(with.output), appLines(without.output), with.output)
        XCTAssertTrue(with.output.contains(unverifiedOrActive.replacingOccurrences(of: "registration", with: "status")), with.output)
        XCTAssertFalse(with.traffic.contains("GET /stubbed"), "\(with.traffic)")
    }

    /// An app's own tests, each stubbing /feed differently, with the layer registered ahead of the
    /// stub in `setUp`: with `CachingConfiguration.forTesting()` each test gets its own stub's
    /// answer, as without the layer, in this run and the next; with a configuration of the app's
    /// own on one directory the second test (and every later run) is answered from the cache with
    /// the first test's answer.
    func testEachTestOfAnAppSeesItsOwnStubsAnswerWithATestingConfiguration() throws {
        func run(_ side: String) throws -> [String] {
            let run = try CacheTestToolRunner.run(["registered-protocols", "stub-per-test", side, origin.baseURL.absoluteString,
                                                   directory.appendingPathComponent("app").path])
            XCTAssertEqual(run.status, 0, "\(side): \(run.errors)")
            return appLines(run.output)
        }
        let expected = ["result test 1: status 200 bytes 5 first", "result test 1: status 200 bytes 5 first",
                        "result test 2: status 200 bytes 6 second", "result test 2: status 200 bytes 6 second"]
        XCTAssertEqual(try run("without"), expected)
        XCTAssertEqual(try run("for-testing"), expected, "each test its own answer")
        XCTAssertEqual(try run("for-testing"), expected, "and so in the next run")
        XCTAssertEqual(try run("with"), Array(repeating: "result test 1: status 200 bytes 5 first", count: 2)
                       + Array(repeating: "result test 2: status 200 bytes 5 first", count: 2),
                       "what it avoids: the first test's stub answer, stored, answers the second")
        XCTAssertEqual(origin.requestCount(), 0, "the stub answered everything")
    }

    /// A stub registered before `register()`: it is asked first and answers; `register()` does
    /// not claim it came too late.
    func testAStubRegisteredBeforeRegisterStillAnswers() throws {
        let (without, with) = try pairOfRuns("stub-before")
        XCTAssertEqual(appLines(with.output), appLines(without.output), with.output)
        XCTAssertTrue(without.output.contains("stub answered [\"GET /stubbed\", \"GET /stubbed\"]"), without.output)
        XCTAssertTrue(with.output.contains(unverifiedOrActive.replacingOccurrences(of: "registration", with: "status")), with.output)
        XCTAssertFalse(with.traffic.contains("GET /stubbed"), "\(with.traffic)")
    }

    /// netfox registered after `register()` sees all four requests, as without the layer: the
    /// GETs as the layer's own requests (the second /fresh is a hit, which it does not see), the
    /// POST as the app's.
    func testALoggerRegisteredAfterRegisterSeesTheRequests() throws {
        let (without, with) = try pairOfRuns("logger-after")
        XCTAssertTrue(without.output.contains("logger saw [\"GET /fresh\", \"GET /fresh\", \"GET /plain\", \"POST /form\"]"),
                      without.output)
        XCTAssertEqual(appLines(with.output).filter { $0.hasPrefix("result") }, appLines(without.output).filter { $0.hasPrefix("result") })
        XCTAssertTrue(with.output.contains("logger saw [\"GET /fresh\", \"GET /plain\", \"POST /form\"]"), with.output)
        XCTAssertEqual(with.traffic, ["GET /fresh", "GET /plain", "POST /form"], "every request that reached the origin went through the logger")
    }

    /// A logger in the layer's upstream path that hands a body on in pieces: a completion
    /// handler gets only the last piece (Docs/foundation-facts.md, L10), with or without the
    /// layer. The layer's own request, a completion handler's too, got that piece: its length is
    /// not the `Content-Length`, so it is not stored, and the second GET goes through the logger
    /// again, as without the layer.
    func testABodyShorterThanItsContentLengthIsNotStored() throws {
        let (without, with) = try pairOfRuns("pieces-logger-after")
        // The last piece's size depends on how the logger's own reads fell: any part will do.
        func lines(_ output: String) -> [String] {
            appLines(output).map { line in
                guard line.hasPrefix("result big"), let bytes = Int(line.split(separator: " ").last ?? ""),
                      bytes < Self.bigBody.count else { return line }
                return line.split(separator: ":")[0] + ": status 200, a part"
            }
        }
        XCTAssertEqual(lines(without.output), [
            "result big: status 200, a part", "result big, again: status 200, a part", "logger saw [\"GET /big\", \"GET /big\"]",
        ], without.output)
        XCTAssertEqual(lines(with.output), lines(without.output), with.output)
        XCTAssertEqual(layerLine(with.output), "layer fetched=2 hits=0 not-stored=[\"incompleteBody\", \"incompleteBody\"]", with.output)
    }

    /// A logger that hands on only the first 100,000 bytes of a body, in one piece, and ends it
    /// cleanly: the app gets those bytes, with or without the layer, and the layer stores
    /// nothing of them.
    func testATransferEndedBeforeItsContentLengthIsNotStored() throws {
        let (without, with) = try pairOfRuns("cutting-logger-after")
        XCTAssertEqual(appLines(without.output), [
            "result big: status 200 bytes 100000", "result big, again: status 200 bytes 100000",
            "logger saw [\"GET /big\", \"GET /big\"]",
        ], without.output)
        XCTAssertEqual(appLines(with.output), appLines(without.output), with.output)
        XCTAssertEqual(layerLine(with.output), "layer fetched=2 hits=0 not-stored=[\"incompleteBody\", \"incompleteBody\"]", with.output)
    }

    private static let bigBody = Data((0..<(512 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 509) })

    private func pairOfRuns(_ scenario: String) throws -> (without: (output: String, traffic: [String]),
                                                              with: (output: String, traffic: [String])) {
        origin.handle("/real") { _ in .text("origin", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/fresh") { _ in .text("fresh", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/plain") { _ in .text("plain") }
        origin.handle("/form") { _ in .text("posted") }
        origin.handle("/big") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: Self.bigBody)
        }
        let runs = try registeredProtocols(scenario)
        return (runs[0], runs[1])
    }
}
#else
final class RegistrationTests: LoaderRulesTestCase {
    func testRegistrationInAProcessOfItsOwn() throws {
        throw XCTSkip("URLSession.shared exists once per process: each case runs CacheTestTool, a process, and this platform cannot start one")
    }
}
#endif
