#if canImport(Darwin)
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation facts A2 and A11 on an Apple platform: a protocol calls its client on the thread
/// that called `startLoading`, inside that thread's run loop in the mode it was running in (the
/// layer's `ClientThreadExecutor`), and holds no lock across a client call (`Locked` is an
/// `os_unfair_lock` there, which traps when the thread that holds it takes it again).
///
/// The claims (`testA2_…`, `testA11_…`) run through Apple's own loader: a real session, whose
/// client the test only watches, and the lock itself in a process of its own. The other tests
/// check the layer's side on a run loop of the test's own, as Apple's loader is said to drive it.
final class ClientThreadClaimTests: CachingTestCase {
    /// A run-loop mode of the test's own: a block that runs in it was scheduled for it (or for
    /// the common modes, which this one is not part of).
    private let claimsMode = RunLoop.Mode("CachingProtocolClaims.loading")

    private func serveStream(_ path: String, bytes: Int = 256 << 10) {
        origin.handle(path) { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")],
                           body: Data.pattern(bytes), transfer: .chunked(chunkSize: 16 << 10))
        }
    }

    // MARK: The client thread

    /// The executor made on the loading thread inside its run loop runs work handed to it from
    /// another queue on that thread, in the run loop's mode; work asked for on that thread runs
    /// at once.
    func testTheExecutorRunsWorkOnTheLoadingThreadInItsRunLoopsMode() {
        let loop = RunLoopThread(mode: claimsMode)
        defer { loop.stop() }
        let observed = Locked<(ranInline: Bool, onLoop: Bool?, mode: String?)>((false, nil, nil))
        let ran = expectation(description: "the work handed over ran")
        loop.perform {
            let executor = ClientThreadExecutor()   // where `startLoading` makes it
            executor.run { observed.withLock { $0.ranInline = true } }
            DispatchQueue.global().async {          // an engine queue, say
                executor.run {
                    observed.withLock { $0.onLoop = loop.isCurrent; $0.mode = RunLoop.current.currentMode?.rawValue }
                    ran.fulfill()
                }
            }
        }
        wait(for: [ran], timeout: 10)
        let result = observed.withLock { $0 }
        XCTAssertTrue(result.ranInline, "asked for on the loading thread: at once")
        XCTAssertEqual(result.onLoop, true, "on the loading thread")
        XCTAssertEqual(result.mode, claimsMode.rawValue, "in the mode its run loop was running in")
    }

    /// A load driven as Apple's loader drives it — `startLoading` on a thread whose run loop runs
    /// in a mode of its own — calls its client only there: every call of a fetch streamed from
    /// the origin (made on the engine's queues) and of a hit (made within `startLoading`).
    func testEveryClientCallOfADrivenLoadArrivesOnTheLoadingThreadInItsMode() throws {
        serveStream("/stream")
        let loop = RunLoopThread(mode: claimsMode)
        defer { loop.stop() }
        for pass in ["fetched", "hit"] {
            let load = DrivenLoad(request("/stream"), on: loop)
            load.start()
            wait(for: [load.client.ended], timeout: 10)
            load.stop()   // as the system does after the end

            let client = load.client
            let calls = client.calls
            XCTAssertEqual(calls.first?.call, "response 200", pass)
            XCTAssertEqual(calls.last?.call, "finish", pass)
            XCTAssertEqual(client.body, Data.pattern(256 << 10), "\(pass): the body, byte for byte")
            XCTAssertEqual(calls.filter { !$0.onLoadingThread }.map(\.call), [], "\(pass): calls made on another thread")
            XCTAssertEqual(Set(calls.map(\.mode)), [claimsMode.rawValue], "\(pass): every call in the loading thread's mode")
        }
        XCTAssertEqual(origin.requestCount(path: "/stream"), 1, "the second load was a hit")
    }

    /// Through Apple's own loader and client — a real session, fetched then hit — every client
    /// call the layer makes arrives on the thread that called `startLoading`, inside its run loop
    /// in the mode it was running in then, and the app gets the body whole. (The client is only
    /// watched: `WatchedProtocol` wraps the system's client and hands each call on.)
    func testA2_throughARealSessionEveryClientCallArrivesOnTheThreadThatStartedTheLoadInItsMode() async throws {
        serveStream("/watched")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [WatchedProtocol.self] + (configuration.protocolClasses ?? [])
        let watched = URLSession(configuration: configuration)
        defer { watched.finishTasksAndInvalidate() }
        WatchedProtocol.watch.withLock { $0 = WatchedProtocol.Watch() }
        for pass in ["fetched", "hit"] {
            let (data, response) = try await watched.data(for: request("/watched"))
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200, pass)
            XCTAssertEqual(data, Data.pattern(256 << 10), "\(pass): the body, byte for byte")
        }
        let watch = WatchedProtocol.watch.withLock { $0 }
        XCTAssertEqual(watch.starts, 2, "both loads went through the protocol")
        XCTAssertFalse(watch.calls.isEmpty)
        XCTAssertEqual(watch.calls.filter { !$0.onStartingThread }.map(\.call), [], "calls made on another thread")
        XCTAssertEqual(watch.calls.filter { !$0.inStartingMode }.map(\.call), [], "calls made outside the mode the load started in")
        XCTAssertEqual(origin.requestCount(path: "/watched"), 1, "the second load was a hit")
    }

    /// Apple's loader calls `startLoading` inside a running run loop (the executor schedules the
    /// client calls in its current mode; outside a run loop there is none, and they would be
    /// scheduled in the default mode, which that loader may never run): a load through a real
    /// session, fetched then hit, finds a mode when it starts, and ends.
    func testA2_theSystemStartsLoadsInsideARunningRunLoop() async throws {
        serveStream("/started", bytes: 64 << 10)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [ModeRecordingProtocol.self] + (configuration.protocolClasses ?? [])
        let recording = URLSession(configuration: configuration)
        defer { recording.finishTasksAndInvalidate() }
        ModeRecordingProtocol.startModes.withLock { $0 = [] }
        for _ in 0..<2 {
            let (data, response) = try await recording.data(for: request("/started"))
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
            XCTAssertEqual(data, Data.pattern(64 << 10))
        }
        let modes = ModeRecordingProtocol.startModes.withLock { $0 }
        XCTAssertEqual(modes.count, 2, "both loads went through the protocol")
        XCTAssertFalse(modes.contains { $0 == nil }, "startLoading ran inside a running run loop: \(modes)")
        XCTAssertEqual(origin.requestCount(path: "/started"), 1, "the second load was a hit")
    }

    // MARK: Re-entering the protocol

    /// A client that calls back into the protocol from inside a client call — `stopLoading`
    /// from `urlProtocolDidFinishLoading`, as a loader may — does not trap: no lock of the layer
    /// is held across the call (an `os_unfair_lock` taken again by its holder aborts the
    /// process). Fetched and hit; the load ends normally.
    func testAClientThatStopsTheLoadFromInsideItsLastCallDoesNotTrap() throws {
        serveStream("/reentered")
        let loop = RunLoopThread(mode: claimsMode)
        defer { loop.stop() }
        for pass in ["fetched", "hit"] {
            let load = DrivenLoad(request("/reentered"), on: loop)
            let client = load.client
            client.onFinish = { load.stopHere() }
            load.start()
            wait(for: [client.ended], timeout: 10)
            client.onFinish = nil   // it holds the load, which holds the client
            XCTAssertEqual(client.calls.first?.call, "response 200", pass)
            XCTAssertEqual(client.calls.last?.call, "finish", pass)
            XCTAssertEqual(client.body, Data.pattern(256 << 10), pass)
            XCTAssertTrue(client.reenteredAfterFinish, "\(pass): stopLoading ran inside the client's call, and returned")
        }
    }

    /// `os_unfair_lock`, which `Locked` is on Apple platforms, aborts the process when the thread
    /// that holds it takes it again: why no lock of the layer may be held across a client call
    /// that can come back into the protocol. Run in a process of its own (macOS: the simulators
    /// start none).
    func testA11_anOSUnfairLockTakenAgainByTheThreadThatHoldsItAbortsTheProcess() throws {
        #if os(macOS)
        let run = try CacheTestToolRunner.run(["relock"])
        XCTAssertFalse(run.output.contains("relocked"), "the second lock returned: \(run.output)")
        XCTAssertNotEqual(run.status, 0, "the process ended by the trap: \(run.errors)")
        #else
        throw XCTSkip("a process of its own: macOS only")
        #endif
    }

    /// Through Apple's own loader and client, loads fetched, hit and cancelled by the app as
    /// the response arrives all end, and the system stops each one (`stopLoading`), whether or
    /// not it does so from inside a client call: nothing traps.
    func testA11_throughARealSessionTheSystemStopsEveryLoadWithoutATrap() async throws {
        serveStream("/stopped", bytes: 64 << 10)
        serveStream("/cancelled", bytes: 4 << 20)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [WatchedProtocol.self] + (configuration.protocolClasses ?? [])
        let watched = URLSession(configuration: configuration)
        defer { watched.finishTasksAndInvalidate() }
        WatchedProtocol.watch.withLock { $0 = WatchedProtocol.Watch() }
        for _ in 0..<2 { _ = try await watched.data(for: request("/stopped")) }
        let (bytes, _) = try await watched.bytes(for: request("/cancelled"))
        for try await _ in bytes { break }   // the app stops reading at its first byte: the task is cancelled
        await waitUntil("the system stopped every load") { WatchedProtocol.watch.withLock { $0.stops >= $0.starts } }
        let watch = WatchedProtocol.watch.withLock { $0 }
        XCTAssertEqual(watch.starts, 3)
        XCTAssertGreaterThanOrEqual(watch.stops, 3, "every load stopped (\(watch.stopsInsideAClientCall) from inside a client call)")
    }

    /// The same from inside the first call of a streamed fetch: `stopLoading` from
    /// `didReceive response` returns.
    func testAClientThatStopsTheLoadFromInsideItsFirstCallDoesNotTrap() throws {
        serveStream("/stopped-early")
        let loop = RunLoopThread(mode: claimsMode)
        defer { loop.stop() }
        let load = DrivenLoad(request("/stopped-early"), on: loop)
        let stopped = expectation(description: "stopLoading returned inside didReceive response")
        load.client.onResponse = {
            load.stopHere()
            stopped.fulfill()
        }
        load.start()
        wait(for: [stopped], timeout: 10)
        load.client.onResponse = nil   // it holds the load, which holds the client
        XCTAssertEqual(load.client.calls.first?.call, "response 200")
        XCTAssertTrue(load.client.calls.first?.onLoadingThread == true)
    }
}

