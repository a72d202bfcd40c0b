#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation facts A4 and A15, and M3 of "What only a Mac can still prove", on an Apple
/// platform: a redirect the layer reports (`wasRedirectedTo`), from the origin or from the cache,
/// is followed by the system, which asks the app's delegate; a delegate that refuses gets the 3xx
/// and its body as the task's answer when it was named to `inject(into:using:delegate:)` (the
/// 3xx follows the report at once, as OHHTTPStubs delivers it) and an error when it was not (the
/// load ends cancelled after the report, as Apple's CustomHTTPProtocol sample ends it); and a
/// followed redirect never ends with the 3xx or with data and no response — the race OHHTTPStubs'
/// issues 230 and 280 and rdar 39391319 report while the delegate decides — over a thousand runs.
final class RedirectClaimTests: CachingTestCase {
    private let movedBody = Data("<a href=\"/to\">moved</a>".utf8)

    override func setUpWithError() throws {
        try super.setUpWithError()
        // A 301 the cache stores (heuristically cacheable), a 302 it does not, and their target.
        origin.handle("/stored") { [movedBody] _ in
            OriginResponse(status: 301, headers: [HTTPField("Location", "/to"), HTTPField("Cache-Control", "max-age=600")],
                           body: movedBody)
        }
        origin.handle("/moved") { [movedBody] _ in
            OriginResponse(status: 302, headers: [HTTPField("Location", "/to"), HTTPField("Cache-Control", "no-store")],
                           body: movedBody)
        }
        origin.handle("/to") { _ in .text("target", headers: [HTTPField("Cache-Control", "max-age=600")]) }
    }

