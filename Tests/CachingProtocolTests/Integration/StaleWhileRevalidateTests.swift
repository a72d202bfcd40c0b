import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `stale-while-revalidate`: the stale answer at once and the refresh in the background; a response stale on arrival kept for `max-stale`.
final class StaleWhileRevalidateTests: CachingTestCase {
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
        XCTAssertEqual(cacheStatus(response), "CachingProtocol; hit; ttl=-120; detail=stale")
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
        XCTAssertTrue(cacheStatus(response)?.contains("detail=stale-while-revalidate") ?? false, cacheStatus(response) ?? "")
        XCTAssertEqual(events.last?.outcome, .staleHit)

        let engine = Installation.engine(for: configuration)
        XCTAssertEqual(engine.exchanges.background.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(originMethods("/swr"), ["GET", "HEAD", "GET"], "the background revalidation found the change")
        let (refreshed, _) = try await get("/swr")
        XCTAssertEqual(String(decoding: refreshed, as: UTF8.self), "second")
        XCTAssertEqual(originMethods("/swr").count, 3)
    }
}