/// A load driven as Apple's loader drives one: the protocol, made with a recording client, is
/// started and stopped on `loop`'s thread inside its run loop.
private struct DrivenLoad: Sendable {
    let client: LoadingThreadClient
    private let loader: Locked<CachingURLProtocol?>
    private let loop: RunLoopThread

    init(_ request: URLRequest, on loop: RunLoopThread) {
        client = LoadingThreadClient(loop: loop)
        loader = Locked(CachingURLProtocol(request: request, cachedResponse: nil, client: client))
        self.loop = loop
    }

    func start() {
        loop.perform { [loader] in loader.withLock { $0 }?.startLoading() }
    }

    func stop() {
        loop.perform { [loader] in loader.withLock { $0 }?.stopLoading() }
    }

    /// `stopLoading` on the calling thread: from inside a client call.
    func stopHere() {
        loader.withLock { $0 }?.stopLoading()
    }
}

/// The layer's protocol with the system's client watched: each client call is recorded (was it
/// on the thread that called `startLoading`, in the run-loop mode that thread ran then?) and
/// handed on to the system's client; so is each `stopLoading`, and whether it came from inside a
/// client call.
private final class WatchedProtocol: CachingURLProtocol {
    struct Call: Sendable {
        var call: String
        var onStartingThread: Bool
        var inStartingMode: Bool
    }

