import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import XCTest
@testable import CachingProtocol

// Helpers shared by the storage, integration and reliability tests that look at the file
// system or run other processes.

/// What the reliability tests look at on disk: the files of a cache directory, their modes,
/// and whether any of them holds some bytes.
enum CacheFiles {
    /// Every regular file under `directory`, as absolute paths, sorted.
    static func all(in directory: URL) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory.path) else { return [] }
        var files: [String] = []
        for case let relative as String in enumerator {
            let path = directory.path + "/" + relative
            if (try? FileIO.status(path))?.isRegularFile == true { files.append(path) }
        }
        return files.sorted()
    }

    /// The sum of the sizes of every regular file under `directory`: the directory's real size,
    /// which a disk tier's capacity bounds.
    static func totalSize(in directory: URL) -> Int {
        all(in: directory).reduce(0) { total, path in
            let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber
            return total + (size?.intValue ?? 0)
        }
    }

    /// The names in `<directory>/entries`, sorted (empty when it does not exist).
    static func entryNames(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("entries").path)) ?? []).sorted()
    }

    /// The files under `directory` whose contents include `needle`.
    static func files(in directory: URL, containing needle: Data) -> [String] {
        all(in: directory).filter { path in
            guard let contents = FileManager.default.contents(atPath: path) else { return false }
            return contents.range(of: needle) != nil
        }
    }

    /// The permission bits of `path` (`st_mode & 0o777`).
    static func mode(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_mode & 0o777)
    }
}

/// Mounts for the disk-fault tests (storage and reliability): tmpfs file systems and read-only
/// bind mounts, undone by `unmountAll()`. Mounting needs root; callers skip when it is refused.
final class Mounts {
    private(set) var points: [String] = []

    /// Mounts a tmpfs with `options` at `path` (created if needed); throws XCTSkip when refused.
    func tmpfs(at path: String, options: String) throws {
        try Self.requireProcesses()
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let status = Self.run("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", path])
        guard status == 0 else {
            throw XCTSkip("mounting a tmpfs is not permitted here (mount exited with \(status)); run as root")
        }
        points.append(path)
    }

    /// Makes `path` read-only with a read-only bind mount over itself; throws XCTSkip when refused.
    func bindReadOnly(_ path: String) throws {
        try Self.requireProcesses()
        guard Self.run("/bin/mount", ["--bind", path, path]) == 0 else {
            throw XCTSkip("bind mounts are not permitted here; run as root")
        }
        points.append(path)
        guard Self.run("/bin/mount", ["-o", "remount,ro,bind", path]) == 0 else {
            throw XCTSkip("cannot remount a bind mount read-only here")
        }
    }

    /// Makes a read-only bind mount at `path` writable again.
    func remountWritable(_ path: String) -> Bool {
        Self.run("/bin/mount", ["-o", "remount,rw,bind", path]) == 0
    }

    func unmountAll() {
        for point in points.reversed() { _ = Self.run("/bin/umount", ["-l", point]) }
        points = []
    }

    /// Mounting runs mount(8), a process: where there are none (iOS, tvOS), callers skip.
    private static func requireProcesses() throws {
        #if !(os(macOS) || os(Linux))
        throw XCTSkip("mount(8) is a separate process, and this platform cannot start one")
        #endif
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) -> Int32 {
        #if os(macOS) || os(Linux)
        return (try? ChildProcess.run(URL(fileURLWithPath: executable), arguments, timeout: 60).status) ?? -1
        #else
        return -1   // no processes here (see requireProcesses)
        #endif
    }
}

#if os(macOS) || os(Linux)
/// Where the package's helper executables (`CacheTestTool`, `Fuzz`) are: SwiftPM builds them
/// into the directory that holds the test product. On Linux the tests run as that product, an
/// executable (`argv[0]`); on macOS `swift test` and Xcode load the test bundle
/// (`….xctest`) into `xctest`, whose `argv[0]` is `xctest` itself, so the bundle is found from
/// a class it contains. Both places are tried, the bundle's first.
enum HelperTool {
    private final class InTheTestBundle {}

    /// The directories searched, in order.
    static var searchDirectories: [URL] {
        var directories: [URL] = []
        let bundle = Bundle(for: InTheTestBundle.self).bundleURL
        if bundle.pathExtension == "xctest" { directories.append(bundle.deletingLastPathComponent()) }
        if let first = ProcessInfo.processInfo.arguments.first {
            let beside = URL(fileURLWithPath: first).deletingLastPathComponent()
            if !directories.contains(where: { $0.standardizedFileURL == beside.standardizedFileURL }) { directories.append(beside) }
        }
        return directories
    }

    /// The executable `name`; throws (failing the test, not skipping it) when it is in none of
    /// ``searchDirectories``: on macOS and Linux it is built with the tests and must be there.
    static func url(_ name: String) throws -> URL {
        let candidates = searchDirectories.map { $0.appendingPathComponent(name) }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw HelperToolMissing(name: name, searched: candidates.map(\.path))
        }
        return found
    }
}

/// A helper executable was not where the test product is (see ``HelperTool``).
struct HelperToolMissing: Error, CustomStringConvertible {
    let name: String
    let searched: [String]
    var description: String { "\(name) was not found (looked for \(searched.joined(separator: ", "))); build it with the tests" }
}

/// A process run to its end within a time limit: a test waits for it with a timeout, never
/// without one, so a process that hangs fails the test instead of hanging the suite.
enum ChildProcess {
    /// What the process printed and how it ended.
    struct Outcome {
        var output: String
        var errors: String
        /// The exit status, or the signal that ended it (`signalled`); -1 if it never ended.
        var status: Int32
        var signalled: Bool
        /// Whether it outlasted its time and was killed (SIGKILL).
        var timedOut: Bool
    }

