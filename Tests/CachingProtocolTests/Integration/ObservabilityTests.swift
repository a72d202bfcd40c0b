import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// What an app can observe: events, counters and the bandwidth estimate.
final class ObservabilityTests: CachingTestCase {
    private let day: TimeInterval = 86_400

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

    /// A body streamed to the app as it arrives (a task with a delegate: every task on Apple
    /// platforms, and on Linux, where corelibs hands a delegate every piece) counts as delivered
    /// once, whether the response is stored (its body kept too) or not (only relayed, never kept).
    func testBodiesStreamedToADelegateCountAsDelivered() throws {
        let unstored = Data.pattern(700, seed: 1)
        let stored = Data.pattern(900, seed: 2)
        origin.handle("/unstored") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "no-store")], body: unstored,
                           transfer: .chunked(chunkSize: 100))
        }
        origin.handle("/stored") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: stored,
                           transfer: .chunked(chunkSize: 100))
        }
        for index in 0..<3 {
            let (data, _, chunks) = try loadWithDelegate(request("/unstored?\(index)"))
            XCTAssertEqual(data, unstored)
            XCTAssertGreaterThan(chunks, 1, "streamed")
        }
        XCTAssertEqual(try loadWithDelegate(request("/stored")).0, stored, "fetched, streamed and kept")
        XCTAssertEqual(try loadWithDelegate(request("/stored")).0, stored, "a hit")

        XCTAssertEqual(events.map(\.outcome), [.fetched, .fetched, .fetched, .fetched, .hit])
        XCTAssertEqual(events.map(\.deliveredBytes), [700, 700, 700, 900, 900])
        XCTAssertEqual(configuration.statistics.deliveredBytes, 3 * 700 + 2 * 900)
        XCTAssertEqual(configuration.statistics.upstreamBytes, 3 * 700 + 900)
    }
}