    struct Watch: Sendable {
        var starts = 0
        var stops = 0
        var stopsInsideAClientCall = 0
        var calls: [Call] = []
        /// Client calls running now, across every load.
        var depth = 0
    }

    static let watch = Locked(Watch())
    /// Written in `startLoading`, before any client call of the load; then only read.
    private var started: (thread: ObjectIdentifier, mode: String?)?

    override var client: (any URLProtocolClient)? {
        super.client.map { WatchingClient(watched: $0, owner: self) }
    }

    override func startLoading() {
        started = (ObjectIdentifier(Thread.current), RunLoop.current.currentMode?.rawValue)
        Self.watch.withLock { $0.starts += 1 }
        super.startLoading()
    }

    override func stopLoading() {
        Self.watch.withLock {
            $0.stops += 1
            if $0.depth > 0 { $0.stopsInsideAClientCall += 1 }
        }
        super.stopLoading()
    }

    /// Records a client call made now, and runs it.
    fileprivate func record(_ call: String, _ body: () -> Void) {
        let here = Call(call: call, onStartingThread: started?.thread == ObjectIdentifier(Thread.current),
                        inStartingMode: started?.mode == RunLoop.current.currentMode?.rawValue)
        Self.watch.withLock {
            $0.calls.append(here)
            $0.depth += 1
        }
        body()
        Self.watch.withLock { $0.depth -= 1 }
    }
}

