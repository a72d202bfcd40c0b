import Foundation
import XCTest

/// Replays the committed fuzz corpus (Fuzz/corpus: the seeds and every input a fuzzing run
/// found a problem with) through the fuzz targets in an ordinary build, so a fixed finding
/// stays fixed without libFuzzer. Scripts/fuzz.sh does the fuzzing itself. The replay runs the
/// `Fuzz` executable, a process: macOS and Linux only.
final class FuzzCorpusTests: LoaderRulesTestCase {
    #if os(macOS) || os(Linux)
    func testCommittedCorpusReplaysCleanly() throws {
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let corpus = packageRoot.appendingPathComponent("Fuzz/corpus")
        let files = try FileManager.default.subpathsOfDirectory(atPath: corpus.path).filter { !$0.hasSuffix("http") && !$0.hasSuffix("storage") }
        XCTAssertGreaterThanOrEqual(files.count, 20, "the seed corpus is there")

        let replay = try ChildProcess.run(try HelperTool.url("Fuzz"), [corpus.path], timeout: 300)
        let text = replay.output + replay.errors
        XCTAssertFalse(replay.timedOut, text)
        XCTAssertEqual(replay.status, 0, text)
        XCTAssertTrue(text.contains("replayed \(files.count) inputs"), text)
    }
    #else
    func testCommittedCorpusReplaysCleanly() throws {
        throw XCTSkip("the corpus replay runs the Fuzz executable, a separate process, and this platform cannot start one")
    }
    #endif
}
