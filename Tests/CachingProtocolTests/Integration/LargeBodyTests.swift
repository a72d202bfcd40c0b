import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A body larger than what a tier accepts still reaches the app whole; it is just not stored there.
final class LargeBodyTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        cache = CachingURLCache(memoryCapacity: 256 << 10, diskCapacity: 1 << 20, directory: directory)
        cache.maximumEntrySize = 1 << 20   // these tests are about each tier's own limit
        installSession(makeConfiguration())
    }

    func testBodiesTooLargeForBothTiersReachTheAppAndAreNotStored() async throws {
        let huge = Data.pattern(3 << 20)
        origin.handle("/huge") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: huge) }
        let (first, _) = try await get("/huge")
        let (second, _) = try await get("/huge")
        XCTAssertEqual(first, huge)
        XCTAssertEqual(second, huge)
        XCTAssertEqual(originMethods("/huge"), ["GET", "GET"])
        cache.waitUntilSettled()
        XCTAssertLessThanOrEqual(cache.currentMemoryUsage, 256 << 10)
        XCTAssertLessThanOrEqual(cache.currentDiskUsage, 1 << 20)
    }

    func testBodiesTooLargeForMemoryAreServedFromDisk() async throws {
        let large = Data.pattern(200 << 10)   // above 25 % of the memory tier, below 25 % of the disk tier
        origin.handle("/large") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: large) }
        _ = try await get("/large")
        cache.waitUntilSettled()
        let (data, response) = try await get("/large")
        XCTAssertEqual(data, large)
        XCTAssertTrue(response.value(forHTTPHeaderField: "Cache-Status")?.contains("hit") ?? false)
        XCTAssertEqual(originMethods("/large"), ["GET"])
        XCTAssertEqual(cache.statistics.memory.entryCount, 0)
        XCTAssertEqual(cache.statistics.disk.entryCount, 1)
    }
}

/// `CachingURLCache.maximumEntrySize`: a response larger than it reaches the app as usual and
/// is not stored, replacing and evicting nothing.
final class MaximumEntrySizeTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 20 << 20, directory: directory)
        installSession(makeConfiguration())
    }

    func testTheDefaultIsFivePercentOfTheLargerCapacityAndFollowsIt() {
        XCTAssertEqual(cache.maximumEntrySize, 1 << 20)
        cache.memoryCapacity = 40 << 20
        XCTAssertEqual(cache.maximumEntrySize, 2 << 20)
        cache.maximumEntrySize = 300_000
        cache.diskCapacity = 100 << 20
        XCTAssertEqual(cache.maximumEntrySize, 300_000, "a value the app set stays")
        cache.maximumEntrySize = -5
        XCTAssertEqual(cache.maximumEntrySize, 0)
        XCTAssertEqual(CachingURLCache.standard.maximumEntrySize, Int(Double(100 << 20) * 0.05))
    }

    func testALargerResponseIsDeliveredWholeAndNotStoredAndEvictsNothing() async throws {
        // Given three small responses stored
        for number in 0..<3 {
            origin.handle("/small/\(number)") { _ in .text("small \(number)", headers: [HTTPField("Cache-Control", "max-age=600")]) }
            _ = try await get("/small/\(number)")
        }
        // When a response just above the limit is fetched twice
        let large = Data.pattern((1 << 20) + 1)
        origin.handle("/large") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: large) }
        let (first, response) = try await get("/large")
        let (second, _) = try await get("/large")

        // Then the app gets it byte for byte each time, from the origin each time
        XCTAssertEqual(first, large)
        XCTAssertEqual(second, large)
        XCTAssertEqual(originMethods("/large"), ["GET", "GET"])
        XCTAssertFalse(response.value(forHTTPHeaderField: "Cache-Status")?.contains("stored") ?? true)
        // And nothing of it is stored, in memory or on disk, and the small ones are all still hits
        cache.waitUntilSettled()
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: origin.url("/large"))))
        XCTAssertEqual(cache.statistics.memory.entryCount, 3)
        XCTAssertEqual(cache.statistics.disk.entryCount, 3)
        for number in 0..<3 { _ = try await get("/small/\(number)") }
        XCTAssertEqual((0..<3).flatMap { originMethods("/small/\($0)") }, ["GET", "GET", "GET"])
    }

    func testAResponseThatGrewPastTheLimitDropsTheStoredOne() async throws {
        let version = Locked(0)
        origin.handle("/grows") { _ in
            let size = version.withLock { $0 += 1; return $0 } == 1 ? 1_000 : (2 << 20)
            return OriginResponse(headers: [HTTPField("Cache-Control", "max-age=0"), HTTPField("ETag", "\"v\(size)\"")],
                                  body: Data.pattern(size))
        }
        _ = try await get("/grows")
        XCTAssertNotNil(cache.cachedResponse(for: URLRequest(url: origin.url("/grows"))))
        let (grown, _) = try await get("/grows")   // stale at once: revalidated, changed, too large
        XCTAssertEqual(grown, Data.pattern(2 << 20))
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: origin.url("/grows"))), "the outdated copy is gone")
    }

    func testTheURLCacheAPIStoresNothingLarger() {
        let url = URL(string: "https://example.com/big")!
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=60"])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data.pattern(2 << 20)), for: URLRequest(url: url))
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: url)))
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data.pattern(1 << 10)), for: URLRequest(url: url))
        XCTAssertEqual(cache.cachedResponse(for: URLRequest(url: url))?.data, Data.pattern(1 << 10))
    }
}
