import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import XCTest
@testable import CachingProtocol

#if os(macOS) || os(Linux)
/// A cache opened by a process that may list its directory but read none of its files: the
/// stand-in on Linux for an app launched in the background while the device is locked (Data
/// Protection then answers `EPERM`/`EACCES` for every protected file). The tests run as root,
/// which ignores permission bits, so the reading process is a `CacheTestTool` that gives up root
/// first. Store-level tests inject the same errors at the file-I/O seam
/// (`Storage/UnreadableFilesTests`).
final class DataProtectionTests: LoaderRulesTestCase {
    private var directory: URL!
    /// `nobody`: any user other than the files' owner will do.
    private let otherUser = "65534"

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocolLocked-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
        try super.tearDownWithError()
    }

    /// Every file under the cache directory with its bytes.
    private func contents() throws -> [String: Data] {
        var files: [String: Data] = [:]
        for path in CacheFiles.all(in: directory) {
            files[path] = try Data(contentsOf: URL(fileURLWithPath: path))
        }
        return files
    }

    private func field(_ name: String, in summary: String) -> Int? {
        summary.split(separator: " ").first { $0.hasPrefix(name + "=") }.flatMap { Int($0.dropFirst(name.count + 1)) }
    }

    func testACacheWhoseFilesCannotBeReadIsUnavailableNotCorruptAndIsServedAgainLater() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root, to run the reader as another user") }
        // Given a cache of 200 entries on disk, whose directories the reader owns (it may list,
        // create and delete files there, as an app may in its container while the device is
        // locked) but whose files (entries, index, journal: 0600, root's) it may not read
        let keys = 200
        let filled = try CacheTestToolRunner.run(["fill", directory.path, "\(keys)"])
        XCTAssertEqual(filled.status, 0, filled.output + filled.errors)
        XCTAssertTrue(filled.output.contains("entries=\(keys)"), filled.output)
        let reader = try XCTUnwrap(UInt32(otherUser))
        for path in [directory.path, directory.appendingPathComponent("entries").path] {
            XCTAssertEqual(chown(path, reader, reader), 0)
        }
        let before = try contents()
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, keys)

        // When a process that may not read them opens the cache and looks every entry up
        let locked = try CacheTestToolRunner.run(["read-all-as", otherUser, directory.path, "\(keys)"])
        let lockedSummary = try XCTUnwrap(locked.output.split(separator: "\n").last { $0.hasPrefix("read-all ") }.map(String.init),
                                          locked.output + locked.errors)

        // Then every lookup was a miss counted as unavailable, none as corrupt
        XCTAssertEqual(locked.status, 0, lockedSummary)
        XCTAssertEqual(field("found", in: lockedSummary), 0, lockedSummary)
        XCTAssertEqual(field("corrupt", in: lockedSummary), 0, lockedSummary)
        XCTAssertGreaterThanOrEqual(field("unavailable", in: lockedSummary) ?? 0, keys + 1, "every entry and the index: \(lockedSummary)")
        // And not one file was deleted, changed or replaced: entries, index and journal as they were
        XCTAssertEqual(try contents(), before)

        // And once the files can be read (the device unlocked), every entry is served again
        let unlocked = try CacheTestToolRunner.run(["read-all", directory.path, "\(keys)"])
        let unlockedSummary = try XCTUnwrap(unlocked.output.split(separator: "\n").last { $0.hasPrefix("read-all ") }.map(String.init),
                                            unlocked.output + unlocked.errors)
        XCTAssertEqual(unlocked.status, 0, unlockedSummary)
        XCTAssertEqual(field("found", in: unlockedSummary), keys, unlockedSummary)
        XCTAssertEqual(field("entries", in: unlockedSummary), keys, unlockedSummary)
        XCTAssertEqual(field("unavailable", in: unlockedSummary), 0, unlockedSummary)
    }
}
#else
final class DataProtectionTests: LoaderRulesTestCase {
    func testACacheWhoseFilesCannotBeReadIsUnavailableNotCorruptAndIsServedAgainLater() throws {
        // The reader is a CacheTestTool process that gives up root; on the device, Data
        // Protection itself is the reader's obstacle (UnreadableFilesTests injects it).
        throw XCTSkip("this test runs a CacheTestTool process, and this platform cannot start processes")
    }
}
#endif
