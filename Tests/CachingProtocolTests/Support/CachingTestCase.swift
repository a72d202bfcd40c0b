import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Base class of the integration tests: a loopback origin and a cache sharing a manual clock,
/// a fresh cache directory, and a session with the protocol injected. Nothing sleeps: tests
/// move the clock.
class CachingTestCase: LoaderRulesTestCase {
    /// The `Cache-Status` field (RFC 9211) the layer put on `response`.
    func cacheStatus(_ response: HTTPURLResponse) -> String? {
        response.value(forHTTPHeaderField: "Cache-Status")
    }

    var clock: ManualClock!
    var origin: LoopbackOrigin!
    var directory: URL!
    var cache: CachingURLCache!
    var session: URLSession!
    /// The configuration `session` caches with (set by `installSession`).
    var configuration: CachingConfiguration!
    private let recordedEvents = Locked<[CacheEvent]>([])

    /// Override to change the installed configuration before the session is made.
    func makeConfiguration() -> CachingConfiguration {
        CachingConfiguration(cache: cache, now: clock.read, observer: { [recordedEvents] event in
            recordedEvents.withLock { $0.append(event) }
        })
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        Self.removeLoopbackCookies()
        clock = ManualClock()
        origin = try LoopbackOrigin(now: clock.read)
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("CachingProtocolTests-\(UUID().uuidString)", isDirectory: true)
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
    }

    override func tearDownWithError() throws {
        session?.invalidateAndCancel()
        CachingURLProtocol.unregister()
        origin?.stop()
        cache?.waitUntilSettled()
        if let directory { try? FileManager.default.removeItem(at: directory) }
        Self.removeLoopbackCookies()
        try super.tearDownWithError()
    }

    /// Empties the shared cookie jar of loopback cookies. The cache's upstream requests carry the
    /// jar's cookies (and store `Set-Cookie`s in it), so one test's cookies would otherwise be
    /// credentials in the next.
    static func removeLoopbackCookies() {
        for cookie in HTTPCookieStorage.shared.cookies ?? [] where ["127.0.0.1", "localhost"].contains(cookie.domain) {
            HTTPCookieStorage.shared.deleteCookie(cookie)
        }
    }

    /// Injects `configuration` and replaces `session` with a new one that uses it.
    func installSession(_ configuration: CachingConfiguration) {
        session?.invalidateAndCancel()
        self.configuration = configuration
        // Also what `register` would install: tests that drive `CachingURLProtocol` (or a
        // subclass) directly, or `cachedThenFresh`, use the same configuration as `session`.
        Installation.install(configuration)
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.timeoutIntervalForRequest = 10
        // Its sessions have no delegate, and say so: with Apple's loader rules a delegate left
        // unnamed may judge server trust, and its sessions' answers are kept apart from those of
        // the URLCache API and of prefetches (tests of that name it or not themselves).
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration, delegate: nil)
        session = URLSession(configuration: sessionConfiguration)
    }

    var events: [CacheEvent] { recordedEvents.withLock { $0 } }

    /// The entry stored last for `path` on the origin, in whichever session's partition it is
    /// (the `URLCache` API looks outside every partition, `CacheRequest.judged(by:)`): what
    /// reached the store.
    func storedEntry(_ path: String) -> CacheEntry? {
        storedEntry(at: origin.url(path))
    }

    /// `storedEntry(_:)` for any URL.
    func storedEntry(at url: URL) -> CacheEntry? {
        cache.store.peek(cache.key(for: url))?.variants.first
    }

    /// The body of `storedEntry(path)`.
    func storedBody(_ path: String) -> Data? {
        storedEntry(path)?.body
    }

    // MARK: Requests

    /// A session on an ephemeral configuration without Foundation's own cache, whose first
    /// protocol class is `first` (one that watches or answers requests before the system's own
    /// protocols see them), with `delegate`. The caller invalidates it.
    func sessionAskingFirst(_ first: AnyClass, delegate: (any URLSessionDelegate)? = nil) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.urlCache = nil
        configuration.protocolClasses = [first] + (configuration.protocolClasses ?? [])
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    func request(_ path: String, method: String = "GET", headers: [String: String] = [:],
                 cachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy, body: Data? = nil) -> URLRequest {
        var request = URLRequest(url: origin.url(path), cachePolicy: cachePolicy)
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    /// Loads through `session` with `async data(for:)`.
    func load(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        return (data, try XCTUnwrap(response as? HTTPURLResponse))
    }

    func get(_ path: String, headers: [String: String] = [:],
             cachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy) async throws -> (Data, HTTPURLResponse) {
        try await load(request(path, headers: headers, cachePolicy: cachePolicy))
    }

    /// Loads through `session` with a completion-handler data task.
    func loadWithCompletionHandler(_ request: URLRequest) throws -> (Data, HTTPURLResponse) {
        let done = expectation(description: "completion handler")
        let result = Locked<Result<(Data, HTTPURLResponse), Error>?>(nil)
        session.dataTask(with: request) { data, response, error in
            result.withLock {
                if let error {
                    $0 = .failure(error)
                } else if let data, let http = response as? HTTPURLResponse {
                    $0 = .success((data, http))
                } else {
                    $0 = .failure(URLError(.badServerResponse))
                }
            }
            done.fulfill()
        }.resume()
        wait(for: [done], timeout: 10)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

    /// Loads through a session with a delegate (not a completion handler), collecting every chunk
    /// the delegate receives.
    func loadWithDelegate(_ request: URLRequest) throws -> (Data, HTTPURLResponse, chunks: Int) {
        let collector = DelegateCollector()
        let sessionConfiguration = URLSessionConfiguration.default
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration, delegate: collector)
        let delegateSession = URLSession(configuration: sessionConfiguration, delegate: collector, delegateQueue: nil)
        defer { delegateSession.finishTasksAndInvalidate() }
        delegateSession.dataTask(with: request).resume()
        wait(for: [collector.done], timeout: 10)
        let (data, response, error, chunks) = collector.result
        if let error { throw error }
        return (data, try XCTUnwrap(response as? HTTPURLResponse), chunks)
    }

    // MARK: Waiting

    /// Waits until `condition` holds, checking it every millisecond on a timer (no thread
    /// sleeps; `XCTNSPredicateExpectation` is not evaluated while an `async` test waits on Linux).
    func waitUntil(_ description: String, timeout: TimeInterval = 10, _ condition: @escaping @Sendable () -> Bool) async {
        await fulfillment(of: [ConditionExpectation(description, condition)], timeout: timeout)
    }

    // MARK: Origin log

    /// Methods the origin received for `path`, in order.
    func originMethods(_ path: String) -> [String] {
        origin.requests(to: path).map(\.method)
    }
}

