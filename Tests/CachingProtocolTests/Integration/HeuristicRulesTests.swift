import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The five rules of the contract, end to end over loopback, counted from the origin's log.
final class HeuristicRulesTests: CachingTestCase {
    private let day: TimeInterval = 86_400

    func testRule1ETagServedFromCacheThenRevalidatedWithHead() async throws {
        let body = Data.pattern(10_000)
        origin.serve("/etag", OriginResource(body: body, contentType: "application/json", etag: "\"v1\"", lastModified: .none))

        for _ in 0..<3 {
            let (data, response) = try await get("/etag")
            XCTAssertEqual(data, body)
            XCTAssertEqual(response.statusCode, 200)
        }
        XCTAssertEqual(originMethods("/etag"), ["GET"], "three fetches within the window: one GET")

        clock.advance(by: day + 1)
        let (data, response) = try await get("/etag")
        XCTAssertEqual(data, body, "the app gets the full stored body")
        XCTAssertEqual(response.statusCode, 200, "a 304 never reaches the app")
        XCTAssertEqual(response.value(forHTTPHeaderField: "ETag"), "\"v1\"")
        XCTAssertEqual(originMethods("/etag"), ["GET", "HEAD"], "after the window: one HEAD, no second GET")
        let head = try XCTUnwrap(origin.requests(to: "/etag").last)
        XCTAssertEqual(head.header("If-None-Match"), "\"v1\"")
        XCTAssertNil(head.header("If-Modified-Since"))

        // The 304 refreshed the entry's dates: fresh for another window.
        _ = try await get("/etag")
        XCTAssertEqual(originMethods("/etag"), ["GET", "HEAD"])
        XCTAssertEqual(events.map(\.outcome), [.fetched, .hit, .hit, .revalidatedNotModified, .hit])
    }

    func testRule1ChangedResourceIsFetchedAndReplaced() async throws {
        let resource = OriginResource(body: Data("old".utf8), contentType: "text/plain", lastModified: .none)
        origin.serve("/changing", resource)
        _ = try await get("/changing")

        resource.update(body: Data("new body".utf8))
        clock.advance(by: day + 1)
        let (data, response) = try await get("/changing")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "new body")
        XCTAssertEqual(response.value(forHTTPHeaderField: "ETag"), resource.etag)
        XCTAssertEqual(originMethods("/changing"), ["GET", "HEAD", "GET"], "HEAD said changed, then one GET")
        XCTAssertNil(origin.requests(to: "/changing").last?.header("If-None-Match"), "the GET after a changed HEAD is unconditional")