    /// Runs `executable` with `arguments`, reading both of its outputs, for at most `timeout`
    /// seconds; kills it then.
    static func run(_ executable: URL, _ arguments: [String], timeout: TimeInterval) throws -> Outcome {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let exited = XCTestExpectation(description: "\(executable.lastPathComponent) exited")
        process.terminationHandler = { _ in exited.fulfill() }
        // Both pipes are read at once so that neither fills up and blocks the process.
        let read = Locked((output: Data(), errors: Data()))
        let readers = DispatchGroup()
        for (pipe, isOutput) in [(output, true), (errors, false)] {
            readers.enter()
            DispatchQueue.global().async {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                read.withLock { if isOutput { $0.output = data } else { $0.errors = data } }
                readers.leave()
            }
        }
        try process.run()
        let timedOut = XCTWaiter().wait(for: [exited], timeout: timeout) != .completed
        if timedOut {
            kill(process.processIdentifier, SIGKILL)
            _ = XCTWaiter().wait(for: [exited], timeout: 10)
        }
        // A child of the process may still hold the pipes open: do not wait for it for long.
        _ = readers.wait(timeout: .now() + 5)
        let (out, err) = read.withLock { ($0.output, $0.errors) }
        let ended = !process.isRunning
        return Outcome(output: String(decoding: out, as: UTF8.self), errors: String(decoding: err, as: UTF8.self),
                       status: ended ? process.terminationStatus : -1,
                       signalled: ended && process.terminationReason == .uncaughtSignal, timedOut: timedOut)
    }
}

/// The `CacheTestTool` executable built next to the test bundle, for tests that need a process
/// of their own (registration against `URLSession.shared`, several processes on one directory).
enum CacheTestToolRunner {
    static func executable() throws -> URL { try HelperTool.url("CacheTestTool") }

    /// Runs the tool to completion (killed after `timeout` seconds) and returns its output and
    /// exit status (-1 if it had to be killed).
    static func run(_ arguments: [String], timeout: TimeInterval = 120) throws -> (output: String, errors: String, status: Int32) {
        let outcome = try ChildProcess.run(try executable(), arguments, timeout: timeout)
        return (outcome.output, outcome.errors, outcome.timedOut ? -1 : outcome.status)
    }
}

/// A tool process whose standard output is read line by line while it runs, so a test can
/// wait for a line (with an expectation, not a sleep) and then act, for example kill it.
final class RunningTool: @unchecked Sendable {
    // @unchecked: `lines` and `waiters` are only touched under `state`'s lock; `process` is
    // only used from the test's thread.
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private struct State {
        var lines: [String] = []
        var partial = Data()
        var errorText = Data()
        var waiters: [(predicate: (String) -> Bool, expectation: XCTestExpectation)] = []
        var finished = false
    }
    private let state = Locked(State())
    let ended = XCTestExpectation(description: "tool output ended")
    /// Fulfilled once the tool exited (wait for it with a timeout, never `waitUntilExit()`).
    let exited = XCTestExpectation(description: "tool exited")

    init(_ arguments: [String]) throws {
        process.executableURL = try CacheTestToolRunner.executable()
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = errors
        process.terminationHandler = { [exited] _ in exited.fulfill() }
        try process.run()
        let readThread = Thread { [self] in readLines() }
        readThread.start()
        let errorThread = Thread { [self] in
            let data = errors.fileHandleForReading.readDataToEndOfFile()
            state.withLock { $0.errorText = data }
        }
        errorThread.start()
    }

    private func readLines() {
        let handle = output.fileHandleForReading
        while true {
            let chunk = handle.availableData
            let fulfilled = state.withLock { state -> [XCTestExpectation] in
                if chunk.isEmpty {
                    state.finished = true
                    if !state.partial.isEmpty {
                        state.lines.append(String(decoding: state.partial, as: UTF8.self))
                        state.partial = Data()
                    }
                } else {
                    state.partial.append(chunk)
                    while let newline = state.partial.firstIndex(of: 10) {
                        state.lines.append(String(decoding: state.partial[state.partial.startIndex..<newline], as: UTF8.self))
                        state.partial = Data(state.partial[(newline + 1)...])
                    }
                }
                var done: [XCTestExpectation] = []
                state.waiters.removeAll { waiter in
                    guard state.lines.contains(where: waiter.predicate) else { return false }
                    done.append(waiter.expectation)
                    return true
                }
                return done
            }
            fulfilled.forEach { $0.fulfill() }
            if chunk.isEmpty {
                ended.fulfill()
                return
            }
        }
    }

    /// An expectation fulfilled once an output line satisfies `predicate`.
    func expectLine(_ description: String, where predicate: @escaping (String) -> Bool) -> XCTestExpectation {
        let expectation = XCTestExpectation(description: description)
        let already = state.withLock { state -> Bool in
            if state.lines.contains(where: predicate) { return true }
            state.waiters.append((predicate, expectation))
            return false
        }
        if already { expectation.fulfill() }
        return expectation
    }

    var lines: [String] { state.withLock { $0.lines } }
    var errorOutput: String { state.withLock { String(decoding: $0.errorText, as: UTF8.self) } }

    /// Sends `signal` (e.g. `SIGKILL`) to the tool.
    func send(signal: Int32) {
        _ = kill(process.processIdentifier, signal)
    }
}
#endif
