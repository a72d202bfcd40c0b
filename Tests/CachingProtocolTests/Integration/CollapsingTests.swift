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

    /// Two loads share one upstream request to an origin that holds its answer for 30 s. The
    /// first leaving changes nothing upstream; the last leaving cancels the request: the origin
    /// sees its connection closed, and the exchange is retired, within seconds, not after 30 s.
    func testTheLastLoadLeavingCancelsTheSharedUpstreamRequest() async throws {
        origin.handle("/held") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=60")], body: Data("late".utf8), fault: .stall(30))
        }
        let url = origin.url("/held")
        let ended = XCTestExpectation(description: "both loads ended")
        ended.expectedFulfillmentCount = 2
        let outcomes = Locked<[Int]>([])
        // A request timeout longer than the waits below: only a cancellation ends the request.
        let tasks = (0..<2).map { _ in
            session.dataTask(with: URLRequest(url: url, timeoutInterval: 60)) { _, _, error in
                outcomes.withLock { $0.append((error as? URLError)?.code.rawValue ?? 0) }
                ended.fulfill()
            }
        }
        tasks.forEach { $0.resume() }
        let engine = Installation.engine(for: configuration)
        let key = CacheKey.make(method: "GET", url: url)
        let origin = self.origin!
        await fulfillment(of: [expectation(until: "both loads wait on one request that reached the origin") {
            engine.exchanges.waitingLoads(forKey: key) == 2 && origin.requests(to: "/held").count == 1
        }], timeout: 10)

        tasks[0].cancel()
        await waitUntil("the first load left") { engine.exchanges.waitingLoads(forKey: key) == 1 }
        XCTAssertEqual(origin.responsesAbandoned, 0, "another load still waits: the request goes on")

        tasks[1].cancel()
        await fulfillment(of: [ended], timeout: 10)
        await fulfillment(of: [expectation(until: "the origin saw the connection closed", giveUpAfter: 5) {
            origin.responsesAbandoned == 1
        }], timeout: 5)
        XCTAssertEqual(engine.exchanges.waitingLoads(forKey: key), 0, "the exchange is retired")
        XCTAssertEqual(outcomes.withLock { $0 }, [URLError.Code.cancelled.rawValue, URLError.Code.cancelled.rawValue])
        XCTAssertEqual(origin.requests(to: "/held").count, 1)
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
