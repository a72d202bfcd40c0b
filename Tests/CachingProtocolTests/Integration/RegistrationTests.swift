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
final class RegistrationTests: XCTestCase {
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

    func testRegisteringBeforeTheSharedSessionExistsCaches() throws {
        let run = try CacheTestToolRunner.run(["register", "early", directory.path, origin.url("/shared").absoluteString])
        XCTAssertEqual(run.status, 0, run.errors)
        XCTAssertTrue(run.output.contains("registration=active"), run.output)
        XCTAssertTrue(run.output.contains("cache-status=CachingProtocol; hit"), run.output)
        XCTAssertEqual(origin.requestCount(path: "/shared"), 1, "the second GET was a hit")
    }

    /// corelibs' shared session copies the registered classes when it is created; created before
    /// any other session, its list is empty and it consults the registered classes at each task,
    /// where `register()` puts the protocol ahead of Foundation's own.
    func testSharedSessionCreatedFirstStillCaches() throws {
        let run = try CacheTestToolRunner.run(["register", "shared-first", directory.path, origin.url("/shared").absoluteString])
        XCTAssertEqual(run.status, 0, run.errors)
        XCTAssertTrue(run.output.contains("registration=active"), run.output)
        XCTAssertEqual(origin.requestCount(path: "/shared"), 1)
    }

    /// Another session and then the shared session existed before `register()`: on Linux the
    /// shared session has Foundation's HTTP protocol first in its own list and never asks ours.
    func testRegisteringTooLateIsReportedNotSilent() throws {
        let run = try CacheTestToolRunner.run(["register", "late", directory.path, origin.url("/shared").absoluteString])
        XCTAssertEqual(run.status, 0, run.errors)
        #if canImport(FoundationNetworking)
        XCTAssertTrue(run.output.contains("registration=registeredTooLate"), run.output)
        XCTAssertTrue(run.errors.contains("existed before CachingURLProtocol.register()"), run.errors)
        XCTAssertEqual(origin.requestCount(path: "/shared"), 2, "nothing was cached, and the app was told")
        #else
        // Apple: URLSession.shared consults the registered classes whenever a task starts (apple
        // note 9), so registering after it exists is not too late: it caches, and nothing is logged.
        XCTAssertTrue(run.output.contains("registration=active"), run.output)
        XCTAssertFalse(run.errors.contains("existed before CachingURLProtocol.register()"), run.errors)
        XCTAssertEqual(origin.requestCount(path: "/shared"), 1, "the second GET was a hit")
        #endif
    }
}
#else
final class RegistrationTests: XCTestCase {
    func testRegistrationInAProcessOfItsOwn() throws {
        throw XCTSkip("URLSession.shared exists once per process: each case runs CacheTestTool, a process, and this platform cannot start one")
    }
}
#endif
