import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An app's sessions get the connections they get without the layer: each session
/// `httpMaximumConnectionsPerHost` per host, no more and no fewer, so a session's fast requests
/// never wait behind another session's slow ones. The same app code runs without and with the
/// layer; slow responses are held at the origin by a gate (no sleeping), and what is asserted is
/// counted: the requests the origin holds at once, the connections it saw, and that every fast
/// request completed while the slow ones were still held. The fast requests' latencies are
/// printed for both runs (`fast … p50 … p90 …`), not asserted.
final class ConnectionConcurrencyPairTests: CachingTestCase {
    private static let limit = 2

    /// A session configuration of the kind the app uses: `limit` connections per host. From
    /// `.default`, so every session shares the cookie jar and credential storage, and their
    /// settings are equal (ephemeral configurations each have a jar of their own, which would
    /// give each session an upstream session of its own anyway).
    private func appConfiguration(withLayer: Bool, caching: CachingConfiguration) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        configuration.httpMaximumConnectionsPerHost = Self.limit
        configuration.timeoutIntervalForRequest = 60
        if withLayer { CachingURLProtocol.inject(into: configuration, using: caching) }
        return configuration
    }

    /// Starts a completion-handler GET of `url` on `session`; `done` is fulfilled with its body.
    private func startGet(_ url: URL, on session: URLSession, bodies: Locked<[String: String]>,
                          done: XCTestExpectation) {
        session.dataTask(with: url) { data, response, error in
            let outcome = error.map { "error \(($0 as? URLError)?.code.rawValue ?? -1)" }
                ?? "\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data ?? Data(), as: UTF8.self))"
            bodies.withLock { $0[url.query ?? url.path] = outcome }
            done.fulfill()
        }.resume()
    }

    /// Clears the origin's log and makes it hold every `/slow` response at a new gate, which the
    /// caller opens.
    private func holdingSlowResponses() -> OriginGate {
        origin.resetLog()
        let gate = OriginGate()
        origin.handle("/slow") { request in
            gate.pass()
            return .text("slow \(request.query ?? "")", headers: [HTTPField("Cache-Control", "max-age=60")])
        }
        return gate
    }

    /// Two sessions each load `limit` slow responses, which the origin holds; meanwhile a third
    /// session of the same configuration loads fast ones. Without the layer each session has
    /// its own connections: all four slow requests reach the origin, and every fast request is
    /// answered while they are held. Through the layer the same must hold (before: the three
    /// sessions shared one upstream session with `limit` connections, the origin held 2 slow
    /// requests, and the fast ones queued behind the slow ones until those were released).
    func testASessionsFastRequestsDoNotWaitBehindAnotherSessionsSlowOnes() async throws {
        origin.handle("/fast") { request in
            .text("fast \(request.query ?? "")", headers: [HTTPField("Cache-Control", "max-age=60")])
        }
        var report: [String] = []
        for withLayer in [false, true] {
            let run = withLayer ? "with" : "without"
            let gate = holdingSlowResponses()
            defer { gate.open() }
            let caching = makeConfiguration()
            let sessions = (0..<3).map { _ in URLSession(configuration: appConfiguration(withLayer: withLayer, caching: caching)) }
            defer { for session in sessions { session.invalidateAndCancel() } }
            let bodies = Locked<[String: String]>([:])

            // The slow loads: `limit` per slow session, each a URL of its own.
            let slowDone = expectation(description: "\(run): slow loads")
            slowDone.expectedFulfillmentCount = 2 * Self.limit
            for (index, session) in sessions.prefix(2).enumerated() {
                for number in 0..<Self.limit {
                    startGet(origin.url("/slow?\(run)-\(index)-\(number)"), on: session, bodies: bodies, done: slowDone)
                }
            }
            let heldAtOnce = gate.waitUntilWaiting(2 * Self.limit, timeout: 10)
            XCTAssertTrue(heldAtOnce, "\(run): every slow request reaches the origin (held: \(gate.waitingCount) of \(2 * Self.limit))")
            XCTAssertEqual(gate.waitingCount, 2 * Self.limit, run)

            // The fast loads, on the third session, while the slow ones are held.
            var latencies: [Double] = []
            for number in 0..<8 {
                let started = DispatchTime.now()
                let fastDone = XCTestExpectation(description: "\(run): fast \(number)")
                startGet(origin.url("/fast?\(run)-\(number)"), on: sessions[2], bodies: bodies, done: fastDone)
                let outcome = await XCTWaiter().fulfillment(of: [fastDone], timeout: 10)
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e6)
                XCTAssertEqual(outcome, .completed, "\(run): fast request \(number) answered while the slow ones are held")
                guard outcome == .completed else { break }
                XCTAssertEqual(bodies.withLock { $0["\(run)-\(number)"] }, "200 fast \(run)-\(number)")
            }
            XCTAssertEqual(gate.waitingCount, 2 * Self.limit, "\(run): the slow requests were still held meanwhile")

            gate.open()
            await fulfillment(of: [slowDone], timeout: 20)
            for index in 0..<2 {
                for number in 0..<Self.limit {
                    let name = "\(run)-\(index)-\(number)"
                    XCTAssertEqual(bodies.withLock { $0[name] }, "200 slow \(name)", run)
                }
            }
            XCTAssertEqual(origin.requestCount(path: "/slow"), 2 * Self.limit, run)
            XCTAssertEqual(origin.requestCount(path: "/fast"), latencies.count, run)
            let sorted = latencies.sorted()
            report.append("\(run) the layer: fast p50 \(Self.format(sorted[sorted.count / 2])) ms, "
                          + "p90 \(Self.format(sorted[sorted.count * 9 / 10])) ms, peak connections \(origin.peakOpenConnections)")
        }
        print("fast requests while slow ones are held (\(Self.limit) connections per session):\n" + report.joined(separator: "\n"))
    }

    /// One session loads more slow responses than its connection limit: the origin never sees
    /// more than `limit` connections from it, with the layer as without it.
    func testOneSessionNeverGetsMoreConnectionsThanItsLimit() async throws {
        for withLayer in [false, true] {
            let run = withLayer ? "with" : "without"
            let gate = holdingSlowResponses()
            defer { gate.open() }
            let session = URLSession(configuration: appConfiguration(withLayer: withLayer, caching: makeConfiguration()))
            defer { session.invalidateAndCancel() }
            let bodies = Locked<[String: String]>([:])
            let done = expectation(description: "\(run): loads")
            done.expectedFulfillmentCount = 3 * Self.limit
            for number in 0..<(3 * Self.limit) {
                startGet(origin.url("/slow?\(run)-\(number)"), on: session, bodies: bodies, done: done)
            }
            XCTAssertTrue(gate.waitUntilWaiting(Self.limit, timeout: 10), run)
            gate.open()
            await fulfillment(of: [done], timeout: 20)
            for number in 0..<(3 * Self.limit) {
                XCTAssertEqual(bodies.withLock { $0["\(run)-\(number)"] }, "200 slow \(run)-\(number)", run)
            }
            XCTAssertLessThanOrEqual(origin.peakOpenConnections, Self.limit, "\(run): connections open at once")
            XCTAssertEqual(origin.requestCount(path: "/slow"), 3 * Self.limit, run)
        }
    }

    private static func format(_ milliseconds: Double) -> String {
        String(format: "%.1f", milliseconds)
    }
}
