import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `Vary`: one stored variant per value of the named request fields, and `Vary: *` never reused.
final class VaryTests: CachingTestCase {
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
        XCTAssertTrue(cacheStatus(frenchResponse)?.contains("fwd=vary-miss") ?? false, cacheStatus(frenchResponse) ?? "")
        XCTAssertTrue(cacheStatus(englishHit)?.contains("hit") ?? false)
    }

    func testVaryStarIsNeverReused() async throws {
        origin.handle("/star") { _ in .text("*", headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("Vary", "*")]) }
        _ = try await get("/star")
        _ = try await get("/star")
        XCTAssertEqual(originMethods("/star"), ["GET", "GET"])
    }
}
