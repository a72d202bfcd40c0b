import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `CachingURLCache.maximumEntryAge`: responses stored longer ago are removed when a cache opens
/// and on the disk tier's schedule, are never served meanwhile, and pinned ones are exempt. The
/// clock is the test's; nothing sleeps.
final class AgeLimitTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        // Fresh for a day: only the age limit can make the cache drop them within the test.
        for path in ["/old", "/young", "/pinned", "/quiet"] {
            origin.handle(path) { _ in .text("body of \(path)", headers: [HTTPField("Cache-Control", "max-age=86400")]) }
        }
    }

    private func hasFile(_ path: String, in cache: CachingURLCache) -> Bool {
        let name = EntryDigest(key: "GET " + origin.url(path).absoluteString).fileName
        return FileManager.default.fileExists(atPath: cache.directory.appendingPathComponent("entries/" + name).path)
    }

    func testOldResponsesAreRemovedWhenACacheOpensWithTheLimit() async throws {
        // Given /old and /pinned (pinned) stored two hours before /young
        _ = try await get("/old")
        _ = try await get("/pinned")
        try cache.pin(origin.url("/pinned"))
        clock.advance(by: 7_200)
        _ = try await get("/young")
        cache.waitUntilSettled()
        XCTAssertTrue(hasFile("/old", in: cache))

        // When the directory is opened again, by an installation on the same clock, with a one-hour limit
        cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
        cache.maximumEntryAge = 3_600
        cache.waitUntilSettled()

        // Then /old is gone from disk and from the listing; /young and the pinned one stay
        XCTAssertFalse(hasFile("/old", in: cache))
        XCTAssertTrue(hasFile("/young", in: cache))
        XCTAssertTrue(hasFile("/pinned", in: cache))
        XCTAssertEqual(Set(cache.entries().map(\.url.path)), ["/young", "/pinned"])
        // And /old goes to the origin again while the others are hits
        _ = try await get("/old")
        _ = try await get("/young")
        _ = try await get("/pinned")
        XCTAssertEqual([origin.requests(to: "/old").count, origin.requests(to: "/young").count,
                        origin.requests(to: "/pinned").count], [2, 1, 1])
    }

    func testOldResponsesAreNeverServedAndAreRemovedOnSchedule() async throws {
        // Given a one-hour limit, /quiet and /old stored at once and /young 50 minutes later
        cache.maximumEntryAge = 3_600
        _ = try await get("/quiet")
        _ = try await get("/old")
        clock.advance(by: 3_000)
        _ = try await get("/young")
        cache.waitUntilSettled()

        // When 20 more minutes pass (/quiet and /old are 70 minutes old, still fresh by their headers)
        clock.advance(by: 1_200)
        // Then /old is not served from memory: the origin is asked again
        let (body, response) = try await get("/old")
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "body of /old")
        XCTAssertEqual(origin.requests(to: "/old").count, 2)
        XCTAssertTrue(response.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd=uri-miss") == true)

        // And /quiet, never asked for again, is gone from disk once the disk tier settles (its
        // sweep is due: more than a tenth of the limit passed since the last one); /young stays
        cache.waitUntilSettled()
        XCTAssertFalse(hasFile("/quiet", in: cache))
        XCTAssertTrue(hasFile("/young", in: cache))
        XCTAssertEqual(Set(cache.entries().map(\.url.path)), ["/young", "/old"])
        _ = try await get("/young")
        XCTAssertEqual(origin.requests(to: "/young").count, 1)

        // And without a limit nothing is removed for its age
        cache.maximumEntryAge = nil
        clock.advance(by: 36_000)
        cache.waitUntilSettled()
        XCTAssertTrue(hasFile("/young", in: cache))
        XCTAssertEqual(cache.entries().count, 2)
    }

    func testAPinnedResponseIsExemptFromTheLimit() async throws {
        // Given a pinned response and an unpinned one, with a one-hour limit
        cache.maximumEntryAge = 3_600
        _ = try await get("/pinned")
        _ = try await get("/old")
        try cache.pin(origin.url("/pinned"))
        // When two hours pass
        clock.advance(by: 7_200)
        cache.waitUntilSettled()
        // Then the pinned one is still on disk and served without the origin; the other is not
        XCTAssertTrue(hasFile("/pinned", in: cache))
        XCTAssertFalse(hasFile("/old", in: cache))
        _ = try await get("/pinned")
        _ = try await get("/old")
        XCTAssertEqual([origin.requests(to: "/pinned").count, origin.requests(to: "/old").count], [1, 2])
        XCTAssertEqual(cache.entries().first { $0.url.path == "/pinned" }?.isPinned, true)
    }
}
