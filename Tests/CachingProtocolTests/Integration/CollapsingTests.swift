import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Identical concurrent loads share one origin request (misses and revalidations), unless switched off.
final class CollapsingTests: CachingTestCase {
    private let day: TimeInterval = 86_400

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
}
