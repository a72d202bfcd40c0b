import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Bad input from origins and apps, through the protocol: malformed freshness headers, garbage
/// dates, control characters, a body far larger than the cache, and URLs built to escape the
/// cache directory. Nothing crashes, nothing wrong is served, and a response is stored only
/// when its headers give it a usable lifetime. (CacheControlTests and HTTPDateTests cover the
/// parsers alone; the fuzz target in Sources/Fuzz covers them with generated input.)
final class BadInputTests: CachingTestCase {
    /// One response header set and whether a second GET 30 s later is answered from the cache.
    private struct Case {
        let name: String
        let headers: [HTTPField]
        let hitAfter30s: Bool
        var addsDate = true
    }

    /// Serves each case at its own path, GETs it, moves the clock 30 s, GETs it again, and
    /// checks the body both times and whether the second GET reached the origin.
    private func run(_ cases: [Case], file: StaticString = #filePath, line: UInt = #line) async throws {
        for (index, item) in cases.enumerated() {
            let path = "/case\(index)"
            let body = Data("body of case \(index): \(item.name)".utf8)
            origin.handle(path) { _ in OriginResponse(headers: item.headers, body: body, addsDateHeader: item.addsDate) }
            let (first, firstResponse) = try await get(path)
            clock.advance(by: 30)
            let (second, _) = try await get(path)
            XCTAssertEqual(firstResponse.statusCode, 200, item.name, file: file, line: line)
            XCTAssertEqual(first, body, item.name, file: file, line: line)
            XCTAssertEqual(second, body, item.name, file: file, line: line)
            XCTAssertEqual(originMethods(path).count, item.hitAfter30s ? 1 : 2,
                           "\(item.name): \(item.hitAfter30s ? "expected a hit" : "expected no stored copy")", file: file, line: line)
        }
    }

    private func cacheControl(_ value: String) -> [HTTPField] { [HTTPField("Cache-Control", value)] }

    func testMalformedDuplicatedNegativeHugeAndNonNumericMaxAge() async throws {
        try await run([
            Case(name: "negative", headers: cacheControl("max-age=-1"), hitAfter30s: false),
            Case(name: "very negative", headers: cacheControl("max-age=-9223372036854775808"), hitAfter30s: false),
            Case(name: "non-numeric", headers: cacheControl("max-age=abc"), hitAfter30s: false),
            Case(name: "decimal", headers: cacheControl("max-age=1.5e3"), hitAfter30s: false),
            Case(name: "empty value", headers: cacheControl("max-age="), hitAfter30s: false),
            Case(name: "no value", headers: cacheControl("max-age"), hitAfter30s: false),
            Case(name: "hex", headers: cacheControl("max-age=0x100"), hitAfter30s: false),
            Case(name: "conflicting duplicates", headers: cacheControl("max-age=600, max-age=6000"), hitAfter30s: false),
            Case(name: "conflicting duplicate fields", headers: cacheControl("max-age=600") + cacheControl("max-age=6000"), hitAfter30s: false),
            Case(name: "equal duplicates", headers: cacheControl("max-age=600, max-age=600"), hitAfter30s: true),
            Case(name: "huge", headers: cacheControl("max-age=99999999999999999999999999999"), hitAfter30s: true),
            Case(name: "Int64 max", headers: cacheControl("max-age=9223372036854775807"), hitAfter30s: true),
            Case(name: "leading zeros", headers: cacheControl("max-age=000000000000000000000000600"), hitAfter30s: true),
            Case(name: "quoted", headers: cacheControl("max-age=\"600\""), hitAfter30s: true),
            Case(name: "upper case", headers: cacheControl("MAX-AGE=600"), hitAfter30s: true),
            Case(name: "garbage around", headers: cacheControl(",,;;==, max-age=600, =x, foo=\"unterminated"), hitAfter30s: true),
            Case(name: "shorter than the wait", headers: cacheControl("max-age=10"), hitAfter30s: false),
        ])
    }

    func testHugeMaxAgeIsClampedAndDoesNotOverflow() async throws {
        // Given a response fresh for "ever"
        origin.handle("/forever") { _ in .text("forever", headers: [HTTPField("Cache-Control", "max-age=99999999999999999999")]) }
        _ = try await get("/forever")
        // When 60 years pass (more than 2^31 seconds)
        clock.advance(by: 60 * 365 * 86_400)
        _ = try await get("/forever")
        // Then it was clamped to 2^31 s (about 68 years, RFC 9111 §1.2.2): still fresh, then stale
        XCTAssertEqual(originMethods("/forever"), ["GET"])
        clock.advance(by: 10 * 365 * 86_400)
        _ = try await get("/forever")
        XCTAssertEqual(originMethods("/forever"), ["GET", "GET"])
    }

