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
