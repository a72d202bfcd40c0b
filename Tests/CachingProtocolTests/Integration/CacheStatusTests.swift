import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The `Cache-Status` field (RFC 9211) on every answer: what it says for a miss, a hit, a revalidation and a reload, and that it can be switched off.
final class CacheStatusTests: CachingTestCase {
    private let day: TimeInterval = 86_400

    func testCacheStatusNamesWhatHappened() async throws {
        let resource = OriginResource(body: Data("v1".utf8), etag: "\"1\"", lastModified: .none)
        origin.serve("/status", resource)
        let (_, miss) = try await get("/status")
        XCTAssertEqual(cacheStatus(miss), "CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=86400")
        clock.advance(by: 100)
        let (_, hit) = try await get("/status")
        XCTAssertEqual(cacheStatus(hit), "CachingProtocol; hit")
        XCTAssertEqual(hit.value(forHTTPHeaderField: "Age"), "100", "the time it spent in the cache (RFC 9111 §5.1)")
        clock.advance(by: day)
        let (_, revalidated) = try await get("/status")
        XCTAssertEqual(cacheStatus(revalidated), "CachingProtocol; fwd=stale; fwd-status=304; stored; ttl=86400")
        let (_, reload) = try await get("/status", cachePolicy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(cacheStatus(reload), "CachingProtocol; fwd=request; fwd-status=200; stored; ttl=86400")
    }

    func testCacheStatusCanBeSwitchedOff() async throws {
        var configuration = makeConfiguration()
        configuration.addsCacheStatus = false
        installSession(configuration)
        origin.handle("/quiet") { _ in .text("q", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        let (_, miss) = try await get("/quiet")
        let (_, hit) = try await get("/quiet")
        XCTAssertNil(cacheStatus(miss))
        XCTAssertNil(cacheStatus(hit))
        XCTAssertEqual(originMethods("/quiet"), ["GET"])
    }
}
