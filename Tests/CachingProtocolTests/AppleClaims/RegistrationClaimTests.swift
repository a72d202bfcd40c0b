#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation facts A9, A10, A23 and A24 on an Apple platform: `URLSession.shared` consults the
/// classes registered with `URLProtocol.registerClass` whenever a task starts — also when it was
/// made before the registration (on Linux it never does, fact L12) — and so does
/// `NSURLConnection`; a session made from a configuration never does; and a load a session
/// starts always has its task (only an `NSURLConnection` load has none).
final class RegistrationClaimTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        origin.handle("/registered") { _ in .text("registered", headers: [HTTPField("Cache-Control", "max-age=600")]) }
    }

    func testA9_theSharedSessionMadeBeforeRegistrationConsultsTheProtocol() async throws {
        _ = URLSession.shared.configuration   // the shared session exists before the registration
        XCTAssertEqual(CachingURLProtocol.register(makeConfiguration()), .active)
        var statuses: [String?] = []
        for _ in 0..<2 {
            let (data, response) = try await URLSession.shared.data(for: request("/registered"))
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "registered")
            statuses.append((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"))
        }
        XCTAssertEqual(statuses.last, "CachingProtocol; hit", "\(statuses)")
        XCTAssertEqual(origin.requestCount(path: "/registered"), 1)
    }

    /// `NSURLConnection` is deprecated (iOS 9, macOS 10.11), so the test is marked deprecated too:
    /// it uses it on purpose, and the type-check stays free of warnings.
    @available(*, deprecated, message: "exercises NSURLConnection on purpose")
    func testA10_nsURLConnectionConsultsTheRegisteredProtocol() throws {
        XCTAssertEqual(CachingURLProtocol.register(makeConfiguration()), .active)
        var statuses: [String?] = []
        for _ in 0..<2 {
            let done = expectation(description: "NSURLConnection finished")
            let result = Locked<(Data?, HTTPURLResponse?)>((nil, nil))
            NSURLConnection.sendAsynchronousRequest(request("/registered"), queue: OperationQueue()) { response, data, _ in
                result.withLock { $0 = (data, response as? HTTPURLResponse) }
                done.fulfill()
            }
            wait(for: [done], timeout: 10)
            let (data, response) = result.withLock { $0 }
            XCTAssertEqual(data.map { String(decoding: $0, as: UTF8.self) }, "registered")
            statuses.append(response?.value(forHTTPHeaderField: "Cache-Status"))
        }
        XCTAssertEqual(statuses.last, "CachingProtocol; hit", "\(statuses)")
        XCTAssertEqual(origin.requestCount(path: "/registered"), 1)
    }

    /// A session made from `URLSessionConfiguration.default` (nothing injected) never consults a
    /// registered class, though `URLSession.shared` does: `register()` caches no such session,
    /// and `.default`'s list holds no registered class.
    func testA23_aSessionMadeFromTheDefaultConfigurationNeverConsultsARegisteredClass() async throws {
        ConsultedProtocol.consulted.withLock { $0 = 0 }
        XCTAssertEqual(CachingURLProtocol.register(makeConfiguration()), .active)
        XCTAssertTrue(URLProtocol.registerClass(ConsultedProtocol.self))
        defer { URLProtocol.unregisterClass(ConsultedProtocol.self) }
        let listed = (URLSessionConfiguration.default.protocolClasses ?? []).map(ObjectIdentifier.init)
        XCTAssertFalse(listed.contains(ObjectIdentifier(ConsultedProtocol.self)))
        XCTAssertFalse(listed.contains(ObjectIdentifier(CachingURLProtocol.self)))

        let plain = URLSession(configuration: .default)
        defer { plain.finishTasksAndInvalidate() }
        for _ in 0..<2 {
            let (data, response) = try await plain.data(for: request("/registered"))
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "registered")
            XCTAssertNil((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"), "not the layer's")
        }
        XCTAssertEqual(ConsultedProtocol.consulted.withLock { $0 }, 0, "never consulted by the session of a configuration")
        XCTAssertEqual(origin.requestCount(path: "/registered"), 2)

        _ = try await URLSession.shared.data(for: request("/registered"))
        XCTAssertGreaterThan(ConsultedProtocol.consulted.withLock { $0 }, 0, "the control: URLSession.shared consults it")
    }

    /// Every load a URLSession starts — `URLSession.shared`'s and a configured session's, by
    /// completion handler, `async` call or delegate — has its task: only an `NSURLConnection`
    /// load has none, which the layer treats as a session whose delegate it cannot see. So
    /// `URLSession.shared` is never such a session: its load is a hit on what a session without a
    /// delegate stored.
    func testA24_aLoadAURLSessionStartsAlwaysHasItsTask() async throws {
        TaskRecording.hadTask.withLock { $0 = [] }
        _ = try await get("/registered")   // stored by a session injected with no delegate
        XCTAssertTrue(URLProtocol.registerClass(TaskRecording.self))
        defer { URLProtocol.unregisterClass(TaskRecording.self) }
        let (_, shared) = try await URLSession.shared.data(for: request("/registered"))
        XCTAssertEqual((shared as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit",
                       "URLSession.shared shares what a session without a delegate stored")
        let done = expectation(description: "completion handler")
        URLSession.shared.dataTask(with: request("/registered")) { _, _, _ in done.fulfill() }.resume()
        await fulfillment(of: [done], timeout: 10)

        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [TaskRecording.self] + (configuration.protocolClasses ?? [])
        let delegate = AppDelegate()
        let configured = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { configured.finishTasksAndInvalidate() }
        _ = await runDelegateTask(request("/registered"), in: configured, delegate: delegate)
        _ = try await configured.data(for: request("/registered"))

        let recorded = TaskRecording.hadTask.withLock { $0 }
        XCTAssertEqual(recorded.count, 4, "every load went through the protocol")
        XCTAssertEqual(recorded.filter { !$0 }.count, 0, "a load without its task: \(recorded)")
        XCTAssertEqual(origin.requestCount(path: "/registered"), 1, "every later load was a hit")
    }
}

/// The layer's protocol, recording for each load it starts whether it had its task.
private final class TaskRecording: CachingURLProtocol {
    static let hadTask = Locked<[Bool]>([])

    override func startLoading() {
        Self.hadTask.withLock { $0.append(task != nil) }
        super.startLoading()
    }
}
#endif