    func testGarbageExpiresAndDate() async throws {
        let now = clock.now
        try await run([
            Case(name: "Expires 0", headers: [HTTPField("Expires", "0")], hitAfter30s: false),
            Case(name: "Expires garbage", headers: [HTTPField("Expires", "tomorrow-ish")], hitAfter30s: false),
            Case(name: "Expires in the past", headers: [HTTPField("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")], hitAfter30s: false),
            Case(name: "Expires with a 5-digit year", headers: [HTTPField("Expires", "Fri, 31 Dec 99999 23:59:59 GMT")], hitAfter30s: false),
            Case(name: "Expires in an hour", headers: [HTTPField("Expires", HTTPDate.format(now.addingTimeInterval(3600)))], hitAfter30s: true),
            Case(name: "Expires in the year 9999", headers: [HTTPField("Expires", "Fri, 31 Dec 9999 23:59:59 GMT")], hitAfter30s: true),
            Case(name: "Date garbage, max-age", headers: [HTTPField("Date", "yesterday"), HTTPField("Cache-Control", "max-age=600")],
                 hitAfter30s: true, addsDate: false),
            Case(name: "Date garbage, Expires in an hour",
                 headers: [HTTPField("Date", "\u{1}\u{2}"), HTTPField("Expires", HTTPDate.format(now.addingTimeInterval(3600)))],
                 hitAfter30s: true, addsDate: false),
            Case(name: "Date far in the future", headers: [HTTPField("Date", "Fri, 31 Dec 9999 23:59:59 GMT"), HTTPField("Cache-Control", "max-age=600")],
                 hitAfter30s: true, addsDate: false),
            // RFC 9111 §4.2.3: a Date a century old makes the response a century old on arrival.
            Case(name: "Date in 1900", headers: [HTTPField("Date", "Mon, 01 Jan 1900 00:00:00 GMT"), HTTPField("Cache-Control", "max-age=600")],
                 hitAfter30s: false, addsDate: false),
            Case(name: "no Date at all", headers: [HTTPField("Cache-Control", "max-age=600")], hitAfter30s: true, addsDate: false),
            Case(name: "Age garbage", headers: [HTTPField("Age", "-5, abc"), HTTPField("Cache-Control", "max-age=600")], hitAfter30s: true),
            Case(name: "Age huge", headers: [HTTPField("Age", "999999999999999999999"), HTTPField("Cache-Control", "max-age=600")],
                 hitAfter30s: false),
            Case(name: "Last-Modified garbage, ETag", headers: [HTTPField("Last-Modified", "never"), HTTPField("ETag", "\"v1\"")],
                 hitAfter30s: true),
        ])
    }

    func testControlCharactersInHeaderValuesSurviveStorage() async throws {
        // Given responses whose header values carry control characters
        let weird: [HTTPField] = [
            HTTPField("Cache-Control", "max-age=600"),
            HTTPField("X-Control", "a\u{1}b\u{7}c\u{1B}[31md\u{7F}e"),
            HTTPField("X-Tab", "left\tright"),
            HTTPField("ETag", "\"v\u{2}1\""),
            HTTPField("Content-Type", "text/plain; charset=\"\u{3}\""),
        ]
        let body = Data.pattern(5_000, seed: 3)
        origin.handle("/weird") { _ in OriginResponse(headers: weird, body: body) }
        // When it is fetched, hit, and read back from disk after a restart
        let (first, firstResponse) = try await get("/weird")
        let (hit, hitResponse) = try await get("/weird")
        cache.waitUntilSettled()
        cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
        let (fromDisk, diskResponse) = try await get("/weird")
        // Then the body is right every time, the app sees the values Foundation delivered, and
        // they came back from disk unchanged
        XCTAssertEqual(first, body)
        XCTAssertEqual(hit, body)
        XCTAssertEqual(fromDisk, body)
        XCTAssertEqual(originMethods("/weird"), ["GET"])
        for name in ["X-Control", "X-Tab", "ETag", "Content-Type"] {
            XCTAssertEqual(hitResponse.value(forHTTPHeaderField: name), firstResponse.value(forHTTPHeaderField: name), name)
            XCTAssertEqual(diskResponse.value(forHTTPHeaderField: name), firstResponse.value(forHTTPHeaderField: name), name)
        }
        // And revalidation sends the stored ETag as it was received
        clock.advance(by: 601)
        _ = try await get("/weird")
        XCTAssertEqual(origin.requests(to: "/weird").last?.header("If-None-Match"), firstResponse.value(forHTTPHeaderField: "ETag"))
    }

