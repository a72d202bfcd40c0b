import Foundation
import XCTest
@testable import CachingProtocol

#if os(macOS) || os(Linux)
/// The project's own stress test: the same seeded workload (`CacheTestTool stress`, see
/// `StressWorkload`, `StressOrigin` and `StressChecker` there) run without the layer and then
/// with it, each in a process of its own so that a trap in Foundation fails the test instead of
/// ending the suite. Many sessions load at once from an origin whose answers change every few
/// requests and that breaks about one response in twenty; the app cancels loads and, through the
/// layer, manages the cache meanwhile.
///
/// What must hold: no wrong answer (a success whose body is not one the origin sent for that URL
/// and user, is cut, comes with another response's `ETag`, or a reload answered from before it
/// started) and no load that never ends, in either run; no crash; no error kind with the layer
/// that the run without it did not have (offline mode's error and the cache's documented `504`
/// aside); and
/// descriptors open at the peak and after the run (sessions invalidated, the origin stopped)
/// within `allowedExtraDescriptors` of the run without the layer: a descriptor lost per load or
/// per exchange would be hundreds.
/// Each run is time-boxed: a run that does not end in time fails the test.
///
/// `CACHINGPROTOCOL_STRESS_SEED` replays a seed (printed by every run and in every failure), and
/// `CACHINGPROTOCOL_STRESS_SECONDS` sets how long each run loads (10 by default).
final class StressTests: LoaderRulesTestCase {
    /// One run of the tool, as its report says.
    struct Run {
        var output: String
        var errors: String
        var exitStatus: Int32
        var crashed: Bool
        var ended: Bool

        private var lines: [Substring] { output.split(separator: "\n") }

        var wrong: [String] { lines.filter { $0.hasPrefix("wrong ") || $0.hasPrefix("hung") }.map(String.init) }

        /// Error kinds and how often each came.
        var errorKinds: [String: Int] {
            var kinds: [String: Int] = [:]
            for line in lines where line.hasPrefix("error-kind ") {
                let fields = line.dropFirst("error-kind ".count).split(separator: " ", maxSplits: 1)
                if fields.count == 2, let count = Int(fields[0]) { kinds[String(fields[1])] = count }
            }
            return kinds
        }

        /// A number from the report: `field("fds", "end")` reads `end=` on the `fds` line.
        func field(_ line: String, _ name: String) -> Int? {
            guard let found = lines.first(where: { $0.hasPrefix(line + " ") }) else { return nil }
            for word in found.split(separator: " ") where word.hasPrefix(name + "=") {
                return Int(word.dropFirst(name.count + 1))
            }
            return nil
        }

        /// What went wrong with the process itself, if anything: a crash (with the trap's
        /// message), a run that did not end in time, or an exit other than 0 or 1.
        var processProblem: String? {
            let trap = errors.split(separator: "\n").first { $0.contains("Fatal error") || $0.contains("Program crashed") }
            if !ended { return "did not end within its time box (killed): \(output.suffix(2_000))" }
            if crashed { return "crashed: \(trap.map(String.init) ?? String(errors.prefix(2_000)))" }
            if exitStatus != 0 && exitStatus != 1 { return "exited with \(exitStatus): \(output.suffix(2_000)) \(errors.prefix(2_000))" }
            return nil
        }
    }

    /// How many more descriptors the run with the layer may hold than the one without:
    /// - 32 for what the runs hold in connection pools, which differs by a few connections from
    ///   run to run (each counts twice, as the origin's end is in the process too);
    /// - 2 for each upstream session the layer makes (`URLSessionUpstream`): each `URLSession`
    ///   on Linux has a libcurl multi handle, and libcurl 7.88's keeps a socket pair to wake
    ///   itself. The workload's seven app sessions get one each, and its two sessions with a
    ///   delegate a second one each, for the redirects their delegate gives back, which go
    ///   upstream without the jar's cookies (`SessionSettings.forRequestsAsGiven`): 9, so 18
    ///   (Docs/reliability.md, measured).
    /// The app's sessions stay alive to the end (invalidated, not freed), so their upstream
    /// sessions are still there after the run.
    static let allowedExtraDescriptors = 32 + 2 * (7 + 2)

    func testManySessionsOnAFlakyOriginGetOnlyAnswersTheOriginSentAndNoErrorsOfTheLayersOwn() throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["CACHINGPROTOCOL_STRESS_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let seconds = environment["CACHINGPROTOCOL_STRESS_SECONDS"].flatMap(Int.init) ?? 10
        let replay = "seed \(seed): replay with CACHINGPROTOCOL_STRESS_SEED=\(seed) swift test --filter StressTests"
        print("stress test, \(replay)")

        let without = try run(withLayer: false, seed: seed, seconds: seconds)
        let with = try run(withLayer: true, seed: seed, seconds: seconds)
        print("stress test without the layer:\n\(Self.summary(without))\nwith it:\n\(Self.summary(with))")

        XCTAssertNil(without.processProblem, "without the layer: \(replay)")
        XCTAssertNil(with.processProblem, "with the layer: \(replay)")
        XCTAssertEqual(without.wrong, [], "without the layer, the origin's record or the checker is wrong: \(replay)")
        XCTAssertEqual(with.wrong, [], "wrong answers or loads that never ended with the layer: \(replay)")

        // The app asked for offline mode's errors; the cache's 504 is the policy's documented
        // answer where the run without the layer gets the origin's error (`StressChecker`).
        let expected = Set(without.errorKinds.keys)
            .union(["resourceUnavailable in offline mode", "the cache's 504 for a response it could not validate"])
        let added = with.errorKinds.filter { !expected.contains($0.key) }
        XCTAssertEqual(added, [:], "error kinds with the layer that the run without it did not have "
                       + "(without: \(without.errorKinds)): \(replay)")

        if with.processProblem == nil && without.processProblem == nil {
            for moment in ["peak", "end"] {
                let counts = (with.field("fds", moment), without.field("fds", moment))
                XCTAssertLessThanOrEqual(counts.0 ?? .max, (counts.1 ?? 0) + Self.allowedExtraDescriptors, "descriptors open (\(moment)), with the layer and without: \(replay)")
            }
        }
        if with.processProblem == nil {
            XCTAssertGreaterThan(with.field("layer", "hits") ?? 0, 0, "the layer answered from the cache: \(replay)")
        }
    }

    /// Runs `CacheTestTool stress` for `seconds` of loads and waits for it: for its own watchdog
    /// (which ends it 30 s after the loads) and 30 s more at most; then it is killed.
    private func run(withLayer: Bool, seed: UInt64, seconds: Int) throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("StressTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let arguments = ["stress", withLayer ? "with" : "without", "\(seed)", "\(seconds)", directory.appendingPathComponent("cache").path]
        let outcome = try ChildProcess.run(try CacheTestToolRunner.executable(), arguments, timeout: TimeInterval(seconds + 60))
        return Run(output: outcome.output, errors: outcome.errors, exitStatus: outcome.status, crashed: outcome.signalled,
                   ended: !outcome.timedOut)
    }

    private static func summary(_ run: Run) -> String {
        let lines = run.output.split(separator: "\n").filter { !$0.hasPrefix("wrong ") }
        return (lines.prefix(30).map(String.init) + [run.processProblem ?? "the process ended normally"]).joined(separator: "\n")
    }
}
#endif
