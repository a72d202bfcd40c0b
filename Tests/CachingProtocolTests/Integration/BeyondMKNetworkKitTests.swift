import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// What a modern cache adds beyond MKNetworkKit: Cache-Status, Vary, offline and stale-if-error,
/// stale-while-revalidate, collapsing, "cached then fresh", observability, the RFC preset.
final class BeyondMKNetworkKitTests: CachingTestCase {
    private let day: TimeInterval = 86_400

    private func status(_ response: HTTPURLResponse) -> String? {
        response.value(forHTTPHeaderField: "Cache-Status")
    }

    // MARK: Cache-Status

    func testCacheStatusNamesWhatHappened() async throws {
        let resource = OriginResource(body: Data("v1".utf8), etag: "\"1\"", lastModified: .none)
        origin.serve("/status", resource)
        let (_, miss) = try await get("/status")
        XCTAssertEqual(status(miss), "CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=86400")
        clock.advance(by: 100)
        let (_, hit) = try await get("/status")
        XCTAssertEqual(status(hit), "CachingProtocol; hit")
        XCTAssertEqual(hit.value(forHTTPHeaderField: "Age"), "100", "the time it spent in the cache (RFC 9111 §5.1)")
        clock.advance(by: day)
        let (_, revalidated) = try await get("/status")
        XCTAssertEqual(status(revalidated), "CachingProtocol; fwd=stale; fwd-status=304; stored; ttl=86400")
        let (_, reload) = try await get("/status", cachePolicy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(status(reload), "CachingProtocol; fwd=request; fwd-status=200; stored; ttl=86400")
    }

    func testCacheStatusCanBeSwitchedOff() async throws {
        var configuration = makeConfiguration()
        configuration.addsCacheStatus = false
        installSession(configuration)
        origin.handle("/quiet") { _ in .text("q", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        let (_, miss) = try await get("/quiet")
        let (_, hit) = try await get("/quiet")
        XCTAssertNil(status(miss))
        XCTAssertNil(status(hit))
        XCTAssertEqual(originMethods("/quiet"), ["GET"])
    }

    // MARK: Vary

    func testVaryKeepsOneVariantPerLanguage() async throws {
        origin.handle("/greeting") { request in
            let language = request.header("Accept-Language") ?? "none"
            return .text("hello in \(language)", headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("Vary", "Accept-Language")])
        }
        let (english, _) = try await get("/greeting", headers: ["Accept-Language": "en"])
        let (french, frenchResponse) = try await get("/greeting", headers: ["Accept-Language": "fr"])
        let (englishAgain, englishHit) = try await get("/greeting", headers: ["Accept-Language": "en"])
        let (frenchAgain, _) = try await get("/greeting", headers: ["Accept-Language": "fr"])
        XCTAssertEqual(String(decoding: english, as: UTF8.self), "hello in en")
        XCTAssertEqual(String(decoding: french, as: UTF8.self), "hello in fr")
        XCTAssertEqual(englishAgain, english)
        XCTAssertEqual(frenchAgain, french)
        XCTAssertEqual(originMethods("/greeting"), ["GET", "GET"], "two variants, each fetched once")
        XCTAssertTrue(status(frenchResponse)?.contains("fwd=vary-miss") ?? false, status(frenchResponse) ?? "")
        XCTAssertTrue(status(englishHit)?.contains("hit") ?? false)
    }

    func testVaryStarIsNeverReused() async throws {
        origin.handle("/star") { _ in .text("*", headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("Vary", "*")]) }
        _ = try await get("/star")
        _ = try await get("/star")
        XCTAssertEqual(originMethods("/star"), ["GET", "GET"])
    }

    // MARK: Offline and stale-if-error

    func testOriginGoneServesTheStaleEntryMarkedStale() async throws {
        let body = Data.pattern(4_000)
        origin.handle("/offline") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=60")], body: body) }
        _ = try await get("/offline")
        origin.stop()
        clock.advance(by: 3 * day)
        let (data, response) = try await get("/offline")
        XCTAssertEqual(data, body, "stale data beats an error")
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertTrue(status(response)?.contains("detail=stale-if-error") ?? false, status(response) ?? "")
        XCTAssertEqual(events.last?.outcome, .staleAfterError)

        clock.advance(by: 7 * day)
        do {
            _ = try await get("/offline")
            XCTFail("beyond the maximum staleness the error must reach the app")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .cannotConnectToHost)
        }
    }

