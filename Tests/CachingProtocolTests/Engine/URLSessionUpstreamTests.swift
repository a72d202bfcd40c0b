import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Which upstream session carries a request: one per app session when the load says which, one
/// per settings otherwise; an app session's is released once the app let go of that session.
final class URLSessionUpstreamTests: LoaderRulesTestCase {
    private var origin: LoopbackOrigin!
    private var upstream: URLSessionUpstream!

    override func setUpWithError() throws {
        origin = try LoopbackOrigin()
        origin.handle("/a") { request in .text("a \(request.query ?? "")") }
        upstream = URLSessionUpstream(clock: { Date() }, leavingOut: { $0 is CachingURLProtocol.Type })
    }

    override func tearDown() {
        upstream.shutdown()
        origin.stop()
    }

    /// Sends a GET of `/a?query` for a load of `appSession` from a session with `settings`;
    /// returns the body as text.
    private func send(_ query: String, appSession: AppSession?, settings: SessionSettings = .standard) async throws -> String {
        let answered = XCTestExpectation(description: "answered")
        let result = Locked<Result<ReceivedResponse, Error>?>(nil)
        _ = upstream.send(URLRequest(url: origin.url("/a?\(query)")), from: settings, appSession: appSession, wholeBody: true,
                          listener: nil) { outcome in
            result.withLock { $0 = outcome }
            answered.fulfill()
        }
        await fulfillment(of: [answered], timeout: 20)
        return String(decoding: try XCTUnwrap(result.withLock { $0 }).get().body, as: UTF8.self)
    }

    /// The connections the origin saw the requests whose query starts with `prefix` on.
    private func connections(_ prefix: String) -> Set<Int> {
        Set(origin.requests.filter { ($0.query ?? "").hasPrefix(prefix) }.map(\.connectionID))
    }

    func testEachAppSessionHasConnectionsOfItsOwnReleasedWithIt() async throws {
        var first: URLSession? = URLSession(configuration: .default)
        let second = URLSession(configuration: .default)
        defer { second.invalidateAndCancel() }
        let firstSession = AppSession(first!)
        for round in 0..<2 {
            let body = try await send("first-\(round)", appSession: firstSession)
            XCTAssertEqual(body, "a first-\(round)")
            let secondBody = try await send("second-\(round)", appSession: AppSession(second))
            XCTAssertEqual(secondBody, "a second-\(round)")
            let sharedBody = try await send("shared-\(round)", appSession: nil)
            XCTAssertEqual(sharedBody, "a shared-\(round)")
        }
        XCTAssertEqual(upstream.sessionCounts.all, 3, "two app sessions' and one shared")
        XCTAssertEqual(upstream.sessionCounts.appSessions, 2)
        let (a, b, shared) = (connections("first"), connections("second"), connections("shared"))
        XCTAssertEqual(a.count, 1, "an app session's requests reuse its connection")
        XCTAssertEqual(b.count, 1)
        XCTAssertEqual(shared.count, 1)
        XCTAssertTrue(a.isDisjoint(with: b) && a.isDisjoint(with: shared) && b.isDisjoint(with: shared),
                      "connections of their own: \(a) \(b) \(shared)")

        // Dropped without invalidating: an invalidation holds the session until its queue ran it.
        first = nil
        XCTAssertTrue(firstSession.isGone, "the layer holds no app session")
        let afterwards = try await send("second-2", appSession: AppSession(second))
        XCTAssertEqual(afterwards, "a second-2")
        XCTAssertEqual(upstream.sessionCounts.all, 2, "the gone app session's upstream session is released at the next send")
        XCTAssertEqual(upstream.sessionCounts.appSessions, 1)
        let gone = try await send("first-gone", appSession: firstSession)
        XCTAssertEqual(gone, "a first-gone", "a gone session's load uses the shared one")
        XCTAssertEqual(upstream.sessionCounts.all, 2)
    }

    /// An app session let go of while a transfer through its upstream session runs: the upstream
    /// session is released when that transfer ends, with no other send.
    func testAGoneAppSessionsUpstreamSessionIsReleasedWhenItsLastTransferEnds() async throws {
        let gate = OriginGate()
        defer { gate.open() }
        origin.handle("/held") { _ in
            gate.pass()
            return .text("held")
        }
        var session: URLSession? = URLSession(configuration: .default)
        let appSession = AppSession(session!)
        let warmUp = try await send("warm-up", appSession: appSession)
        XCTAssertEqual(warmUp, "a warm-up")
        XCTAssertEqual(upstream.sessionCounts.appSessions, 1, "kept while its app session lives, between transfers")

        let answered = XCTestExpectation(description: "answered")
        let body = Locked<String?>(nil)
        _ = upstream.send(URLRequest(url: origin.url("/held")), from: .standard, appSession: appSession, wholeBody: true,
                          listener: nil) { outcome in
            body.withLock { $0 = (try? outcome.get()).map { String(decoding: $0.body, as: UTF8.self) } }
            answered.fulfill()
        }
        XCTAssertTrue(gate.waitUntilWaiting(1, timeout: 20), "the request reached the origin")
        session = nil
        XCTAssertTrue(appSession.isGone, "the layer holds no app session")
        XCTAssertEqual(upstream.sessionCounts.appSessions, 1, "kept while a transfer through it runs")

        gate.open()
        await fulfillment(of: [answered], timeout: 20)
        XCTAssertEqual(body.withLock { $0 }, "held", "the running transfer finished")
        XCTAssertEqual(upstream.sessionCounts.appSessions, 0, "released when its last transfer ended, with no other send")
        XCTAssertEqual(upstream.sessionCounts.all, 0)
    }

    /// At most `maximumAppSessions` app sessions' and `maximumSharedSessions` shared upstream
    /// sessions are kept, each kind apart: the least recently used one goes.
    func testEachKindKeepsAtMostItsLimit() async throws {
        let sessions = (0...URLSessionUpstream.maximumAppSessions).map { _ in URLSession(configuration: .default) }
        defer { for session in sessions { session.invalidateAndCancel() } }
        for (number, session) in sessions.enumerated() {
            let body = try await send("app-\(number)", appSession: AppSession(session))
            XCTAssertEqual(body, "a app-\(number)")
        }
        XCTAssertEqual(upstream.sessionCounts.appSessions, URLSessionUpstream.maximumAppSessions)
        for number in 0...URLSessionUpstream.maximumSharedSessions {
            let configuration = URLSessionConfiguration.default
            configuration.timeoutIntervalForRequest = Double(30 + number)
            let body = try await send("shared-\(number)", appSession: nil, settings: SessionSettings(configuration))
            XCTAssertEqual(body, "a shared-\(number)")
        }
        XCTAssertEqual(upstream.sessionCounts.all - upstream.sessionCounts.appSessions, URLSessionUpstream.maximumSharedSessions)
        XCTAssertEqual(upstream.sessionCounts.appSessions, URLSessionUpstream.maximumAppSessions, "the other kind's limit")
    }
}
