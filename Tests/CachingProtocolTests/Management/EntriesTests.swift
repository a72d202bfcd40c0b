import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `CachingURLCache.entries()`: what it lists is what was stored, it reads no entry file once
/// the index knows the entries, and it reads each file once when the index does not.
final class EntriesTests: CachingTestCase {
    /// Serves `body`; a response that varies by language gets the request's language appended.
    private func serve(_ path: String, _ headers: [HTTPField], body: String) {
        let varies = headers.contains { $0.name == "Vary" }
        origin.handle(path) { request in
            .text(body + (varies ? " (\(request.header("Accept-Language") ?? "-"))" : ""), headers: headers)
        }
    }

    private var fileReads: Int { cache.store.diskDiagnostics.entryFileReads }

    func testEntriesMatchWhatWasStored() async throws {
        // Given four responses stored a minute apart: one with an ETag, one with Last-Modified
        // and a short lifetime, one varying by language (two variants), one kept in memory only
        serve("/tagged", [HTTPField("ETag", "\"t1\""), HTTPField("Cache-Control", "max-age=3600")], body: "tagged")
        serve("/dated", [HTTPField("Last-Modified", "Tue, 14 Nov 2023 00:00:00 GMT"), HTTPField("Cache-Control", "max-age=30")],
              body: "dated")
        serve("/varied", [HTTPField("Cache-Control", "max-age=600"), HTTPField("Vary", "Accept-Language")], body: "varied")
        serve("/cookie", [HTTPField("Cache-Control", "max-age=600"), HTTPField("Set-Cookie", "s=1")], body: "cookie")
        let start = clock.now
        _ = try await get("/tagged")
        clock.advance(by: 60)
        _ = try await get("/dated")
        clock.advance(by: 60)
        _ = try await get("/varied", headers: ["Accept-Language": "en"])
        clock.advance(by: 60)
        _ = try await get("/varied", headers: ["Accept-Language": "fr"])
        clock.advance(by: 60)
        _ = try await get("/cookie")
        clock.advance(by: 40)
        HTTPCookieStorage.shared.cookies(for: origin.url("/"))?.forEach(HTTPCookieStorage.shared.deleteCookie)

        // When the cache is listed
        let entries = cache.entries()

        // Then there is one value per variant, newest first, with what was stored
        let key = { (path: String) in "GET " + self.origin.url(path).absoluteString }
        XCTAssertEqual(entries.map(\.key), [key("/cookie"), key("/varied"), key("/varied"), key("/dated"), key("/tagged")])
        XCTAssertEqual(entries.map(\.storedDate), [240, 180, 120, 60, 0].map { start.addingTimeInterval($0) })
        XCTAssertEqual(entries.map(\.age), [40, 100, 160, 220, 280])
        XCTAssertEqual(entries.map(\.bodyBytes), ["cookie", "varied (fr)", "varied (en)", "dated", "tagged"].map(\.utf8.count))
        XCTAssertEqual(entries.map(\.freshnessLifetime), [600, 600, 600, 30, 3600])
        XCTAssertEqual(entries.map(\.isFresh), [true, true, true, false, true])
        XCTAssertEqual(entries.map(\.statusCode), [200, 200, 200, 200, 200])
        XCTAssertEqual(entries.map(\.url), ["/cookie", "/varied", "/varied", "/dated", "/tagged"].map(origin.url))
        XCTAssertEqual(entries.map(\.etag), [nil, nil, nil, nil, "\"t1\""])
        XCTAssertEqual(entries.map(\.lastModified), [nil, nil, nil, "Tue, 14 Nov 2023 00:00:00 GMT", nil])
        XCTAssertEqual(entries.map(\.hasCredentials), [false, false, false, false, false])
        XCTAssertEqual(entries.map(\.isPinned), [false, false, false, false, false])

        // And once written, the same list comes from the index alone, and a purged URL is gone
        cache.waitUntilSettled()
        let reads = fileReads
        XCTAssertEqual(cache.entries(), entries)
        cache.purge(url: origin.url("/dated"))
        XCTAssertEqual(cache.entries().map(\.key), entries.map(\.key).filter { $0 != key("/dated") })
        XCTAssertEqual(fileReads, reads, "no entry file was read")
    }

    func testAReopenedCacheListsFromItsIndexAndAnIndexWithoutSummariesIsReadOnce() throws {
        // Given 50 responses stored through the URLCache API and settled on disk
        for number in 0..<50 {
            let url = URL(string: "https://example.com/item/\(number)")!
            let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                           headerFields: ["Cache-Control": "max-age=600", "ETag": "\"\(number)\""])!
            cache.storeCachedResponse(CachedURLResponse(response: response, data: Data(count: 100 + number)), for: URLRequest(url: url))
        }
        cache.waitUntilSettled()
        let stored = cache.entries()
        XCTAssertEqual(stored.count, 50)

        // When the directory is opened again
        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        reopened.use(policy: .heuristic(), clock: clock.read)
        // Then it lists the same entries without reading a file
        XCTAssertEqual(reopened.entries().sorted { $0.key < $1.key }, stored.sorted { $0.key < $1.key })
        XCTAssertEqual(reopened.store.diskDiagnostics.entryFileReads, 0)
        XCTAssertEqual(reopened.usageByHost()["example.com"]?.entryCount, 50)
        XCTAssertEqual(reopened.store.diskDiagnostics.entryFileReads, 0, "usage reads no header either")
        reopened.waitUntilSettled()

        // When the index is gone (as after an upgrade from an index without summaries), the
        // directory is rebuilt from the files' headers
        try FileManager.default.removeItem(at: directory.appendingPathComponent("index"))
        try? FileManager.default.removeItem(at: directory.appendingPathComponent("journal"))
        let rebuilt = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        rebuilt.use(policy: .heuristic(), clock: clock.read)
        rebuilt.waitUntilSettled()
        let afterScan = rebuilt.store.diskDiagnostics.entryFileReads
        // Then the first listing reads each file once, and the second none
        XCTAssertEqual(rebuilt.entries().sorted { $0.key < $1.key }, stored.sorted { $0.key < $1.key })
        XCTAssertEqual(rebuilt.store.diskDiagnostics.entryFileReads - afterScan, 50)
        XCTAssertEqual(rebuilt.entries().count, 50)
        XCTAssertEqual(rebuilt.store.diskDiagnostics.entryFileReads - afterScan, 50)
        // And what it read is kept in the index's next snapshot: a reopen reads nothing
        rebuilt.waitUntilSettled()
        let again = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        again.use(policy: .heuristic(), clock: clock.read)
        XCTAssertEqual(again.entries().count, 50)
        XCTAssertEqual(again.store.diskDiagnostics.entryFileReads, 0)
    }
}
