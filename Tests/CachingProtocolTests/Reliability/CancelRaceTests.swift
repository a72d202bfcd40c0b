import Foundation
import XCTest
@testable import CachingProtocol

#if os(Linux)
/// An app that cancels every task 0–30 ms after `resume()` (`CacheTestTool cancel-race`, see
/// `CancelRace` there), without and with the layer, each run a process of its own so that a trap
/// in Foundation fails the test instead of ending the suite. corelibs traps in `cancel()` when a
/// cancellation meets a redirect or a load that ends at once (Docs/foundation-facts.md, L29,
/// L30); the layer must not make either more likely than it is without it. A run's crash is
/// counted by side and printed; the runs with the layer must not crash.
///
/// Time-boxed for CI: a few runs of 2 s per side, about 24 s in all
/// (`CACHINGPROTOCOL_CANCEL_RACE_SECONDS` and `…_RUNS` set them). The rates over longer runs are
/// in `Docs/reliability.md` (`CacheTestTool cancel-rates`). Linux only: the traps are corelibs'.
final class CancelRaceTests: LoaderRulesTestCase {
    /// How the runs of one side ended.
    private struct Runs {
        var crashes: [String] = []
        var problems: [String] = []
        var cancels = 0

        /// Counts `outcome`: a crash (with its trap's message), a run that hung or did not end, or
        /// the cancels of a run that ended.
        mutating func add(_ outcome: ChildProcess.Outcome) {
            if outcome.signalled {
                let trap = outcome.errors.split(separator: "\n").first { $0.contains("Fatal error") }
                crashes.append(trap.map(String.init) ?? "signal \(outcome.status)")
            } else if outcome.timedOut || outcome.status != 0 {
                problems.append("status \(outcome.status), timed out \(outcome.timedOut): \(outcome.output.suffix(500))")
            } else {
                let field = outcome.output.split(separator: " ").first { $0.hasPrefix("cancels=") }
                cancels += field.flatMap { Int($0.dropFirst("cancels=".count)) } ?? 0
            }
        }
    }

    func testCancellingRedirectedLoadsDoesNotCrash() throws {
        try compare("redirects", runs: 2)
    }

    /// Without the layer corelibs asks the delegate and traps in every run; through it the
    /// protocol asks (`AppTaskRedirects`).
    func testCancellingLoadsRedirectedByTheirDelegateDoesNotCrash() throws {
        try compare("delegate-redirects", runs: 1)
    }

    func testCancellingLoadsThatEndAtOnceDoesNotCrash() throws {
        try compare("plain", runs: 3)
    }

    /// Runs the pattern `runs` times per side; the side with the layer must end every run.
    private func compare(_ pattern: String, runs defaultRuns: Int) throws {
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["CACHINGPROTOCOL_CANCEL_RACE_SECONDS"].flatMap(Int.init) ?? 2
        let runs = environment["CACHINGPROTOCOL_CANCEL_RACE_RUNS"].flatMap(Int.init) ?? defaultRuns
        var sides: [Bool: Runs] = [false: Runs(), true: Runs()]
        for _ in 0..<runs {
            for withLayer in [false, true] {
                sides[withLayer]!.add(try run(pattern, withLayer: withLayer, seconds: seconds))
            }
        }
        let without = sides[false]!, with = sides[true]!
        print("cancel race, \(pattern), \(runs) runs of \(seconds) s per side: without the layer crashed \(without.crashes.count) "
              + "(\(without.cancels) cancels in the others) \(without.crashes), with it crashed \(with.crashes.count) "
              + "(\(with.cancels) cancels in the others) \(with.crashes)")
        XCTAssertEqual(with.crashes, [], "\(pattern): runs with the layer that crashed")
        XCTAssertEqual(with.problems, [], "\(pattern): runs with the layer that did not end cleanly")
        XCTAssertGreaterThan(with.cancels, 0, "\(pattern): the runs with the layer cancelled loads")
    }

    /// One `cancel-race` process, killed if it outlasts its time by far.
    private func run(_ pattern: String, withLayer: Bool, seconds: Int) throws -> ChildProcess.Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CancelRaceTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        return try ChildProcess.run(try CacheTestToolRunner.executable(),
                                    ["cancel-race", pattern, withLayer ? "with" : "without", "\(seconds)", directory.path],
                                    timeout: TimeInterval(seconds + 60))
    }
}
#endif