/// A data delegate that records what a delegate-based task receives.
final class DelegateCollector: NSObject, URLSessionDataDelegate, Sendable {
    let done = XCTestExpectation(description: "delegate completion")
    private let state = Locked<(data: Data, response: URLResponse?, error: Error?, chunks: Int)>((Data(), nil, nil, 0))

    var result: (Data, URLResponse?, Error?, Int) { state.withLock { ($0.data, $0.response, $0.error, $0.chunks) } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        state.withLock { $0.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock { $0.data.append(data); $0.chunks += 1 }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        state.withLock { $0.error = error; if $0.response == nil { $0.response = task.response } }
        done.fulfill()
    }
}

extension Data {
    /// `count` bytes of a repeating, position-dependent pattern, so truncation or reordering
    /// shows up in a byte-for-byte comparison.
    static func pattern(_ count: Int, seed: UInt8 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ $0 / 251) })
    }

    /// The bytes in pieces of `size` (the last one shorter), in order: 16 KB is what corelibs
    /// hands a transfer's delegate at a time.
    func pieces(of size: Int) -> [Data] {
        stride(from: startIndex, to: endIndex, by: size).map { self[$0..<Swift.min(endIndex, $0 + size)] }
    }
}

extension XCTestCase {
    /// `task`'s value, waited for at most `seconds`; nil, with the test failed, when it is not
    /// done by then (the task is cancelled and left to end on its own). A load the layer never
    /// ends must fail the test in bounded time, not hang it.
    func value<Value: Sendable>(of task: Task<Value, Never>, within seconds: TimeInterval,
                                _ description: String = "the task ended") async -> Value? {
        let done = XCTestExpectation(description: description)
        let result = Locked<Value?>(nil)
        Task {
            let value = await task.value
            result.withLock { $0 = value }
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: seconds)
        guard let value = result.withLock({ $0 }) else {
            task.cancel()
            return nil
        }
        return value
    }

    /// An expectation fulfilled once `condition` holds (an origin counter reaching a value, say),
    /// checked every 10 ms on a queue of its own until it holds or `giveUpAfter` seconds passed.
    /// As `XCTNSPredicateExpectation` polls, but that one polls on the run loop of the thread that
    /// made it, which does not run while an `async` test awaits `fulfillment(of:)` on Linux.
    func expectation(until description: String, giveUpAfter seconds: TimeInterval = 60,
                     _ condition: @escaping @Sendable () -> Bool) -> XCTestExpectation {
        let expectation = XCTestExpectation(description: description)
        let deadline = DispatchTime.now() + seconds
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "polling: \(description)"))
        timer.schedule(deadline: .now(), repeating: .milliseconds(10))
        timer.setEventHandler {
            let holds = condition()
            if holds { expectation.fulfill() }
            if holds || DispatchTime.now() > deadline { timer.cancel() }
        }
        timer.resume()
        return expectation
    }
}
