import Foundation
import XCTest
#if os(macOS) || os(Linux)
@testable import CacheBenchmarks

/// `Demo bench` with tiny iteration counts: it runs, and its JSON has the promised shape. The
/// numbers are not checked — performance is measured in release builds, not asserted in tests.
final class BenchmarkSmokeTests: LoaderRulesTestCase {
    func testQuickRunProducesEveryResultWithItsReference() throws {
        let suite = BenchmarkSuite(scale: .quick) { _ in }
        let results = try suite.run(only: ["latency", "storage", "scaling", "mixed"])
        let names = Set(results.map(\.name))
        for expected in ["floor protocol 1 KB", "memory hit 1 KB", "disk hit 100 KB", "store: CachingURLCache",
                         "lookup: Foundation URLCache", "lookup at 100 entries", "hit at 10 entries",
                         "mixed load, 64 in flight over 8 sessions, 10 ms away", "mixed load, 64 in flight over 8 sessions, 50 ms away"] {
            XCTAssertTrue(names.contains(expected), "missing \(expected) in \(names.sorted())")
        }
        let memoryHit = try XCTUnwrap(results.first { $0.name == "memory hit 1 KB" })
        XCTAssertEqual(memoryHit.target, "≤ 1.10 × floor")
        XCTAssertNotNil(memoryHit.ratio)
        XCTAssertTrue(results.allSatisfy { $0.medianMicroseconds.isFinite && $0.medianMicroseconds > 0 })
        for mixed in results where mixed.name.hasPrefix("mixed load") {
            XCTAssertTrue(mixed.note?.contains("; the cache on ") == true, mixed.note ?? "no note")
        }

        let json = try JSONSerialization.jsonObject(with: Data(BenchmarkCommand.jsonReport(results).utf8)) as? [String: Any]
        let entries = try XCTUnwrap(json?["results"] as? [[String: Any]])
        XCTAssertEqual(entries.count, results.count)
        for entry in entries {
            XCTAssertNotNil(entry["name"] as? String)
            XCTAssertNotNil(entry["median_us"])
            XCTAssertNotNil(entry["p99_us"])
        }
        XCTAssertTrue(entries.contains { $0["ratio"] != nil && $0["target"] != nil })
    }

    func testBadOptionsAreRefused() {
        XCTAssertEqual(BenchmarkCommand.run(["--only", "nonsense"]), 64)
        XCTAssertEqual(BenchmarkCommand.run(["--sizes", "0"]), 64)
        XCTAssertEqual(BenchmarkCommand.run(["--frobnicate"]), 64)
        XCTAssertEqual(BenchmarkCommand.run(["--huge-side", "sideways", "--bytes", "1"]), 64)
    }
}
#else
final class BenchmarkSmokeTests: LoaderRulesTestCase {
    func testBench() throws {
        throw XCTSkip("Demo bench (CacheBenchmarks) starts nginx and child processes, and is built on macOS and Linux only")
    }
}
#endif
