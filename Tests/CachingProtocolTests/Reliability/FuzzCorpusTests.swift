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

        let process = Process()
        process.executableURL = try HelperTool.url("Fuzz")
        process.arguments = [corpus.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, text)
        XCTAssertTrue(text.contains("replayed \(files.count) inputs"), text)
    }
    #else
    func testCommittedCorpusReplaysCleanly() throws {
        throw XCTSkip("the corpus replay runs the Fuzz executable, a separate process, and this platform cannot start one")
    }
    #endif
}