    func testServerErrorServesTheStaleEntry() async throws {
        let healthy = Locked(true)
        origin.handle("/flaky") { _ in
            healthy.withLock { $0 } ? .text("good", headers: [HTTPField("Cache-Control", "max-age=60")])
                                    : OriginResponse(status: 503, body: Data("down".utf8))
        }
        _ = try await get("/flaky")
        healthy.withLock { $0 = false }
        clock.advance(by: 120)
        let (data, response) = try await get("/flaky")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "good")
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertTrue(status(response)?.contains("fwd-status=503") ?? false)
    }

    func testMustRevalidateIsNotServedStaleOnError() async throws {
        origin.handle("/strict") { _ in .text("s", headers: [HTTPField("Cache-Control", "max-age=60, must-revalidate")]) }
        _ = try await get("/strict")
        origin.stop()
        clock.advance(by: 120)
        // RFC 9111 §5.2.2.2: a disconnected cache answers 504 rather than the stale response.
        let (data, response) = try await get("/strict")
        XCTAssertEqual(response.statusCode, 504, "must-revalidate forbids serving stale")
        XCTAssertEqual(data, Data())
        XCTAssertEqual(status(response), "CachingProtocol; fwd=stale; detail=origin-unreachable")
    }

    func testOfflineModeAnswersOnlyFromTheCache() async throws {
        origin.handle("/kept") { _ in .text("kept", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        _ = try await get("/kept")
        configuration.isOffline = true
        clock.advance(by: 30 * day)
        let (data, response) = try await get("/kept")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "kept")
        XCTAssertEqual(status(response), "CachingProtocol; hit; ttl=\(60 - 30 * 86_400); detail=stale", "marked stale")
        do {
            _ = try await get("/never-fetched")
            XCTFail("offline and not stored")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .resourceUnavailable)
        }
        XCTAssertEqual(origin.requests.count, 1, "offline mode never touches the network")
        configuration.isOffline = false
    }

    func testOnlyIfCachedGetsA504WhenNothingIsStored() async throws {
        let (_, response) = try await get("/absent", headers: ["Cache-Control": "only-if-cached"])
        XCTAssertEqual(response.statusCode, 504)
        XCTAssertTrue(origin.requests.isEmpty)
    }

    // MARK: stale-while-revalidate

    /// A response that arrives already stale and has no validator is kept for requests that
    /// accept stale answers (RFC 9111 §4.2.4, `max-stale`): only they are answered with it.
    func testAResponseStaleOnArrivalAnswersALaterMaxStaleRequest() async throws {
        let fourMinutesAgo = IMFFixdate.string(from: clock.now.addingTimeInterval(-240))
        origin.handle("/old") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=120"), HTTPField("Date", fourMinutesAgo)],
                           body: Data("A".utf8))
        }
        _ = try await get("/old")
        let (plain, _) = try await get("/old")
        XCTAssertEqual(String(decoding: plain, as: UTF8.self), "A")
        XCTAssertEqual(originMethods("/old"), ["GET", "GET"], "a request that wants a fresh answer goes to the origin")
        let (stale, response) = try await get("/old", headers: ["Cache-Control": "max-stale=180"])
        XCTAssertEqual(String(decoding: stale, as: UTF8.self), "A")
        XCTAssertEqual(originMethods("/old").count, 2, "max-stale=180 accepts it: no request")
        XCTAssertEqual(status(response), "CachingProtocol; hit; ttl=-120; detail=stale")
        XCTAssertEqual(events.last?.outcome, .staleHit)
        _ = try await get("/old", headers: ["Cache-Control": "max-stale=60"])
        XCTAssertEqual(originMethods("/old").count, 3, "120 s stale is more than max-stale=60 accepts")
    }

    func testStaleWhileRevalidateAnswersAtOnceAndRefreshesInTheBackground() async throws {
        let resource = OriginResource(body: Data("first".utf8), lastModified: .none,
                                      headers: [HTTPField("Cache-Control", "max-age=10, stale-while-revalidate=60")])
        origin.serve("/swr", resource)
        _ = try await get("/swr")
        resource.update(body: Data("second".utf8))
        clock.advance(by: 30)

        let (data, response) = try await get("/swr")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "first", "answered at once from the stale entry")
        XCTAssertTrue(status(response)?.contains("detail=stale-while-revalidate") ?? false, status(response) ?? "")
        XCTAssertEqual(events.last?.outcome, .staleHit)

        let engine = Installation.engine(for: configuration)
        XCTAssertEqual(engine.exchanges.background.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(originMethods("/swr"), ["GET", "HEAD", "GET"], "the background revalidation found the change")
        let (refreshed, _) = try await get("/swr")
        XCTAssertEqual(String(decoding: refreshed, as: UTF8.self), "second")
        XCTAssertEqual(originMethods("/swr").count, 3)
    }

    // MARK: Collapsing

    private func concurrentGets(_ path: String, count: Int) async throws -> [Data] {
        let session: URLSession = self.session
        let url = origin.url(path)
        return try await withThrowingTaskGroup(of: Data.self) { group in
            for _ in 0..<count {
                group.addTask { try await session.data(from: url).0 }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    func testConcurrentIdenticalMissesShareOneOriginRequest() async throws {
        let body = Data.pattern(100_000)
        origin.handle("/popular") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=60")], body: body, fault: .stall(0.5))
        }
        let bodies = try await concurrentGets("/popular", count: 8)
        XCTAssertEqual(bodies.count, 8)
        XCTAssertTrue(bodies.allSatisfy { $0 == body }, "every caller got its own complete body")
        XCTAssertEqual(originMethods("/popular"), ["GET"], "eight concurrent callers, one origin request")
        XCTAssertEqual(configuration.statistics.collapsed, 7)
    }

    func testConcurrentRevalidationsShareOneHead() async throws {
        let body = Data.pattern(2_000)
        origin.handle("/shared-check") { request in
            if request.header("If-None-Match") == "\"c\"" {
                // Slow enough that every concurrent caller arrives while the HEAD is out.
                return OriginResponse(status: 304, headers: [HTTPField("ETag", "\"c\"")], fault: .stall(0.3))
            }
            return OriginResponse(headers: [HTTPField("ETag", "\"c\"")], body: body)
        }
        _ = try await get("/shared-check")
        clock.advance(by: day + 1)
        let bodies = try await concurrentGets("/shared-check", count: 6)
        XCTAssertTrue(bodies.allSatisfy { $0 == body })
        XCTAssertEqual(originMethods("/shared-check"), ["GET", "HEAD"], "six revalidations, one HEAD")
    }

    func testCollapsingCanBeSwitchedOff() async throws {
        var configuration = makeConfiguration()
        configuration.collapsesRequests = false
        installSession(configuration)
        origin.handle("/each") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=60")], body: Data("e".utf8), fault: .stall(0.3))
        }
        _ = try await concurrentGets("/each", count: 4)
        XCTAssertEqual(originMethods("/each").count, 4)
    }

    // MARK: Cached, then fresh

    private func collect(_ request: URLRequest) async throws -> [CachedThenFreshResponse] {
        var answers: [CachedThenFreshResponse] = []
        for try await answer in CachingURLProtocol.cachedThenFresh(for: request) {
            answers.append(answer)
        }
        return answers
    }

    func testCachedThenFreshYieldsTheStoredBodyThenTheChangedOne() async throws {
        let resource = OriginResource(body: Data("old".utf8), lastModified: .none)
        origin.serve("/twice", resource)

        let first = try await collect(request("/twice"))
        XCTAssertEqual(first.map(\.source), [.origin], "nothing stored: only the origin's answer")

        let unchanged = try await collect(request("/twice"))
        XCTAssertEqual(unchanged.map(\.source), [.cache(isStale: false)], "unchanged: the stored answer only")
        XCTAssertEqual(unchanged.first?.data, Data("old".utf8))
        XCTAssertEqual(originMethods("/twice"), ["GET", "HEAD"], "it always asks the origin")

        resource.update(body: Data("new".utf8))
        let changed = try await collect(request("/twice"))
        XCTAssertEqual(changed.map(\.source), [.cache(isStale: false), .origin])
        XCTAssertEqual(changed.map { String(decoding: $0.data, as: UTF8.self) }, ["old", "new"])
        XCTAssertEqual(changed.last?.response.statusCode, 200)
    }

    func testPlainCallersNeverGetTwoAnswers() throws {
        origin.serve("/once-only", OriginResource(body: Data("x".utf8), lastModified: .none))
        _ = try loadWithCompletionHandler(request("/once-only"))
        let calls = Locked(0)
        let done = expectation(description: "completion")
        session.dataTask(with: request("/once-only", cachePolicy: .reloadRevalidatingCacheData)) { _, _, _ in
            calls.withLock { $0 += 1 }
            done.fulfill()
        }.resume()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(calls.withLock { $0 }, 1)
    }

    // MARK: Observability

    func testEventsCountersAndBandwidth() async throws {
        let big = Data.pattern(256_000)
        origin.serve("/observed", OriginResource(body: big, etag: "\"o\"", lastModified: .none))
        _ = try await get("/observed")
        _ = try await get("/observed")
        clock.advance(by: day + 1)
        _ = try await get("/observed")

        let recorded = events
        XCTAssertEqual(recorded.map(\.outcome), [.fetched, .hit, .revalidatedNotModified])
        XCTAssertEqual(recorded.map(\.key), Array(repeating: "GET \(origin.url("/observed").absoluteString)", count: 3))
        XCTAssertEqual(recorded.map(\.upstreamMethods), [["GET"], [], ["HEAD"]])
        XCTAssertEqual(recorded.map(\.originStatus), [200, nil, 304])
        XCTAssertEqual(recorded.map(\.upstreamBytes), [big.count, 0, 0])
        XCTAssertEqual(recorded.map(\.deliveredBytes), [big.count, big.count, big.count])
        XCTAssertTrue(recorded.allSatisfy { $0.duration >= 0 && $0.duration < 10 })

        let statistics = configuration.statistics
        XCTAssertEqual(statistics.fetched, 1)
        XCTAssertEqual(statistics.hits, 1)
        XCTAssertEqual(statistics.revalidatedNotModified, 1)
        XCTAssertEqual(statistics.upstreamBytes, big.count)
        XCTAssertEqual(statistics.deliveredBytes, 3 * big.count)
        XCTAssertGreaterThan(try XCTUnwrap(statistics.estimatedBandwidth), 0)
    }

    // MARK: The RFC 9111 preset

    func testRFCPresetRevalidatesNoCacheEveryTimeAndSkipsImageHeuristics() async throws {
        var configuration = makeConfiguration()
        configuration.policy = .rfc9111
        installSession(configuration)
        origin.serve("/strict-etag", OriginResource(body: Data("e".utf8), etag: "\"e\"", lastModified: .none,
                                                   headers: [HTTPField("Cache-Control", "no-cache")]))
        origin.handle("/photo.png") { _ in OriginResponse(headers: [HTTPField("Content-Type", "image/png")], body: Data.pattern(500)) }
        for _ in 0..<3 {
            _ = try await get("/strict-etag")
            _ = try await get("/photo.png")
        }
        XCTAssertEqual(originMethods("/strict-etag"), ["GET", "HEAD", "HEAD"], "no-cache: validated on every use")
        XCTAssertEqual(originMethods("/photo.png"), ["GET", "GET", "GET"], "no heuristic image lifetime in the RFC preset")
    }

    func testRFCPresetUsesTheLastModifiedHeuristic() async throws {
        var configuration = makeConfiguration()
        configuration.policy = .rfc9111
        installSession(configuration)
        // Modified 100 minutes ago: 10 % gives 10 minutes of freshness.
        origin.serve("/lm", OriginResource(body: Data("l".utf8), etag: .none, lastModified: .fixed(clock.now.addingTimeInterval(-6000))))
        _ = try await get("/lm")
        clock.advance(by: 599)
        _ = try await get("/lm")
        XCTAssertEqual(originMethods("/lm"), ["GET"])
        clock.advance(by: 2)
        _ = try await get("/lm")
        XCTAssertEqual(originMethods("/lm"), ["GET", "HEAD"])
    }

    func testAgeHeaderShortensFreshness() async throws {
        origin.handle("/aged") { _ in .text("a", headers: [HTTPField("Cache-Control", "max-age=100"), HTTPField("Age", "90")]) }
        _ = try await get("/aged")
        clock.advance(by: 5)
        _ = try await get("/aged")
        clock.advance(by: 10)
        _ = try await get("/aged")
        XCTAssertEqual(originMethods("/aged"), ["GET", "GET"], "an Age of 90 leaves 10 s of a 100 s max-age")
    }
}
