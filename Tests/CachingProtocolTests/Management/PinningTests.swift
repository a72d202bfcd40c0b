import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `CachingURLCache.pin(_:)`: a pinned response survives a flood that evicts everything else, a
/// reopen and another process; pinning more than fits pins nothing; a pinned response is still
/// revalidated and replaced.
final class PinningTests: CachingTestCase {
    private var pinnedDirectory: URL { directory.appendingPathComponent("pinned", isDirectory: true) }

    /// Replaces the test's cache with one of `diskCapacity` bytes and no memory tier, so every
    /// answer comes from disk.
    private func useDiskOnlyCache(diskCapacity: Int, maximumEntrySize: Int) {
        cache = CachingURLCache(memoryCapacity: 0, diskCapacity: diskCapacity, directory: pinnedDirectory)
        cache.maximumEntrySize = maximumEntrySize
        installSession(makeConfiguration())
    }

    private func serveItems(bytes: Int) {
        for path in ["/keep", "/a", "/flood"] {
            origin.handle(path) { request in
                OriginResponse(headers: [HTTPField("Cache-Control", "max-age=3600")],
                               body: Data(repeating: UInt8(request.target.utf8.count % 251), count: bytes))
            }
        }
    }

    private func storedPaths(_ cache: CachingURLCache) -> Set<String> {
        Set(cache.entries().map { $0.url.path + ($0.url.query.map { "?" + $0 } ?? "") })
    }

    func testAPinnedResponseSurvivesAFloodAReopenAndAnotherProcess() async throws {
        // Given a 256 KB disk-only cache holding /keep (pinned) and /a, 10 KB each
        useDiskOnlyCache(diskCapacity: 256 << 10, maximumEntrySize: 20_000)
        serveItems(bytes: 10_000)
        let (kept, _) = try await get("/keep")
        _ = try await get("/a")
        try cache.pin(origin.url("/keep"))
        XCTAssertEqual(cache.pinnedURLs, [origin.url("/keep")])

        // When 40 more responses of 10 KB flood it
        for number in 0..<40 { _ = try await get("/flood?n=\(number)") }
        cache.waitUntilSettled()

        // Then /keep is still on disk and answers without the origin; /a and the first of the
        // flood were evicted; the directory is within its capacity
        let stored = storedPaths(cache)
        XCTAssertTrue(stored.contains("/keep"))
        XCTAssertFalse(stored.contains("/a"))
        XCTAssertFalse(stored.contains("/flood?n=0"))
        XCTAssertLessThanOrEqual(cache.currentDiskUsage, 256 << 10)
        XCTAssertEqual(cache.entries().filter(\.isPinned).map(\.url), [origin.url("/keep")])
        let (again, _) = try await get("/keep")
        XCTAssertEqual(again, kept)
        XCTAssertEqual(origin.requests(to: "/keep").count, 1)
        _ = try await get("/a")
        XCTAssertEqual(origin.requests(to: "/a").count, 2)

        // When the directory is opened again and flooded through the URLCache API
        cache.waitUntilSettled()
        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 256 << 10, directory: pinnedDirectory)
        reopened.use(policy: .heuristic(), clock: clock.read)
        XCTAssertEqual(reopened.pinnedURLs, [origin.url("/keep")])
        for number in 0..<40 {
            let url = URL(string: "https://example.com/other/\(number)")!
            let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=600"])!
            reopened.storeCachedResponse(CachedURLResponse(response: response, data: Data(count: 10_000)), for: URLRequest(url: url))
        }
        reopened.waitUntilSettled()
        // Then the pinned response is still there, byte for byte
        XCTAssertEqual(reopened.cachedResponse(for: URLRequest(url: origin.url("/keep")))?.data, kept)
        XCTAssertNil(reopened.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/other/0")!)))

        #if os(macOS) || os(Linux)
        // And another process sees the pin, and what it pins is seen here
        let listed = try CacheTestToolRunner.run(["pinned", pinnedDirectory.path])
        XCTAssertEqual(listed.status, 0, listed.errors)
        XCTAssertEqual(listed.output, origin.url("/keep").absoluteString + "\n")
        let pinned = try CacheTestToolRunner.run(["pin", pinnedDirectory.path, origin.url("/a").absoluteString])
        XCTAssertEqual(pinned.status, 0, pinned.errors)
        XCTAssertEqual(reopened.pinnedURLs, [origin.url("/keep"), origin.url("/a")])
        #endif

        // And once unpinned, a flood evicts it like anything else
        try reopened.unpin([origin.url("/keep"), origin.url("/a")])
        XCTAssertEqual(reopened.pinnedURLs, [])
        for number in 40..<80 {
            let url = URL(string: "https://example.com/other/\(number)")!
            let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=600"])!
            reopened.storeCachedResponse(CachedURLResponse(response: response, data: Data(count: 10_000)), for: URLRequest(url: url))
        }
        reopened.waitUntilSettled()
        XCTAssertNil(reopened.cachedResponse(for: URLRequest(url: origin.url("/keep"))))
    }

