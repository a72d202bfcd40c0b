import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

#if os(macOS) || os(Linux)
/// The layer against a real web server: nginx serving static files with its own `ETag` and
/// `Last-Modified`, checked through nginx's access log (methods, statuses, validators sent).
///
/// Skipped with a message when nginx cannot be started, unless `CACHINGPROTOCOL_REQUIRE_NGINX=1`
/// (set by `.ci/run`, which installs nginx-light): then they fail. Not `CI`, which hosted
/// runners set without installing nginx. nginx is a child process: macOS and Linux only.
final class NginxInteropTests: CachingTestCase {
    private var nginx: NginxServer!
    /// A plain session without the protocol, for the log sentinel.
    private var plainSession: URLSession!

    override func setUpWithError() throws {
        nginx = try Self.startNginx()   // first, so a skip leaves nothing behind
        try super.setUpWithError()
        // nginx's Date is real time: start the cache's clock there so ages compute sanely.
        clock = ManualClock(Date())
        installSession(makeConfiguration())
        plainSession = URLSession(configuration: .ephemeral)
    }

    override func tearDownWithError() throws {
        plainSession?.invalidateAndCancel()
        nginx?.stop()
        try super.tearDownWithError()
    }

    static func startNginx() throws -> NginxServer {
        do {
            return try NginxServer()
        } catch {
            if ProcessInfo.processInfo.environment["CACHINGPROTOCOL_REQUIRE_NGINX"] == "1" {
                XCTFail("nginx is required here (CACHINGPROTOCOL_REQUIRE_NGINX=1; .ci/run installs nginx-light): \(error)")
                throw error
            }
            throw XCTSkip("nginx could not be started, skipping the nginx interop tests "
                          + "(apt-get install -y nginx-light or brew install nginx to run them): \(error)")
        }
    }

    // MARK: Helpers

    private let oneDay: TimeInterval = 86_400