/// The system's client, watched by a `WatchedProtocol`: every call is recorded there, then made.
private final class WatchingClient: NSObject, URLProtocolClient, @unchecked Sendable {
    // @unchecked: both are only used to pass each call on, on the thread it came in.
    private let watched: any URLProtocolClient
    private weak var owner: WatchedProtocol?

    init(watched: any URLProtocolClient, owner: WatchedProtocol) {
        self.watched = watched
        self.owner = owner
    }

    private func record(_ call: String, _ body: () -> Void) {
        guard let owner else { return body() }
        owner.record(call, body)
    }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
        record("redirect") { watched.urlProtocol(`protocol`, wasRedirectedTo: request, redirectResponse: redirectResponse) }
    }
    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
        record("cached response is valid") { watched.urlProtocol(`protocol`, cachedResponseIsValid: cachedResponse) }
    }
    func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
        record("response") { watched.urlProtocol(`protocol`, didReceive: response, cacheStoragePolicy: policy) }
    }
    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
        record("data") { watched.urlProtocol(`protocol`, didLoad: data) }
    }
    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
        record("finish") { watched.urlProtocolDidFinishLoading(`protocol`) }
    }
    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: Error) {
        record("fail") { watched.urlProtocol(`protocol`, didFailWithError: error) }
    }
    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
        record("challenge") { watched.urlProtocol(`protocol`, didReceive: challenge) }
    }
    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
        record("cancel challenge") { watched.urlProtocol(`protocol`, didCancel: challenge) }
    }
}

/// A protocol that records the run-loop mode `startLoading` is called in.
private final class ModeRecordingProtocol: CachingURLProtocol {
    static let startModes = Locked<[String?]>([])

    override func startLoading() {
        Self.startModes.withLock { $0.append(RunLoop.current.currentMode?.rawValue) }
        super.startLoading()
    }
}

