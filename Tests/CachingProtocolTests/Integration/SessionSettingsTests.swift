import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A session configuration's `httpAdditionalHeaders` and `timeoutIntervalForRequest` reach the
/// origin through the cache (on Linux, Foundation adds them only in its own HTTP protocol, which
/// a request taken by a URLProtocol never reaches).
final class SessionSettingsTests: CachingTestCase {
    private func session(headers: [String: String], timeout: TimeInterval = 60) -> URLSession {
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.httpAdditionalHeaders = headers
        sessionConfiguration.timeoutIntervalForRequest = timeout
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration)
        return URLSession(configuration: sessionConfiguration)
    }

    func testAdditionalHeadersReachTheOriginAndCountAsCredentials() async throws {
        origin.handle("/me") { request in
            .text("hello \(request.header("Authorization") ?? "nobody")", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        let alice = session(headers: ["Authorization": "Bearer alice", "X-Client": "demo"])
        let (data, _) = try await alice.data(from: origin.url("/me"))
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "hello Bearer alice")
        let received = try XCTUnwrap(origin.requests(to: "/me").first)
        XCTAssertEqual(received.header("Authorization"), "Bearer alice")
        XCTAssertEqual(received.header("X-Client"), "demo")

        let (again, _) = try await alice.data(from: origin.url("/me"))
        XCTAssertEqual(String(decoding: again, as: UTF8.self), "hello Bearer alice")
        XCTAssertEqual(originMethods("/me"), ["GET"], "stored for Alice's credential, and a hit for it")
        let (anonymous, _) = try await get("/me")
        XCTAssertEqual(String(decoding: anonymous, as: UTF8.self), "hello nobody", "nothing of Alice's reaches another session")
    }

    func testPublicResponsesAreKeptPerCredential() async throws {
        origin.handle("/public") { request in
            .text("for \(request.header("Authorization") ?? "-")", headers: [HTTPField("Cache-Control", "public, max-age=600")])
        }
        let alice = session(headers: ["Authorization": "Bearer alice"])
        let bob = session(headers: ["Authorization": "Bearer bob"])
        for _ in 0..<2 {
            let (forAlice, _) = try await alice.data(from: origin.url("/public"))
            let (forBob, _) = try await bob.data(from: origin.url("/public"))
            XCTAssertEqual(String(decoding: forAlice, as: UTF8.self), "for Bearer alice")
            XCTAssertEqual(String(decoding: forBob, as: UTF8.self), "for Bearer bob")
        }
        XCTAssertEqual(originMethods("/public"), ["GET", "GET"], "one fetch per credential, then hits")
    }

    func testTheRequestsOwnHeaderWins() async throws {
        origin.handle("/which") { request in .text(request.header("X-Client") ?? "-") }
        var request = URLRequest(url: origin.url("/which"))
        request.setValue("request", forHTTPHeaderField: "X-Client")
        let (data, _) = try await session(headers: ["X-Client": "session"]).data(for: request)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "request")
    }

    /// Sessions that differ only in the header fields they add — a fresh token at each refresh —
    /// get the connections they get without the layer (one each: a session's connections are its
    /// own), each its own token; the layer keeps nothing for a session the app let go of (its
    /// upstream session goes once the session is freed: corelibs frees an invalidated session
    /// on its own queue, so the one just let go of may still be there at the next request).
    func testARefreshedSessionGetsTheConnectionsItGetsWithoutTheLayerAndTheOldOneIsReleased() async throws {
        origin.handle("/me") { request in .text("hello \(request.header("Authorization") ?? "nobody")") }
        let upstream = try XCTUnwrap(Installation.engine(for: configuration).upstream as? URLSessionUpstream)
        var connections: [Int] = []
        for withLayer in [false, true] {
            origin.resetLog()
            for token in ["one", "two", "three"] {
                let configuration = URLSessionConfiguration.default
                configuration.httpAdditionalHeaders = ["Authorization": "Bearer \(token)"]
                if withLayer { CachingURLProtocol.inject(into: configuration, using: self.configuration) }
                let refreshed = URLSession(configuration: configuration)
                let (data, _) = try await refreshed.data(from: origin.url("/me"))
                XCTAssertEqual(String(decoding: data, as: UTF8.self), "hello Bearer \(token)")
                refreshed.finishTasksAndInvalidate()
                if withLayer {
                    XCTAssertLessThanOrEqual(upstream.sessionCounts.appSessions, 2,
                                             "after \(token): none of a session before the one just let go of")
                }
            }
            XCTAssertEqual(origin.requests(to: "/me").compactMap { $0.header("Authorization") },
                           ["Bearer one", "Bearer two", "Bearer three"])
            connections.append(origin.connectionsAccepted)
        }
        XCTAssertEqual(connections[1], connections[0], "connections with the layer, against without")
    }

    /// Foundation's protocol classes are told by where they are defined, not by the list that
    /// holds them: each of `.default`'s own is, the caching protocol and an app's are not.
    func testFoundationsProtocolClassesAreToldByWhereTheyAreDefined() {
        let listed = URLSessionConfiguration.default.protocolClasses ?? []
        XCTAssertFalse(listed.isEmpty)
        for protocolClass in listed {
            XCTAssertTrue(SessionSettings.isFoundationProtocol(protocolClass), "\(protocolClass)")
        }
        XCTAssertFalse(SessionSettings.isFoundationProtocol(CachingURLProtocol.self))
        XCTAssertFalse(SessionSettings.isFoundationProtocol(SessionProbe.self))
        XCTAssertEqual(SessionSettings.foundationProtocolClasses.count, listed.count)
        XCTAssertEqual(SessionSettings.firstFoundationProtocolIndex(in: [SessionProbe.self, CachingURLProtocol.self] + listed), 2)
        XCTAssertNil(SessionSettings.firstFoundationProtocolIndex(in: [SessionProbe.self]))
    }

    /// Only the configurations injected (or used) most recently stay bound: a session of one
    /// dropped since loads through Foundation, with its own header fields, uncached.
    func testASessionWhoseBindingWasDroppedLoadsThroughFoundation() async throws {
        origin.handle("/me") { request in
            .text("hello \(request.header("Authorization") ?? "nobody")", headers: [HTTPField("Cache-Control", "public, max-age=600")])
        }
        let oldest = session(headers: ["Authorization": "Bearer oldest"])
        for index in 0..<SessionClasses.maximumBindings {
            session(headers: ["Authorization": "Bearer \(index)"]).finishTasksAndInvalidate()
        }
        for _ in 0..<2 {
            let (data, _) = try await oldest.data(from: origin.url("/me"))
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "hello Bearer oldest")
        }
        XCTAssertEqual(origin.requests(to: "/me").count, 2, "not cached: Foundation loaded both")
        XCTAssertEqual(configuration.statistics.fetched + configuration.statistics.hits, 0, "the layer answered nothing")
    }

    func testTheSessionTimeoutApplies() async throws {
        origin.handle("/slow") { _ in OriginResponse(body: Data("late".utf8), fault: .stall(5)) }
        let started = Date()
        do {
            _ = try await session(headers: [:], timeout: 1).data(from: origin.url("/slow"))
            XCTFail("expected a timeout")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .timedOut)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "the session's 1 s, not the origin's 5 s stall")
    }

    /// Equal settings share a class; the base class is `URLSession.shared`'s, whose upstream
    /// session consults the shared session's protocol classes, so even a plain configuration gets
    /// a class of its own.
    func testEqualSettingsShareAClass() {
        func injectedClass(_ headers: [String: String]?) -> AnyClass? {
            let configuration = URLSessionConfiguration.default
            configuration.httpAdditionalHeaders = headers
            CachingURLProtocol.inject(into: configuration)
            CachingURLProtocol.inject(into: configuration)   // twice: still one entry, first
            XCTAssertEqual(configuration.protocolClasses?.filter { $0 is CachingURLProtocol.Type }.count, 1)
            return configuration.protocolClasses?.first
        }
        let plain: AnyClass? = injectedClass(nil)
        XCTAssertTrue(plain != CachingURLProtocol.self)
        XCTAssertTrue(injectedClass(nil) == plain)
        let first: AnyClass? = injectedClass(["X-A": "1"])
        XCTAssertTrue(first != CachingURLProtocol.self)
        XCTAssertTrue(injectedClass(["X-A": "1"]) == first)
        XCTAssertTrue(injectedClass(["X-A": "2"]) != first)
    }

    /// The cache's own requests use the app session's credential storage, so default handling
    /// finds what the app's session would find; sessions with different storages never share an
    /// upstream session (settings differ), those with the default one do.
    func testTheCachesOwnSessionUsesTheAppSessionsCredentialStorage() throws {
        let app = URLSessionConfiguration.default
        let own = try XCTUnwrap(URLSessionConfiguration.ephemeral.urlCredentialStorage)
        XCTAssertFalse(own === app.urlCredentialStorage, "an ephemeral configuration's storage is one of its own")
        app.urlCredentialStorage = own
        let upstream = SessionSettings(app).upstreamConfiguration { $0 is CachingURLProtocol.Type }
        XCTAssertTrue(upstream.urlCredentialStorage === own)
        let plain = SessionSettings(URLSessionConfiguration.default)
        XCTAssertTrue(plain.upstreamConfiguration { $0 is CachingURLProtocol.Type }.urlCredentialStorage
                        === URLSessionConfiguration.default.urlCredentialStorage)
        XCTAssertNotEqual(SessionSettings(app), plain)
        XCTAssertEqual(plain, .standard)
        let none = URLSessionConfiguration.default
        none.urlCredentialStorage = nil
        XCTAssertNil(SessionSettings(none).upstreamConfiguration { $0 is CachingURLProtocol.Type }.urlCredentialStorage)
        XCTAssertNotEqual(SessionSettings(none), plain)
    }
}

/// A protocol class of the test's own (an app's, for `isFoundationProtocol`).
private final class SessionProbe: URLProtocol {}