    func testHundredMegabyteBodyWithSmallCapacitiesIsServedWholeAndNotStored() async throws {
        // Given a cache of 1 MB in memory and 4 MB on disk, and a 100 MB response marked cacheable
        cache = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 4 << 20, directory: directory)
        installSession(makeConfiguration())
        let huge = Data.largePattern(megabytes: 100)
        origin.handle("/huge") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: huge) }
        origin.handle("/small") { _ in .text("small", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        _ = try await get("/small")
        // When it is fetched twice
        let (first, _) = try await get("/huge")
        XCTAssertTrue(first == huge, "the first answer is the whole body, byte for byte (\(first.count) bytes)")
        let (second, _) = try await get("/huge")
        XCTAssertTrue(second == huge, "the second answer too (\(second.count) bytes)")
        // Then it was not stored (it exceeds what either tier takes for one entry), the tiers
        // stayed within their capacities, and what was stored before is still there
        cache.waitUntilSettled()
        XCTAssertEqual(originMethods("/huge").count, 2)
        XCTAssertLessThanOrEqual(cache.currentMemoryUsage, 1 << 20)
        XCTAssertLessThanOrEqual(cache.currentDiskUsage, 4 << 20)
        let files = CacheFiles.all(in: directory)
        let total = files.reduce(0) { $0 + ((try? FileIO.status($1).size) ?? 0) }
        XCTAssertLessThanOrEqual(total, 4 << 20)
        _ = try await get("/small")
        XCTAssertEqual(originMethods("/small").count, 1)
        XCTAssertNil(cache.statistics.diskProblem)
    }

    func testUnusualURLsNeverMapOutsideTheCacheDirectory() async throws {
        // Given a cache directory inside a sandbox that holds nothing else
        let sandbox = directory.appendingPathComponent("sandbox")
        let cacheDirectory = sandbox.appendingPathComponent("cache")
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 32 << 20, directory: cacheDirectory)
        installSession(makeConfiguration())
        // And URLs with traversal attempts, encoded separators, NULs, Unicode and long queries
        let longQuery = (0..<6_000).map { "k\($0)=v" }.joined(separator: "&")
        let targets = [
            "/a%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
            "/..%2f..%2f..%2f..%2fescape",
            "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/tmp/escape",
            "/%252e%252e%252fdouble-encoded",
            "/sandbox%2F..%2Fcache%2Fentries%2Findex",
            "/caf%C3%A9/%E2%9C%93?q=%F0%9F%98%80",
            "/nul%00byte?x=%00&y=%0D%0ASet-Cookie:%20x=1",
            "/semi;colon/tilde~/plus+?a=+&b=%2B&c=%26",
            "/long?" + longQuery,
            "/long?" + longQuery + "&different=1",
        ]
        let paths = Set(targets.map { $0.split(separator: "?", maxSplits: 1)[0] })
        for path in paths {
            origin.handle(String(path)) { request in .text("target \(request.target)", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        }
        // When each is fetched twice
        var bodies: [String: Data] = [:]
        for target in targets {
            let (first, response) = try await get(target)
            let (second, _) = try await get(target)
            XCTAssertEqual(response.statusCode, 200, target)
            XCTAssertEqual(first, second, target)
            XCTAssertTrue(String(decoding: first, as: UTF8.self).hasPrefix("target "), target)
            bodies[target] = first
        }
        // Then each URL is its own entry, answered from the cache the second time
        XCTAssertEqual(origin.requestCount(), targets.count)
        XCTAssertEqual(Set(bodies.values).count, targets.count, "no two URLs share an entry")
        // And on disk there is nothing but the cache's own layout: hashed file names only
        cache.waitUntilSettled()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: sandbox.path), ["cache"])
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: cacheDirectory.path)), ["entries", "index", "journal"])
        let names = CacheFiles.entryNames(in: cacheDirectory)
        XCTAssertEqual(names.count, targets.count)
        for name in names { XCTAssertNotNil(EntryDigest(fileName: name), name) }
        XCTAssertEqual(CacheFiles.all(in: sandbox).count, targets.count + 2)
        // And after a restart that must rebuild the index from the files (keys longer than the
        // header probe included), every URL is still a hit
        try FileManager.default.removeItem(at: cacheDirectory.appendingPathComponent("index"))
        try FileManager.default.removeItem(at: cacheDirectory.appendingPathComponent("journal"))
        cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: cacheDirectory)
        installSession(makeConfiguration())
        cache.waitUntilSettled()
        for target in targets {
            let (data, _) = try await get(target)
            XCTAssertEqual(data, bodies[target], target)
        }
        XCTAssertEqual(origin.requestCount(), targets.count)
        XCTAssertEqual(cache.statistics.corruptEntriesRemoved, 0)
    }

    func testGarbageIndexAndJournalAreRebuiltThroughTheProtocol() async throws {
        // Given stored responses whose index and journal are then overwritten with garbage
        for index in 0..<5 {
            origin.handle("/g\(index)") { _ in .text("g\(index)", headers: [HTTPField("Cache-Control", "max-age=600")]) }
            _ = try await get("/g\(index)")
        }
        cache.waitUntilSettled()
        try Data((0..<3_000).map { _ in UInt8.random(in: 0...255) }).write(to: directory.appendingPathComponent("index"))
        try Data((0..<3_000).map { _ in UInt8.random(in: 0...255) }).write(to: directory.appendingPathComponent("journal"))
        // When the app restarts
        cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
        // Then every response is still served from disk
        for index in 0..<5 {
            let (data, _) = try await get("/g\(index)")
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "g\(index)")
        }
        XCTAssertEqual(origin.requestCount(), 5)
    }
}