        let (again, _) = try await get("/changing")
        XCTAssertEqual(String(decoding: again, as: UTF8.self), "new body", "the new body replaced the old one")
        XCTAssertEqual(originMethods("/changing"), ["GET", "HEAD", "GET"])
    }

    func testRule2MaxAgeThenMissWithoutValidators() async throws {
        origin.handle("/max-age") { _ in .text("fresh for a minute", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        _ = try await get("/max-age")
        clock.advance(by: 59)
        _ = try await get("/max-age")
        XCTAssertEqual(originMethods("/max-age"), ["GET"])
        clock.advance(by: 2)
        let (data, _) = try await get("/max-age")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "fresh for a minute")
        XCTAssertEqual(originMethods("/max-age"), ["GET", "GET"], "expired, no validator: a plain GET")
        XCTAssertNil(origin.requests(to: "/max-age").last?.header("If-None-Match"))
    }

    func testRule2MaxAgeWithValidatorRevalidatesAfterMaxAge() async throws {
        origin.serve("/max-age-etag", OriginResource(body: Data("x".utf8), etag: "\"a\"", lastModified: .none,
                                                     headers: [HTTPField("Cache-Control", "max-age=10")]))
        _ = try await get("/max-age-etag")
        clock.advance(by: 11)
        _ = try await get("/max-age-etag")
        XCTAssertEqual(originMethods("/max-age-etag"), ["GET", "HEAD"], "max-age decides freshness, the ETag how to revalidate")
    }

    func testRule3LastModifiedRevalidatesWithIfModifiedSince() async throws {
        let modified = clock.now.addingTimeInterval(-30 * day)
        let body = Data.pattern(3_000, seed: 7)
        origin.serve("/modified", OriginResource(body: body, etag: .none, lastModified: .fixed(modified)))
        _ = try await get("/modified")
        clock.advance(by: day - 1)
        _ = try await get("/modified")
        XCTAssertEqual(originMethods("/modified"), ["GET"])

        clock.advance(by: 2)
        let (data, response) = try await get("/modified")
        XCTAssertEqual(data, body)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(originMethods("/modified"), ["GET", "HEAD"])
        XCTAssertEqual(origin.requests(to: "/modified").last?.header("If-Modified-Since"), HTTPDate.format(modified))
    }

    func testRule4NoCacheIsReusedForSixtySeconds() async throws {
        let counter = Locked(0)
        origin.handle("/no-cache") { _ in
            let number = counter.withLock { $0 += 1; return $0 }
            return .text("version \(number)", headers: [HTTPField("Cache-Control", "no-cache")])
        }
        for _ in 0..<5 {
            let (data, _) = try await get("/no-cache")
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "version 1")
            clock.advance(by: 10)
        }
        XCTAssertEqual(originMethods("/no-cache"), ["GET"], "a burst within 60 s costs one request")
        clock.advance(by: 20)
        let (data, _) = try await get("/no-cache")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "version 2")
        XCTAssertEqual(originMethods("/no-cache"), ["GET", "GET"])
    }

    func testRule5ImageWithoutCachingHeadersIsKeptSevenDays() async throws {
        let png = Data.pattern(20_000, seed: 3)
        origin.handle("/image.png") { _ in OriginResponse(headers: [HTTPField("Content-Type", "image/png")], body: png) }
        _ = try await get("/image.png")
        clock.advance(by: 7 * day - 1)
        let (data, _) = try await get("/image.png")
        XCTAssertEqual(data, png)
        XCTAssertEqual(originMethods("/image.png"), ["GET"])
        clock.advance(by: 2)
        _ = try await get("/image.png")
        XCTAssertEqual(originMethods("/image.png"), ["GET", "GET"])
    }

    func testJSONWithoutCachingHeadersIsNeverStored() async throws {
        origin.handle("/feed") { _ in OriginResponse(headers: [HTTPField("Content-Type", "application/json")], body: Data("[]".utf8)) }
        for _ in 0..<3 { _ = try await get("/feed") }
        XCTAssertEqual(originMethods("/feed"), ["GET", "GET", "GET"])
        XCTAssertNil(cache.cachedResponse(for: request("/feed")), "nothing stored that would only be refetched")
    }

    func testNoStoreIsNeverStored() async throws {
        origin.handle("/private") { _ in .text("secret", headers: [HTTPField("Cache-Control", "no-store, no-cache"), HTTPField("ETag", "\"s\"")]) }
        for _ in 0..<2 { _ = try await get("/private") }
        XCTAssertEqual(originMethods("/private"), ["GET", "GET"])
        XCTAssertFalse(origin.requests(to: "/private").contains { $0.header("If-None-Match") != nil })
    }

    func testConditionalGetStrategy() async throws {
        var configuration = makeConfiguration()
        configuration.revalidation = .conditionalGet
        installSession(configuration)
        let body = Data.pattern(5_000)
        let resource = OriginResource(body: body, lastModified: .none)
        origin.serve("/conditional", resource)
        let firstTag = try XCTUnwrap(resource.etag)

        _ = try await get("/conditional")
        clock.advance(by: day + 1)
        let (data, response) = try await get("/conditional")
        XCTAssertEqual(data, body)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(originMethods("/conditional"), ["GET", "GET"])
        XCTAssertEqual(origin.requests(to: "/conditional").last?.header("If-None-Match"), firstTag)

        resource.update(body: Data("v2".utf8))
        clock.advance(by: day + 1)
        let (changed, _) = try await get("/conditional")
        XCTAssertEqual(String(decoding: changed, as: UTF8.self), "v2")
        XCTAssertEqual(originMethods("/conditional"), ["GET", "GET", "GET"], "a changed resource costs one conditional GET")
    }
}
