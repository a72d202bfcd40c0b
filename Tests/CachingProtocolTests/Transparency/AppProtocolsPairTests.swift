import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol
#if os(macOS) || os(Linux)
@testable import CacheTestTool

/// An app's own URLProtocols in `protocolClasses` — a stub, Mocker's only class, a logger — keep
/// working with the layer injected: the same app code without and with it sees the same answers,
/// and the stub answers or the logger sees the same requests.
final class AppProtocolsPairTests: CachingTestCase {
    private typealias Stub = AppProtocols.Stub
    private typealias Logger = AppProtocols.Logger

    override func setUpWithError() throws {
        try super.setUpWithError()
        resetAppProtocols()
    }

    override func tearDownWithError() throws {
        resetAppProtocols()
        try super.tearDownWithError()
    }

    private func resetAppProtocols() {
        Stub.routes.change { $0 = [:] }
        Stub.answered.change { $0 = [] }
        Logger.seen.change { $0 = [] }
        Logger.cutsBodyAfter.change { $0 = nil }
    }

    private func pair() -> TransparencyPair {
        TransparencyPair(origin: origin)
    }

    /// GETs `paths` one after the other with completion handlers: "status body" of each.
    private func getAll(_ paths: [String], in session: URLSession) async -> [String] {
        var results: [String] = []
        for path in paths {
            do {
                let (data, response) = try await session.data(from: origin.url(path))
                results.append("\((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))")
            } catch {
                results.append("error \((error as? URLError)?.code.rawValue ?? -1)")
            }
        }
        return results
    }

    private func stub(_ paths: [String], body: String = "stubbed", headers: [String: String] = [:]) {
        Stub.routes.change { routes in
            for path in paths { routes[path] = Stub.Canned(headers: headers, body: Data(body.utf8)) }
        }
    }

    // MARK: Stubs

    /// OHHTTPStubs' way: the stub put first in the configuration, then the layer injected. The
    /// stub answers all five requests, and the origin sees none.
    func testAStubFirstInProtocolClassesBeforeInjectAnswersAsWithoutTheLayer() async throws {
        stub(["/stubbed"], headers: ["Cache-Control": "max-age=600"])
        let (without, with) = try await pair().observe(configure: { configuration in
            configuration.protocolClasses = [Stub.self] + (configuration.protocolClasses ?? [])
        }, caching: makeConfiguration()) { session, _ in
            Stub.answered.change { $0 = [] }
            let results = await getAll(Array(repeating: "/stubbed", count: 5), in: session)
            return "\(results) stub answered \(Stub.answered.read(\.count))"
        }
        XCTAssertEqual(without.result, "\(Array(repeating: "200 stubbed", count: 5)) stub answered 5", "\(without)")
        XCTAssertEqual(without.originTraffic, [])
        XCTAssertEqual(with, without)
    }

