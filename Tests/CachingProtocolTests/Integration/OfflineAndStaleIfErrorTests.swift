import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// When the origin is gone or fails: the stale entry served and marked stale, never a `must-revalidate` one; offline mode; `only-if-cached`.
final class OfflineAndStaleIfErrorTests: CachingTestCase {
    private let day: TimeInterval = 86_400

    func testOriginGoneServesTheStaleEntryMarkedStale() async throws {
        let body = Data.pattern(4_000)
        origin.handle("/offline") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=60")], body: body) }
        _ = try await get("/offline")
        origin.stop()
        clock.advance(by: 3 * day)
        let (data, response) = try await get("/offline")
        XCTAssertEqual(data, body, "stale data beats an error")
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertTrue(cacheStatus(response)?.contains("detail=stale-if-error") ?? false, cacheStatus(response) ?? "")
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
        XCTAssertTrue(cacheStatus(response)?.contains("fwd-status=503") ?? false)
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
        XCTAssertEqual(cacheStatus(response), "CachingProtocol; fwd=stale; detail=origin-unreachable")
    }

    func testOfflineModeAnswersOnlyFromTheCache() async throws {
        origin.handle("/kept") { _ in .text("kept", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        _ = try await get("/kept")
        configuration.isOffline = true
        clock.advance(by: 30 * day)
        let (data, response) = try await get("/kept")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "kept")
        XCTAssertEqual(cacheStatus(response), "CachingProtocol; hit; ttl=\(60 - 30 * 86_400); detail=stale", "marked stale")
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
}