    /// An ephemeral configuration without Foundation's own cache, so that a load without the
    /// layer goes to the origin every time, as one through the layer reaches the layer.
    private func plainConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.urlCache = nil
        return configuration
    }

    /// A session with the layer and `delegate`, named to `inject` when `named`; otherwise injected
    /// with `inject(into:using:)`, which does not know the delegate (naming it nil would tell the
    /// layer the session has none).
    private func layerSession(delegate: (any URLSessionDelegate)?, named: Bool = true) -> URLSession {
        let configuration = plainConfiguration()
        if named {
            CachingURLProtocol.inject(into: configuration, using: self.configuration, delegate: delegate)
        } else {
            CachingURLProtocol.inject(into: configuration, using: self.configuration)
        }
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    // MARK: A4

    /// A stored 301, reported from the cache the second time: the system follows it to the
    /// target (a hit), so the app gets the target twice and the origin saw each URL once.
    func testA4_aRedirectReportedFromTheCacheIsFollowedByTheSystem() async throws {
        for _ in 0..<2 {
            let (data, response) = try await get("/stored")
            XCTAssertEqual(response.statusCode, 200)
            XCTAssertEqual(response.url?.path, "/to")
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "target")
        }
        XCTAssertEqual(origin.requestCount(path: "/stored"), 1, "the second redirect came from the cache")
        XCTAssertEqual(origin.requestCount(path: "/to"), 1)
    }

    /// With a delegate that follows, named to `inject`: the system asks it about the redirect
    /// reported from the cache as about the one from the origin.
    func testA4_theDelegateIsAskedAboutARedirectReportedFromTheCache() async throws {
        let delegate = AppDelegate()
        let session = layerSession(delegate: delegate)
        defer { session.finishTasksAndInvalidate() }
        for _ in 0..<2 {
            let response = await runDelegateTask(request("/stored"), in: session, delegate: delegate)
            XCTAssertEqual(response?.statusCode, 200)
            XCTAssertEqual(response?.url?.path, "/to")
        }
        XCTAssertEqual(delegate.calls.filter { $0.hasPrefix("redirect 301 to \(origin.url("/to"))") }.count, 2, "\(delegate.calls)")
        XCTAssertEqual(origin.requestCount(path: "/stored"), 1)
    }

    // MARK: A15

    /// A delegate that refuses, named to `inject`: the task ends with the 3xx and its body, as it
    /// does without the layer — the first time from the origin, the second from the cache.
    func testA15_aRefusedRedirectEndsWithThe3xxAndItsBodyWhenTheDelegateWasNamed() async throws {
        var observed: [[String]] = []
        for withLayer in [false, true] {
            let delegate = AppDelegate(followsRedirects: false)
            let session: URLSession
            if withLayer {
                session = layerSession(delegate: delegate)
            } else {
                session = URLSession(configuration: plainConfiguration(), delegate: delegate, delegateQueue: nil)
            }
            defer { session.finishTasksAndInvalidate() }
            var results: [String] = []
            for _ in 0..<2 {
                let response = await runDelegateTask(request("/stored"), in: session, delegate: delegate)
                results.append("\(response?.statusCode ?? 0) \(response?.url?.path ?? "-")")
            }
            results.append(String(decoding: delegate.received, as: UTF8.self))
            observed.append(results + delegate.calls)
        }
        let moved = String(decoding: movedBody, as: UTF8.self)
        XCTAssertEqual(Array(observed[0].prefix(3)), ["301 /stored", "301 /stored", moved + moved], "without the layer")
        XCTAssertEqual(observed[1], observed[0], "with the layer, the delegate named: the same answers and delegate calls")
    }

    /// A delegate that refuses, not named to `inject`: the load was reported and then ended as
    /// cancelled, so the task ends with an error, not the 3xx (the documented limit,
    /// Docs/transparency.md, "A refused redirect on Apple").
    func testA15_aRefusedRedirectEndsWithAnErrorWhenTheDelegateWasNotNamed() async throws {
        let delegate = AppDelegate(followsRedirects: false)
        let session = layerSession(delegate: delegate, named: false)
        defer { session.finishTasksAndInvalidate() }
        _ = await runDelegateTask(request("/stored"), in: session, delegate: delegate)
        XCTAssertTrue(delegate.calls.contains { $0.hasPrefix("redirect 301") }, "the delegate was asked: \(delegate.calls)")
        XCTAssertTrue(delegate.calls.last?.hasPrefix("complete error") == true, "ends with an error: \(delegate.calls)")
    }

    // MARK: M3

    /// A thousand followed redirects through a session whose delegate — named, so the 3xx
    /// follows each report at once — decides on another thread a moment later: every task ends
    /// with the target. Half the redirects come from the origin (a 302 not stored), half from
    /// the cache.
    func testM3_aFollowedRedirectNeverEndsWithThe3xxWhileTheDelegateDecides() async throws {
        let delegate = FollowsLaterDelegate()
        let session = layerSession(delegate: delegate)
        defer { session.finishTasksAndInvalidate() }
        let failures = await loadTheTargetRepeatedly(in: session, runs: 1_000)
        XCTAssertEqual(failures.count, 0, "\(failures.count) of 1000 did not end with the target: \(failures.prefix(10))")
        XCTAssertEqual(delegate.asked.withLock { $0 }, 1_000, "the delegate decided each redirect")
    }

    /// The same without a delegate: each report is followed by the load ending cancelled, and the
    /// system follows; no task ends with the 3xx or an error.
    func testM3_aFollowedRedirectNeverEndsWithThe3xxWithoutADelegate() async throws {
        let session = layerSession(delegate: nil)
        defer { session.finishTasksAndInvalidate() }
        let failures = await loadTheTargetRepeatedly(in: session, runs: 1_000)
        XCTAssertEqual(failures.count, 0, "\(failures.count) of 1000 did not end with the target: \(failures.prefix(10))")
    }

    /// Loads `/moved?run=N` (from the origin) and `/stored` (from the cache after the first)
    /// in turn, `runs` times; returns what each load that did not end with the target got.
    private func loadTheTargetRepeatedly(in session: URLSession, runs: Int) async -> [String] {
        var failures: [String] = []
        for run in 0..<runs {
            let path = run.isMultiple(of: 2) ? "/moved?run=\(run)" : "/stored"
            do {
                let (data, response) = try await session.data(for: URLRequest(url: origin.url(path)))
                let http = response as? HTTPURLResponse
                if http?.statusCode != 200 || http?.url?.path != "/to" || data != Data("target".utf8) {
                    failures.append("\(run) \(path): \(http?.statusCode ?? 0) \(http?.url?.path ?? "-") \(data.count) bytes")
                }
            } catch {
                failures.append("\(run) \(path): \(error)")
            }
        }
        return failures
    }
}

/// A delegate that follows every redirect, deciding on another queue a moment after it is asked:
/// the window in which the session has the report and the 3xx that followed it.
private final class FollowsLaterDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    let asked = Locked(0)

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        asked.withLock { $0 += 1 }
        DispatchQueue.global().async { completionHandler(request) }
    }
}
#endif
