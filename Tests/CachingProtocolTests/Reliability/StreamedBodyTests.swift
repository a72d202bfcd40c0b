import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A body the layer may store goes to a temporary file as it arrives and is renamed into place
/// only once it is whole and stored (`StreamedEntryFile`): nothing half-written is ever served or
/// indexed. Each test looks at the cache directory in the middle of a body (the origin sends it
/// through a slow simulated link) — no file there has the entry's name, and a second cache on the
/// directory, as another process would open it, finds nothing and nothing damaged — and then at
/// what is left once the body ended well or badly: the whole entry, or no entry and no stray file.
final class StreamedBodyTests: CachingTestCase {
    private let mounts = Mounts()
    private var mountRoot: URL!
    private let body = Data.pattern(3 << 20, seed: 9)

    override func setUpWithError() throws {
        try super.setUpWithError()
        mountRoot = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocolMounts-\(UUID().uuidString)")
        useCache(in: directory)
        // About half a second per body: time to look at the directory in the middle of one.
        origin.network = SimulatedNetwork(roundTrip: 0, bytesPerSecond: 6_000_000)
    }

    override func tearDownWithError() throws {
        let harnessDirectory = directory
        try super.tearDownWithError()
        mounts.unmountAll()
        try? FileManager.default.removeItem(at: mountRoot)
        if let harnessDirectory { try? FileManager.default.removeItem(at: harnessDirectory) }
    }

    /// Replaces the harness cache with one in `directory` large enough to store the body (the
    /// largest entry is 5 % of 256 MB).
    private func useCache(in directory: URL, memory: Int = 4 << 20) {
        cache?.waitUntilSettled()
        self.directory = directory
        cache = CachingURLCache(memoryCapacity: memory, diskCapacity: 256 << 20, directory: directory)
        installSession(makeConfiguration())
    }

