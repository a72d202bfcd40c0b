import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The `.rfc9111` preset: `no-cache` revalidated every time, no image heuristic, the Last-Modified heuristic, `Age` shortening freshness.
final class RFC9111PresetTests: CachingTestCase {
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
