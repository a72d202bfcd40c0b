import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import XCTest
@testable import CachingProtocol

#if os(macOS) || os(Linux)
/// Several processes on one cache directory, and a process killed with SIGKILL in the middle
/// of its writes. The processes are `CacheTestTool` runs that store self-verifying bodies
/// (each names its URL, writer and version, and every byte follows from them) through
/// `CachingURLCache`'s URLCache API, so any torn, mixed or misplaced entry is caught.
final class MultiProcessTests: LoaderRulesTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocolShared-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
        try super.tearDownWithError()
    }

    /// The entry file of test key `index` (the tool's `itemURL`).
    private func entryFile(_ index: Int) -> URL {
        let url = URL(string: "http://cache-test.invalid/item/\(index)?q=\(index % 7)")!
        return directory.appendingPathComponent("entries/" + StableHash.hexDigest128(CacheKey.make(method: "GET", url: url)))
    }

    private func temporaryFiles() -> [String] {
        CacheFiles.entryNames(in: directory).filter { $0.hasPrefix(".tmp-") }
            + ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasPrefix(".tmp-") }
    }

    /// Waits for `tool`'s output to end and for it to exit, and returns its exit status (-1
    /// when it did not exit in time).
    private func finish(_ tool: RunningTool, timeout: TimeInterval = 120) -> Int32 {
        wait(for: [tool.ended, tool.exited], timeout: timeout)
        return tool.process.isRunning ? -1 : tool.process.terminationStatus
    }

    /// A crash at a known point of a write: the process limits its files to 64 KiB
    /// (`RLIMIT_FSIZE`) and replaces a stored entry with a 200 KB one, so the kernel kills it with
    /// `SIGXFSZ` at the 64 KiB-th byte of that write, every time. The entry it was replacing is
    /// left whole at its path and served after a restart; a write made in place would have cut
    /// the entry's own file at 64 KiB.
    func testAWriteKilledPartWayLeavesTheEntryItReplacedWhole() throws {
        let tool = try RunningTool(["write-past-limit", directory.path])
        XCTAssertEqual(finish(tool), SIGXFSZ, "killed by the file-size limit: \(tool.lines) \(tool.errorOutput)")
        XCTAssertEqual(tool.process.terminationReason, .uncaughtSignal)
        XCTAssertEqual(tool.lines, ["stored first"], "the second write never finished")
        let first = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })  // the tool's `limitBody(0)`

        // The entry's own file is the first entry, whole; the dead write's bytes are elsewhere.
        let onDisk = try Data(contentsOf: entryFile(0))
        XCTAssertLessThan(onDisk.count, 64 << 10, "the entry file holds the first entry, not 64 KiB of the second")
        XCTAssertNotNil(onDisk.range(of: first), "the first body is in the entry's file")

        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 256 << 20, directory: directory)
        reopened.waitUntilSettled()
        let url = URL(string: "http://cache-test.invalid/item/0?q=0")!
        XCTAssertEqual(reopened.cachedResponse(for: URLRequest(url: url))?.data, first, "a restart serves the entry the write replaced")
        XCTAssertEqual(reopened.statistics.corruptEntriesRemoved, 0)
        XCTAssertEqual(temporaryFiles(), [], "the dead process's temporary file is removed")
    }

    func testWriterKilledMidWriteLeavesNoTornEntry() throws {
        let keys = 200
        var killedPID: Int32 = 0
        for round in 0..<3 {
            // Given a process storing entries as fast as it can
            let writer = try RunningTool(["write-loop", directory.path, "\(keys)", "writer\(round)"])
            let progressed = writer.expectLine("300 entries stored and settled") { line in
                line.hasPrefix("settled stored=") && (Int(line.dropFirst("settled stored=".count)) ?? 0) >= 300
            }
            wait(for: [progressed], timeout: 60)
            // When it is killed with SIGKILL while it keeps writing
            writer.send(signal: SIGKILL)
            wait(for: [writer.exited], timeout: 10)
            XCTAssertEqual(writer.process.terminationReason, .uncaughtSignal, writer.errorOutput)
            XCTAssertEqual(writer.process.terminationStatus, SIGKILL)
            killedPID = writer.process.processIdentifier
        }
        // And, to be sure a torn file is met, two entry files are cut short as a non-atomic write
        // would have left them, and a half-written temporary file of the dead process is left behind
        for index in [0, 1] {
            let whole = try Data(contentsOf: entryFile(index))
            try whole.prefix(whole.count / 2).write(to: entryFile(index))
        }
        try Data(repeating: 0x41, count: 5000)
            .write(to: directory.appendingPathComponent("entries/.tmp-\(killedPID)-deadbeef"))

        // Then a restarted reader finds every entry whole or missing, never wrong
        let reader = try RunningTool(["read-all", directory.path, "\(keys)"])
        let status = finish(reader)
        let output = reader.lines
        XCTAssertEqual(status, 0, output.filter { $0.hasPrefix("bad") }.joined(separator: "\n") + reader.errorOutput)
        let summary = try XCTUnwrap(output.last { $0.hasPrefix("read-all ") }, "\(output)")
        XCTAssertTrue(summary.contains(" bad=0 "), summary)
        // And the cut files were misses, counted as corrupt and deleted, not served
        XCTAssertTrue(output.contains("missing key=0"), summary)
        XCTAssertTrue(output.contains("missing key=1"), summary)
        let corrupt = Int(summary.split(separator: " ").first { $0.hasPrefix("corrupt=") }?.dropFirst("corrupt=".count) ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(corrupt, 2, summary)
        let found = Int(summary.split(separator: " ").first { $0.hasPrefix("found=") }?.dropFirst("found=".count) ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(found, keys - 10, "what had settled before the kills survived: \(summary)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryFile(0).path))
        // And no temporary file of a dead writer is left
        XCTAssertEqual(temporaryFiles(), [])
    }

    func testTwoProcessesSharingADirectoryNeverReadAWrongEntry() throws {
        // Given two processes that store, read, remove and reopen at random on the same small
        // cache directory (each evicting what the other wrote)
        let first = try RunningTool(["hammer", directory.path, "64", "3000", "first"])
        let second = try RunningTool(["hammer", directory.path, "64", "3000", "second"])
        // When both have run
        let statuses = [finish(first), finish(second)]
        // Then neither ever read a wrong entry, and both read the other's entries
        for (tool, status) in zip([first, second], statuses) {
            let summary = tool.lines.last { $0.hasPrefix("hammer ") } ?? "no summary: \(tool.lines) \(tool.errorOutput)"
            XCTAssertEqual(status, 0, tool.lines.filter { $0.hasPrefix("bad") }.joined(separator: "\n") + summary)
            XCTAssertTrue(summary.contains(" bad=0 "), summary)
            XCTAssertFalse(summary.contains(" hits=0 "), summary)
        }
        // And a third process finds the directory consistent: every entry whole or missing
        let reader = try RunningTool(["read-all", directory.path, "64"])
        XCTAssertEqual(finish(reader), 0, reader.lines.joined(separator: "\n"))
        XCTAssertTrue(reader.lines.last?.contains(" bad=0 ") == true, "\(reader.lines)")
    }

    func testReaderKeepsReadingWholeEntriesWhileAnotherWriterIsKilled() throws {
        // Given one process hammering the directory and another writing the same keys
        let survivor = try RunningTool(["hammer", directory.path, "64", "4000", "survivor"])
        let victim = try RunningTool(["write-loop", directory.path, "64", "victim"])
        let progressed = victim.expectLine("the victim wrote") { $0.hasPrefix("settled stored=") }
        wait(for: [progressed], timeout: 60)
        // When the writer is killed mid-write
        victim.send(signal: SIGKILL)
        wait(for: [victim.exited], timeout: 10)
        XCTAssertEqual(victim.process.terminationReason, .uncaughtSignal)
        // Then the other process never read a wrong entry
        XCTAssertEqual(finish(survivor), 0, survivor.lines.filter { $0.hasPrefix("bad") }.joined(separator: "\n"))
        XCTAssertTrue(survivor.lines.last?.contains(" bad=0 ") == true, "\(survivor.lines)")
        let reader = try RunningTool(["read-all", directory.path, "64"])
        XCTAssertEqual(finish(reader), 0, reader.lines.joined(separator: "\n"))
    }
}
#else
final class MultiProcessTests: LoaderRulesTestCase {
    func testSeveralProcessesOnOneDirectory() throws {
        throw XCTSkip("these tests run CacheTestTool processes and kill them, and this platform cannot start processes")
    }
}
#endif