/// A thread of the test's own whose run loop runs in `mode` until `stop()`, as the thread Apple's
/// loader calls `startLoading` on runs: work handed to it with `perform` runs inside that run loop.
private final class RunLoopThread: @unchecked Sendable {
    // @unchecked: `runLoop` is written once, on the thread, before `init` returns; then only read.
    let mode: RunLoop.Mode
    private var runLoop: CFRunLoop?
    private let stopped = Locked(false)

    init(mode: RunLoop.Mode) {
        self.mode = mode
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            runLoop = CFRunLoopGetCurrent()
            // A timer in `mode`, so that the run loop waits there for work instead of returning
            // at once (a mode without a source or timer does not run).
            let keepAlive = Timer(timeInterval: 3_600, repeats: true) { _ in }
            RunLoop.current.add(keepAlive, forMode: mode)
            started.signal()
            while !stopped.withLock({ $0 }) {
                _ = RunLoop.current.run(mode: mode, before: .distantFuture)
            }
            keepAlive.invalidate()
        }
        thread.name = "RunLoopThread \(mode.rawValue)"
        thread.start()
        _ = started.wait(timeout: .now() + 10)   // the thread's start: real asynchrony
    }

    /// Whether the calling thread is this one.
    var isCurrent: Bool { CFRunLoopGetCurrent() === runLoop }

    /// Runs `work` on the thread, inside its run loop in `mode`.
    func perform(_ work: @escaping @Sendable () -> Void) {
        CFRunLoopPerformBlock(runLoop, mode.rawValue as CFString, work)
        CFRunLoopWakeUp(runLoop)
    }

    /// Ends the thread once the work handed to it before has run.
    func stop() {
        perform { [self] in
            stopped.withLock { $0 = true }
            CFRunLoopStop(CFRunLoopGetCurrent())
        }
    }
}

/// A `URLProtocolClient` that records each call with the thread and run-loop mode it came in.
private final class LoadingThreadClient: NSObject, URLProtocolClient, Sendable {
    struct Call: Sendable {
        var call: String
        var onLoadingThread: Bool
        var mode: String?
    }

    private struct State {
        var calls: [Call] = []
        var body = Data()
        var reenteredAfterFinish = false
        var onResponse: (@Sendable () -> Void)?
        var onFinish: (@Sendable () -> Void)?
    }

    private let loop: RunLoopThread
    private let state = Locked(State())
    /// Fulfilled when the load ends (finished or failed).
    let ended = XCTestExpectation(description: "the load ended")

    init(loop: RunLoopThread) {
        self.loop = loop
    }

    var calls: [Call] { state.withLock { $0.calls } }
    var body: Data { state.withLock { $0.body } }
    var reenteredAfterFinish: Bool { state.withLock { $0.reenteredAfterFinish } }
    /// Runs inside `didReceive response` (on the loading thread).
    var onResponse: (@Sendable () -> Void)? {
        get { state.withLock { $0.onResponse } }
        set { state.withLock { $0.onResponse = newValue } }
    }
    /// Runs inside `urlProtocolDidFinishLoading` (on the loading thread).
    var onFinish: (@Sendable () -> Void)? {
        get { state.withLock { $0.onFinish } }
        set { state.withLock { $0.onFinish = newValue } }
    }

    private func record(_ call: String, data: Data? = nil) {
        let entry = Call(call: call, onLoadingThread: loop.isCurrent, mode: RunLoop.current.currentMode?.rawValue)
        state.withLock {
            $0.calls.append(entry)
            if let data { $0.body.append(data) }
        }
    }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
        record("redirect")
    }
    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
        record("cached response is valid")
    }
    func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
        record("response \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        onResponse?()
    }
    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
        record("data", data: data)
    }
    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
        record("finish")
        if let onFinish {
            onFinish()
            state.withLock { $0.reenteredAfterFinish = true }
        }
        ended.fulfill()
    }
    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: Error) {
        record("fail \((error as NSError).code)")
        ended.fulfill()
    }
    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
        record("challenge")
    }
    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
        record("cancel challenge")
    }
}
#endif