    /// The pins lock is never waited for, and taken only to rename the new pins file into place:
    /// with the lock held elsewhere (a process in the middle of its rename, or one suspended or
    /// stopped there) `pin` fails at once with a clear error and changes nothing, instead of
    /// waiting — before, it waited for as long as the lock was held — and it pins once the lock
    /// is free. (An iOS app suspended while it holds a file lock in an App Group container is
    /// killed, 0xdead10cc: holding it only for a rename keeps that window as small as it gets.)
    func testPinningNeverWaitsForThePinsLock() async throws {
        origin.handle("/keep") { _ in .text("kept", headers: [HTTPField("Cache-Control", "max-age=3600")]) }
        _ = try await get("/keep")
        cache.waitUntilSettled()
        let lockPath = directory.appendingPathComponent("pins.lock").path
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, mode_t(0o600))
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        XCTAssertEqual(flock(descriptor, LOCK_EX), 0, "held, as by another process")
        var held = true
        defer { if held { flock(descriptor, LOCK_UN) }; close(descriptor) }

        let cache = self.cache!
        let url = origin.url("/keep")
        let failed = expectation(description: "pin returned while the lock is held")
        DispatchQueue.global().async {
            do {
                try cache.pin(url)
            } catch let error as CachingError {
                XCTAssertEqual(error.code, .diskWriteFailed, "\(error)")
                failed.fulfill()
            } catch {
                XCTFail("\(error)")
            }
        }
        await fulfillment(of: [failed], timeout: 10)
        XCTAssertEqual(cache.pinnedURLs, [], "nothing pinned")

        flock(descriptor, LOCK_UN)
        held = false
        try cache.pin(url)
        XCTAssertEqual(cache.pinnedURLs, [url])
        XCTAssertEqual(CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory).pinnedURLs, [url],
                       "in the pins file")
    }

    func testPinningMoreThanFitsFailsAndPinsNothing() async throws {
        // Given a 200 KB disk-only cache that stores up to 50 KB a response, holding four of 45 KB
        useDiskOnlyCache(diskCapacity: 200_000, maximumEntrySize: 50_000)
        origin.handle("/big") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=3600")], body: Data(count: 45_000)) }
        for number in 0..<4 { _ = try await get("/big?n=\(number)") }
        cache.waitUntilSettled()
        XCTAssertEqual(cache.entries().count, 4)
        let urls = (0..<4).map { origin.url("/big?n=\($0)") }

        // When two are pinned (90 KB, leaving room for a 50 KB response), then two more
        try cache.pin(Array(urls[0..<2]))
        let pinsFile = try Data(contentsOf: pinnedDirectory.appendingPathComponent("pins"))
        XCTAssertThrowsError(try cache.pin(Array(urls[2..<4]))) { error in
            // Then the second pin fails with a clear error and pins nothing
            XCTAssertEqual((error as? CachingError)?.code, .pinnedBeyondCapacity)
            XCTAssertTrue("\(error)".contains("Nothing was pinned"), "\(error)")
        }
        XCTAssertEqual(cache.pinnedURLs, Array(urls[0..<2]))
        XCTAssertEqual(try Data(contentsOf: pinnedDirectory.appendingPathComponent("pins")), pinsFile)
        XCTAssertEqual(cache.entries().filter(\.isPinned).count, 2)

        // And one more (135 KB with the room) fits
        try cache.pin(urls[2])
        XCTAssertEqual(cache.pinnedURLs, Array(urls[0..<3]))
    }

    func testAPinnedResponseIsStillRevalidatedAndReplaced() async throws {
        // Given a pinned response fresh for a minute, with an ETag the origin then changes
        let version = Locked("v1")
        origin.handle("/doc") { request in
            let current = version.withLock { $0 }
            if request.header("If-None-Match") == "\"\(current)\"" {
                return OriginResponse(status: 304, headers: [HTTPField("ETag", "\"\(current)\"")])
            }
            return .text(current, headers: [HTTPField("ETag", "\"\(current)\""), HTTPField("Cache-Control", "max-age=60")])
        }
        _ = try await get("/doc")
        try cache.pin(origin.url("/doc"))
        version.withLock { $0 = "v2" }
        // When it is stale and asked for
        clock.advance(by: 120)
        let (body, _) = try await get("/doc")
        // Then it was revalidated, replaced by the new version, and is still pinned
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "v2")
        XCTAssertEqual(originMethods("/doc"), ["GET", "HEAD", "GET"])
        XCTAssertEqual(cache.entries().map { [$0.etag, "\($0.isPinned)"] }, [["\"v2\"", "true"]])
    }
}