    private func fetch(_ path: String) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await session.data(from: nginx.url(path))
        return (data, try XCTUnwrap(response as? HTTPURLResponse))
    }

    /// nginx's access log once every request made so far is in it: a sentinel request that
    /// bypasses the cache is sent last and waited for (nginx logs requests in order), then
    /// dropped from the result.
    private func settledLog() async throws -> [NginxLogLine] {
        let before = nginx.accessLog().count
        let sentinel = "/sentinel-\(UUID().uuidString).txt"
        _ = try await plainSession.data(from: nginx.url(sentinel))
        let lines = nginx.accessLog(waitingFor: before + 1)
        XCTAssertEqual(lines.last?.path, sentinel, "the sentinel is the last line")
        return lines.filter { !$0.path.hasPrefix("/sentinel-") }
    }

    private func summary(_ lines: [NginxLogLine]) -> [String] {
        lines.map { "\($0.method) \($0.uri) \($0.status)" }
    }

    /// A modification time in the past, on a whole second (nginx sends seconds).
    private func pastSecond(_ secondsAgo: TimeInterval) -> Date {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - secondsAgo).rounded(.down))
    }

    // MARK: Tests

    func testUnchangedJSONIsRevalidatedWithHeadAnd304() async throws {
        // Given a JSON file nginx serves with its own ETag and Last-Modified
        let json = Data(#"{"items":[1,2,3],"next":"/feed.json?page=2"}"#.utf8)
        try nginx.write(json, to: "feed.json", modified: pastSecond(3600))

        // When it is fetched, fetched again, and fetched once more after the ETag window
        let (first, firstResponse) = try await fetch("/feed.json")
        let etag = try XCTUnwrap(firstResponse.value(forHTTPHeaderField: "ETag"))
        let lastModified = try XCTUnwrap(firstResponse.value(forHTTPHeaderField: "Last-Modified"))
        let (second, secondResponse) = try await fetch("/feed.json")
        clock.advance(by: oneDay + 1)
        let (third, thirdResponse) = try await fetch("/feed.json")

        // Then the app got the same bytes every time, as ordinary 200s with nginx's headers
        XCTAssertEqual(first, json)
        XCTAssertEqual(second, json)
        XCTAssertEqual(third, json)
        XCTAssertEqual([firstResponse, secondResponse, thirdResponse].map(\.statusCode), [200, 200, 200])
        XCTAssertEqual(thirdResponse.value(forHTTPHeaderField: "ETag"), etag)
        XCTAssertEqual(thirdResponse.value(forHTTPHeaderField: "Content-Type"), "application/json")
        XCTAssertEqual(secondResponse.value(forHTTPHeaderField: "Cache-Status")?.contains("hit"), true)

        // And nginx saw one GET and one conditional HEAD, answered 304 with no body
        let log = try await settledLog()
        XCTAssertEqual(summary(log), ["GET /feed.json 200", "HEAD /feed.json 304"])
        XCTAssertEqual(log[0].bodyBytes, json.count)
        XCTAssertNil(log[0].ifNoneMatch, "the first GET is unconditional")
        XCTAssertEqual(log[1].ifNoneMatch, etag)
        XCTAssertEqual(log[1].ifModifiedSince, lastModified)
        XCTAssertEqual(log[1].bodyBytes, 0)
    }

    func testChangedJSONIsSeenByTheHeadAndTheAppGetsTheNewBytes() async throws {
        // Given a JSON file fetched through the cache
        let old = Data(#"{"version":1}"#.utf8)
        try nginx.write(old, to: "config.json", modified: pastSecond(7200))
        let (before, beforeResponse) = try await fetch("/config.json")
        let oldETag = try XCTUnwrap(beforeResponse.value(forHTTPHeaderField: "ETag"))

        // When the file changes on the server (new bytes, new mtime) and the window passes
        let new = Data(#"{"version":2,"feature":true}"#.utf8)
        try nginx.write(new, to: "config.json", modified: pastSecond(60))
        let (stillCached, _) = try await fetch("/config.json")
        clock.advance(by: oneDay + 1)
        let (after, afterResponse) = try await fetch("/config.json")
        let (afterHit, afterHitResponse) = try await fetch("/config.json")

        // Then within the window the stored copy was served, after it the new bytes, and the
        // new bytes again
        XCTAssertEqual(before, old)
        XCTAssertEqual(stillCached, old)
        XCTAssertEqual(after, new)
        XCTAssertEqual(afterHit, new)
        XCTAssertEqual(afterResponse.statusCode, 200)
        XCTAssertNotEqual(afterResponse.value(forHTTPHeaderField: "ETag"), oldETag)
        XCTAssertEqual(afterHitResponse.value(forHTTPHeaderField: "ETag"), afterResponse.value(forHTTPHeaderField: "ETag"))

        // And nginx saw GET, then the HEAD with the old ETag answered 200 (changed), then one
        // GET. (nginx's Date is real time while the cache's clock moved a day ahead, so the
        // replacement arrives with an apparent age of a day (RFC 9111 §4.2.3) and is stale at
        // once: the last fetch revalidates it, with the new ETag, and gets a 304.)
        let log = try await settledLog()
        XCTAssertEqual(summary(log), ["GET /config.json 200", "HEAD /config.json 200", "GET /config.json 200",
                                      "HEAD /config.json 304"])
        XCTAssertEqual(log[1].ifNoneMatch, oldETag)
        XCTAssertEqual(log[1].bodyBytes, 0)
        XCTAssertNil(log[2].ifNoneMatch, "the follow-up GET is unconditional")
        XCTAssertEqual(log[2].bodyBytes, new.count)
        XCTAssertEqual(log[3].ifNoneMatch, afterResponse.value(forHTTPHeaderField: "ETag"), "the new entry's validator")
    }

    func testImagesAreRevalidatedAndServedByteForByte() async throws {
        // Given a PNG and a JPEG (binary bodies, image types from nginx's types block)
        var generator = SystemRandomNumberGenerator()
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + (0..<40_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let jpeg = Data([0xFF, 0xD8, 0xFF] + (0..<25_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try nginx.write(png, to: "img/logo.png", modified: pastSecond(86_400 * 30))
        try nginx.write(jpeg, to: "img/photo.jpg", modified: pastSecond(86_400 * 30))

        // When both are fetched, hit, then revalidated after the window; the JPEG changed meanwhile
        let (pngFirst, pngResponse) = try await fetch("/img/logo.png")
        let (jpegFirst, _) = try await fetch("/img/photo.jpg")
        let (pngHit, _) = try await fetch("/img/logo.png")
        let newJPEG = Data([0xFF, 0xD8, 0xFF] + (0..<31_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try nginx.write(newJPEG, to: "img/photo.jpg", modified: pastSecond(10))
        clock.advance(by: oneDay + 1)
        let (pngRevalidated, _) = try await fetch("/img/logo.png")
        let (jpegChanged, jpegResponse) = try await fetch("/img/photo.jpg")

        // Then every body is exactly the file's bytes at that moment
        XCTAssertEqual(pngResponse.value(forHTTPHeaderField: "Content-Type"), "image/png")
        XCTAssertEqual(jpegResponse.value(forHTTPHeaderField: "Content-Type"), "image/jpeg")
        XCTAssertEqual(pngFirst, png)
        XCTAssertEqual(pngHit, png)
        XCTAssertEqual(pngRevalidated, png)
        XCTAssertEqual(jpegFirst, jpeg)
        XCTAssertEqual(jpegChanged, newJPEG)

        // And the log shows a 304 for the unchanged image and HEAD 200 + GET for the changed one
        let log = try await settledLog()
        XCTAssertEqual(summary(log), [
            "GET /img/logo.png 200", "GET /img/photo.jpg 200",
            "HEAD /img/logo.png 304",
            "HEAD /img/photo.jpg 200", "GET /img/photo.jpg 200",
        ])
        XCTAssertEqual(log.map(\.bodyBytes), [png.count, jpeg.count, 0, 0, newJPEG.count])
    }

    func testConditionalGetStrategyAgainstNginx() async throws {
        // Given the conditional-GET strategy instead of HEAD
        installSession(CachingConfiguration(cache: cache, revalidation: .conditionalGet, now: clock.read))
        let unchanged = Data("unchanged text\n".utf8)
        let changing = Data("first text\n".utf8)
        try nginx.write(unchanged, to: "a.txt", modified: pastSecond(3600))
        try nginx.write(changing, to: "b.txt", modified: pastSecond(3600))
        _ = try await fetch("/a.txt")
        _ = try await fetch("/b.txt")
        // When one file changes and both are revalidated
        let changed = Data("second, longer text\n".utf8)
        try nginx.write(changed, to: "b.txt", modified: pastSecond(5))
        clock.advance(by: oneDay + 1)
        let (a, _) = try await fetch("/a.txt")
        let (b, _) = try await fetch("/b.txt")
        // Then the unchanged one is a conditional GET answered 304, the changed one a
        // conditional GET answered 200 with the new body, in one round trip each
        XCTAssertEqual(a, unchanged)
        XCTAssertEqual(b, changed)
        let log = try await settledLog()
        XCTAssertEqual(summary(log), ["GET /a.txt 200", "GET /b.txt 200", "GET /a.txt 304", "GET /b.txt 200"])
        XCTAssertNotNil(log[2].ifNoneMatch)
        XCTAssertNotNil(log[3].ifNoneMatch)
        XCTAssertEqual(log[2].bodyBytes, 0)
        XCTAssertEqual(log[3].bodyBytes, changed.count)
    }

    func testDeletedFileIsNotServedFromTheCacheAfterRevalidation() async throws {
        // Given a stored file that is then deleted on the server
        try nginx.write(Data("soon gone".utf8), to: "gone.txt", modified: pastSecond(3600))
        _ = try await fetch("/gone.txt")
        try nginx.remove("gone.txt")
        // When it is revalidated after the window
        clock.advance(by: oneDay + 1)
        let (body, response) = try await fetch("/gone.txt")
        let (_, again) = try await fetch("/gone.txt")
        // Then the app gets nginx's 404, the stale copy is dropped, and the next request asks again
        XCTAssertEqual(response.statusCode, 404)
        XCTAssertNotEqual(body, Data("soon gone".utf8))
        XCTAssertEqual(again.statusCode, 404)
        cache.waitUntilSettled()
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: nginx.url("/gone.txt"))))
        let log = try await settledLog()
        XCTAssertEqual(summary(log), ["GET /gone.txt 200", "HEAD /gone.txt 404", "GET /gone.txt 404", "GET /gone.txt 404"])
    }

    func testRestartedCacheRevalidatesWhatItStoredOnDisk() async throws {
        // Given a file fetched and stored on disk
        let json = Data(#"{"persisted":true}"#.utf8)
        try nginx.write(json, to: "persisted.json", modified: pastSecond(3600))
        _ = try await fetch("/persisted.json")
        cache.waitUntilSettled()
        // When the app restarts (a new cache instance on the same directory) after the window
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
        clock.advance(by: oneDay + 1)
        let (body, _) = try await fetch("/persisted.json")
        // Then the entry read from disk is revalidated with its stored ETag and served
        XCTAssertEqual(body, json)
        let log = try await settledLog()
        XCTAssertEqual(summary(log), ["GET /persisted.json 200", "HEAD /persisted.json 304"])
    }
}
#else
final class NginxInteropTests: LoaderRulesTestCase {
    func testAgainstNginx() throws {
        throw XCTSkip("nginx runs as a child process, and this platform cannot start one")
    }
}
#endif