    private func serve(_ path: String, fault: OriginResponse.Fault? = nil) {
        let body = body
        origin.handle(path) { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body, fault: fault)
        }
    }

    /// The name of the entry file of a GET of `path`.
    private func entryName(_ path: String) -> String {
        EntryDigest(key: CacheKey.make(method: "GET", url: origin.url(path))).fileName
    }

    private func temporaryFiles(in directory: URL) -> [String] {
        CacheFiles.entryNames(in: directory).filter { $0.hasPrefix(DiskStore.Paths.temporaryPrefix) }
    }

    /// Starts a completion-handler GET of `path` on `session`; the expectation is fulfilled with
    /// its result.
    private func startLoad(_ path: String, on session: URLSession? = nil)
        -> (task: URLSessionDataTask, done: XCTestExpectation, result: Locked<Result<Data, Error>?>) {
        let done = XCTestExpectation(description: "load of \(path)")
        let result = Locked<Result<Data, Error>?>(nil)
        let task = (session ?? self.session).dataTask(with: request(path)) { data, _, error in
            result.withLock { $0 = error.map { .failure($0) } ?? .success(data ?? Data()) }
            done.fulfill()
        }
        task.resume()
        return (task, done, result)
    }

    /// Starts a completion-handler GET of `path` while another load of it runs, and waits until
    /// it joined that load's exchange.
    private func startLoadThatJoins(_ path: String) async
        -> (task: URLSessionDataTask, done: XCTestExpectation, result: Locked<Result<Data, Error>?>) {
        let load = startLoad(path)
        let engine = Installation.engine(for: configuration)
        let key = CacheKey.make(method: "GET", url: origin.url(path))
        await waitUntil("the late load joined") { engine.exchanges.waitingLoads(forKey: key) == 2 }
        return load
    }

    /// Waits until the origin has sent at least half the body.
    private func waitForTheMiddleOfTheBody() async {
        let half = body.count / 2
        await waitUntil("half the body sent") { [origin] in (origin?.bodyBytesSent ?? 0) >= half }
    }

    /// In the middle of a body for `path` in `directory`: no file has the entry's name, and a
    /// second cache on the directory (what another process would open) finds nothing stored for
    /// `path` and nothing damaged.
    private func assertNothingHalfWrittenIsVisible(_ path: String, in directory: URL, file: StaticString = #filePath, line: UInt = #line) {
        let names = CacheFiles.entryNames(in: directory)
        XCTAssertFalse(names.contains(entryName(path)), "a half-written body has the entry's name: \(names)", file: file, line: line)
        let other = CachingURLCache(memoryCapacity: 0, diskCapacity: 256 << 20, directory: directory)
        XCTAssertNil(other.cachedResponse(for: request(path)), "another cache on the directory sees nothing yet", file: file, line: line)
        XCTAssertEqual(other.statistics.corruptEntriesRemoved, 0, "nor anything damaged", file: file, line: line)
    }

    /// After the next launch's scan of `directory`: no entry, and no file at all in `entries/`.
    private func assertNothingLeftAfterTheNextLaunch(in directory: URL, file: StaticString = #filePath, line: UInt = #line) {
        let next = CachingURLCache(memoryCapacity: 0, diskCapacity: 256 << 20, directory: directory)
        next.waitUntilSettled()
        XCTAssertEqual(next.statistics.disk.entryCount, 0, "no entry", file: file, line: line)
        XCTAssertEqual(next.statistics.corruptEntriesRemoved, 0, "nothing damaged was found", file: file, line: line)
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [], "no stray file", file: file, line: line)
    }

    func testAWholeBodyIsRenamedIntoPlaceOnlyOnceComplete() async throws {
        // Given a storable 3 MB body arriving slowly
        serve("/whole")
        let load = startLoad("/whole")
        // When the middle of it has arrived
        await waitForTheMiddleOfTheBody()
        // Then it is in a temporary file, under no entry's name, and nothing else sees it
        assertNothingHalfWrittenIsVisible("/whole", in: directory)
        XCTAssertEqual(temporaryFiles(in: directory).count, 1, "the body goes to its file as it arrives")
        // And once it ended, the app has it whole, and the file is the entry, and nothing else is left
        await fulfillment(of: [load.done], timeout: 30)
        XCTAssertEqual(try XCTUnwrap(load.result.withLock { $0 }).get(), body)
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [entryName("/whole")])
        // And after a restart it is served from disk, byte for byte, without the origin
        useCache(in: directory, memory: 0)
        let (data, response) = try await get("/whole")
        XCTAssertEqual(data, body)
        XCTAssertEqual(cacheStatus(response)?.contains("hit"), true, cacheStatus(response) ?? "")
        XCTAssertEqual(originMethods("/whole"), ["GET"])
    }

    func testABodyShorterThanItsContentLengthLeavesNothing() async throws {
        // Given a body whose origin dies after 2 MB of the 3 MB it declared
        serve("/short", fault: .closeAfterBodyBytes(2 << 20))
        let load = startLoad("/short")
        await waitForTheMiddleOfTheBody()
        assertNothingHalfWrittenIsVisible("/short", in: directory)
        // When the transfer ends early
        await fulfillment(of: [load.done], timeout: 30)
        // Then the app gets the error it would get without the layer, and nothing is stored
        XCTAssertThrowsError(try XCTUnwrap(load.result.withLock { $0 }).get())
        cache.waitUntilSettled()
        await waitUntil("the temporary file is deleted") { [directory] in CacheFiles.entryNames(in: directory!).isEmpty }
        assertNothingLeftAfterTheNextLaunch(in: directory)
    }

    func testACancelledLoadLeavesNothing() async throws {
        // Three seconds per body: the cancel lands well before its end.
        origin.network = SimulatedNetwork(roundTrip: 0, bytesPerSecond: 1_000_000)
        serve("/cancelled")
        let load = startLoad("/cancelled")
        await waitForTheMiddleOfTheBody()
        assertNothingHalfWrittenIsVisible("/cancelled", in: directory)
        // When the app cancels the load in the middle of the body
        load.task.cancel()
        await fulfillment(of: [load.done], timeout: 30)
        XCTAssertEqual((load.result.withLock { $0 }.flatMap { try? $0.get() }), nil, "the load ended cancelled")
        // Then nothing is stored and the temporary file goes
        cache.waitUntilSettled()
        await waitUntil("the temporary file is deleted") { [directory] in CacheFiles.entryNames(in: directory!).isEmpty }
        assertNothingLeftAfterTheNextLaunch(in: directory)
    }

    func testAFullDiskInTheMiddleOfABodyLeavesNothingAndIsReported() async throws {
        // Given a cache on a 2 MB file system that believes it may use 256 MB
        try mounts.tmpfs(at: mountRoot.path, options: "size=2m")
        useCache(in: mountRoot.appendingPathComponent("cache"))
        serve("/full")
        let load = startLoad("/full")
        await waitForTheMiddleOfTheBody()
        assertNothingHalfWrittenIsVisible("/full", in: directory)
        // When the disk fills up before the 3 MB body is in
        await fulfillment(of: [load.done], timeout: 30)
        // Then the app still gets the whole body, nothing is stored, and the full disk is reported
        XCTAssertEqual(try XCTUnwrap(load.result.withLock { $0 }).get(), body)
        cache.waitUntilSettled()
        let statistics = cache.statistics
        XCTAssertEqual(statistics.diskProblem?.code, .diskWriteFailed)
        XCTAssertTrue(statistics.diskProblem?.detail.contains("No space left") == true, "\(String(describing: statistics.diskProblem))")
        await waitUntil("the temporary file is deleted") { [directory] in CacheFiles.entryNames(in: directory!).isEmpty }
        assertNothingLeftAfterTheNextLaunch(in: directory)
    }

    /// A session with the harness session's settings (so its loads share exchanges with it)
    /// whose tasks have `delegate`.
    private func delegateSession(_ delegate: URLSessionDataDelegate) -> URLSession {
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.timeoutIntervalForRequest = 10
        // Named, so with Apple's loader rules too its answers share the test session's partition.
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration, delegate: delegate)
        return URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
    }

    func testABodyADelegateTookPieceByPieceIsStoredWhole() async throws {
        // Given an app whose delegate takes the body piece by piece (the layer keeps none of it)
        serve("/pieces")
        let collector = DelegateCollector()
        let pieces = delegateSession(collector)
        defer { pieces.finishTasksAndInvalidate() }
        pieces.dataTask(with: request("/pieces")).resume()
        await fulfillment(of: [collector.done], timeout: 30)
        // Then the delegate got it whole, and it was stored from its file
        XCTAssertEqual(collector.result.0, body)
        XCTAssertGreaterThan(collector.result.3, 1, "in pieces")
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [entryName("/pieces")])
        let (data, response) = try await get("/pieces")
        XCTAssertEqual(data, body)
        XCTAssertEqual(cacheStatus(response)?.contains("hit"), true, cacheStatus(response) ?? "")
        XCTAssertEqual(originMethods("/pieces"), ["GET"])
    }

    func testALoadThatJoinsAfterTheHeadGetsTheWholeBody() async throws {
        // Given a delegate taking a body piece by piece, the layer keeping it only in its file
        serve("/joined")
        let collector = DelegateCollector()
        let pieces = delegateSession(collector)
        defer { pieces.finishTasksAndInvalidate() }
        pieces.dataTask(with: request("/joined")).resume()
        await waitForTheMiddleOfTheBody()
        // When a completion handler asks for the same URL in the middle of the body, and joins
        let late = await startLoadThatJoins("/joined")
        // Then both get the whole body from one request to the origin
        await fulfillment(of: [collector.done, late.done], timeout: 30)
        XCTAssertEqual(collector.result.0, body)
        XCTAssertEqual(try XCTUnwrap(late.result.withLock { $0 }).get(), body)
        XCTAssertEqual(originMethods("/joined"), ["GET"])
    }

    func testALoadThatJoinsAfterTheHeadOfABodyThatOutgrowsTheLargestEntryGetsTheWholeBody() async throws {
        // Given a delegate taking a body of unknown length piece by piece, the layer keeping it
        // only in its file, and a largest entry of 2 MB: past it the file goes, and nothing keeps the body
        cache.maximumEntrySize = 2 << 20
        let body = body
        origin.handle("/outgrown") { _ in
            var response = OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body)
            response.transfer = .chunked(chunkSize: 64 << 10)
            return response
        }
        let collector = DelegateCollector()
        let pieces = delegateSession(collector)
        defer { pieces.finishTasksAndInvalidate() }
        pieces.dataTask(with: request("/outgrown")).resume()
        await waitUntil("the first 512 KB sent") { [origin] in (origin?.bodyBytesSent ?? 0) >= 512 << 10 }
        // When a completion handler asks for the same URL before the body outgrows the file, and joins
        let late = await startLoadThatJoins("/outgrown")
        // Then the delegate has the body, and the late load too, byte for byte, from a request of its own
        await fulfillment(of: [collector.done, late.done], timeout: 30)
        XCTAssertEqual(collector.result.0, body)
        XCTAssertEqual(try XCTUnwrap(late.result.withLock { $0 }).get(), body, "not the empty body of the shared request")
        XCTAssertEqual(originMethods("/outgrown"), ["GET", "GET"])
        // And nothing was stored, and no file is left
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [])
    }

    #if os(macOS) || os(Linux)
    func testAProcessKilledInTheMiddleOfABodyLeavesNothingAfterTheNextLaunch() async throws {
        // Given another process loading a storable body through the layer into the directory
        serve("/killed")
        let writer = try RunningTool(["load", origin.url("/killed").absoluteString, directory.path])
        await fulfillment(of: [writer.expectLine("loading") { $0 == "loading" }], timeout: 30)
        await waitForTheMiddleOfTheBody()
        assertNothingHalfWrittenIsVisible("/killed", in: directory)
        XCTAssertEqual(temporaryFiles(in: directory).count, 1, "its body goes to its file as it arrives")
        // When it is killed with SIGKILL in the middle of the body
        writer.send(signal: SIGKILL)
        writer.process.waitUntilExit()
        XCTAssertEqual(writer.process.terminationReason, .uncaughtSignal, writer.errorOutput)
        // Then the next launch finds no entry, deletes the dead process's file, and finds nothing damaged
        assertNothingLeftAfterTheNextLaunch(in: directory)
    }

    func testAnotherProcessSeesABodyOnlyOnceItIsWhole() async throws {
        // Given another process loading a storable body through the layer into the directory
        serve("/shared")
        let writer = try RunningTool(["load", origin.url("/shared").absoluteString, directory.path])
        let settled = writer.expectLine("settled") { $0 == "settled" }
        await waitForTheMiddleOfTheBody()
        // When this process looks in the middle of the body, it sees nothing
        assertNothingHalfWrittenIsVisible("/shared", in: directory)
        // And once the other has stored it, this process reads it whole
        await fulfillment(of: [settled], timeout: 30)
        writer.process.waitUntilExit()
        XCTAssertTrue(writer.lines.contains("result status 200 bytes \(body.count)"), "\(writer.lines)")
        let reader = CachingURLCache(memoryCapacity: 0, diskCapacity: 256 << 20, directory: directory)
        XCTAssertEqual(reader.cachedResponse(for: request("/shared"))?.data, body)
        XCTAssertEqual(reader.statistics.corruptEntriesRemoved, 0)
        XCTAssertEqual(temporaryFiles(in: directory), [])
    }
    #endif
}