    /// The stub put first after the layer was injected: it still answers, and requests it
    /// declines go through the layer (one of them twice: the second is a hit).
    func testAStubPutFirstAfterInjectAnswersAsWithoutTheLayer() async throws {
        stub(["/stubbed"])
        origin.handle("/real") { _ in .text("real", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        var observed: [String] = []
        var traffic: [[String]] = []
        for withLayer in [false, true] {
            origin.resetLog()
            Stub.answered.change { $0 = [] }
            let sessionConfiguration = URLSessionConfiguration.ephemeral
            if withLayer { CachingURLProtocol.inject(into: sessionConfiguration, using: configuration) }
            sessionConfiguration.protocolClasses = [Stub.self] + (sessionConfiguration.protocolClasses ?? [])
            let session = URLSession(configuration: sessionConfiguration)
            defer { session.finishTasksAndInvalidate() }
            let results = await getAll(["/stubbed", "/real", "/stubbed", "/real"], in: session)
            observed.append("\(results) stub answered \(Stub.answered.read(\.count))")
            traffic.append(origin.requests.map(\.target))
        }
        XCTAssertEqual(observed[0], "[\"200 stubbed\", \"200 real\", \"200 stubbed\", \"200 real\"] stub answered 2")
        XCTAssertEqual(observed[1], observed[0])
        XCTAssertEqual(traffic[0], ["/real", "/real"])
        XCTAssertEqual(traffic[1], ["/real"], "the second /real was a hit: the layer sat behind the stub")
    }

    /// OHHTTPStubs' and netfox's other way: they swizzle `URLSessionConfiguration.default`, so
    /// its list starts with their class, and so does every configuration made from it. Here a
    /// stand-in for the swizzled `.default` (`SessionSettings.defaultProtocolClasses`, as corelibs
    /// cannot be swizzled): the stub is not taken for one of Foundation's classes, the layer goes
    /// after it, and it answers all five requests as without the layer (before: the layer went
    /// first, the stub answered its upstream request once, and the cache answered four).
    func testAStubASwizzledDefaultListsStaysAheadOfTheLayer() async throws {
        stub(["/stubbed"], headers: ["Cache-Control": "max-age=600"])
        let unswizzled = SessionSettings.defaultProtocolClasses.withLock { $0 }
        SessionSettings.defaultProtocolClasses.withLock { $0 = { [Stub.self] + unswizzled() } }
        defer { SessionSettings.defaultProtocolClasses.withLock { $0 = unswizzled } }
        let swizzledDefault = SessionSettings.defaultProtocolClasses.withLock { $0 }()
        XCTAssertTrue(swizzledDefault.first == Stub.self)
        XCTAssertEqual(SessionSettings.foundationProtocolClasses.map { ObjectIdentifier($0) }, unswizzled().map { ObjectIdentifier($0) },
                       "Foundation's classes are Foundation's alone")

        let (without, with) = try await pair().observe(configure: { configuration in
            configuration.protocolClasses = swizzledDefault
        }, caching: makeConfiguration()) { session, _ in
            Stub.answered.change { $0 = [] }
            let results = await getAll(Array(repeating: "/stubbed", count: 5), in: session)
            let order = (session.configuration.protocolClasses ?? []).prefix(2).map { $0 is CachingURLProtocol.Type ? "layer" : "\($0)" }
            return "\(results) stub answered \(Stub.answered.read(\.count)) first \(order.first ?? "-")"
        }
        XCTAssertEqual(without.result, "\(Array(repeating: "200 stubbed", count: 5)) stub answered 5 first \(Stub.self)", "\(without)")
        XCTAssertEqual(with, without)

        // A Mocker-style list made from it (the stub alone): the cache's own requests still end
        // with Foundation's classes, not with the stub taken for them.
        let mockerStyle = URLSessionConfiguration.default
        mockerStyle.protocolClasses = [Stub.self]
        let upstreamClasses = SessionSettings(mockerStyle).upstreamConfiguration { $0 is CachingURLProtocol.Type }.protocolClasses ?? []
        XCTAssertEqual(upstreamClasses.map { ObjectIdentifier($0) }, ([Stub.self] + unswizzled()).map { ObjectIdentifier($0) })
    }

    /// Mocker's way: the mock is the session's only protocol class. It answers everything; the
    /// layer, put after it, never sees a request.
    func testAMockerStyleOnlyClassAnswersEverythingAsWithoutTheLayer() async throws {
        stub(["/users", "/users/1", "/config"], body: "mocked", headers: ["Cache-Control": "max-age=600"])
        let (without, with) = try await pair().observe(configure: { configuration in
            configuration.protocolClasses = [Stub.self]
        }, caching: makeConfiguration()) { session, _ in
            Stub.answered.change { $0 = [] }
            let results = await getAll(["/users", "/users/1", "/config", "/users"], in: session)
            return "\(results) mock answered \(Stub.answered.read(\.count))"
        }
        XCTAssertEqual(without.result, "\(Array(repeating: "200 mocked", count: 4)) mock answered 4", "\(without)")
        XCTAssertEqual(without.originTraffic, [])
        XCTAssertEqual(with, without)
    }

    // MARK: Loggers

    /// netfox's way: a logger first, which forwards every request through a session of its own.
    /// It sees all seven requests (GETs, a repeated one, a POST) with the layer as without it.
    func testALoggerFirstSeesEveryRequestAsWithoutTheLayer() async throws {
        origin.handle("/fresh") { _ in .text("fresh", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/plain") { _ in .text("plain") }
        origin.handle("/form") { _ in .text("posted") }
        let (without, with) = try await pair().observe(configure: { configuration in
            configuration.protocolClasses = [Logger.self] + (configuration.protocolClasses ?? [])
        }, caching: makeConfiguration()) { session, _ in
            Logger.seen.change { $0 = [] }
            var results = await getAll(["/fresh", "/fresh", "/plain", "/fresh", "/plain", "/plain"], in: session)
            var post = URLRequest(url: origin.url("/form"))
            post.httpMethod = "POST"
            post.httpBody = Data("a=1".utf8)
            let (data, _) = try await session.data(for: post)
            results.append(String(decoding: data, as: UTF8.self))
            return "\(results) logger saw \(Logger.seen.read { $0 })"
        }
        XCTAssertEqual(without.originTraffic.count, 7, "\(without)")
        XCTAssertTrue(without.result.hasSuffix("logger saw [\"GET /fresh\", \"GET /fresh\", \"GET /plain\", \"GET /fresh\", "
                                               + "\"GET /plain\", \"GET /plain\", \"POST /form\"]"), without.result)
        XCTAssertEqual(with, without)
    }

    /// The issue's truncated body: a logger that hands a body on in pieces, in front of a session
    /// with settings of its own. A completion handler gets only the last piece through it
    /// (Docs/foundation-facts.md, L10), with or without the layer; a delegate then gets the whole
    /// body. Before, the layer (in front of the logger) stored that last piece and served it to
    /// the delegate.
    func testABodyALoggerHandsOnInPiecesIsNotStoredTruncated() async throws {
        let body = Data.pattern(512 << 10, seed: 9)
        origin.handle("/big") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body,
                           transfer: .chunked(chunkSize: 16 << 10))
        }
        let (without, with) = try await pair().observe(configure: { configuration in
            configuration.httpAdditionalHeaders = ["X-App": "1"]
            configuration.protocolClasses = [Logger.self] + (configuration.protocolClasses ?? [])
        }, caching: makeConfiguration()) { session, delegate in
            let whole: Data = await withCheckedContinuation { continuation in
                session.dataTask(with: origin.url("/big")) { data, _, _ in continuation.resume(returning: data ?? Data()) }.resume()
            }
            _ = await runDelegateTask(URLRequest(url: origin.url("/big")), in: session, delegate: delegate)
            return "completion handler: \(whole == body ? "whole" : whole.count < body.count ? "a part" : "\(whole.count) bytes"), "
                + "delegate: \(delegate.received == body ? "whole" : "\(delegate.received.count) bytes")"
        }
        XCTAssertEqual(without.result, "completion handler: a part, delegate: whole", "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertEqual(configuration.statistics.fetched, 0, "the logger loaded both; the layer stored nothing")
    }
}
#endif
