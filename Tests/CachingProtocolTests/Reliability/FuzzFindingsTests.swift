import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Each problem the fuzz targets found, pinned down as a deterministic test (the inputs are also
/// in Fuzz/corpus, replayed by FuzzCorpusTests).
final class FuzzFindingsTests: LoaderRulesTestCase {
    /// `HTTPDate.format` wrote years below 1000 with fewer than four digits; "56" then parsed
    /// back as RFC 850's two-digit year 2056.
    func testFormattedDatesOfEarlyYearsParseBackToTheSameInstant() throws {
        // (The parser now takes only four-digit years in IMF-fixdate, so the dates are made
        // directly: 29 Feb 56, 1 Jan 1, 1 Jan 999, at the times the fuzzer found.)
        for (seconds, year) in [(-60_394_809_601.0, "0056"), (-62_135_596_800.0, "0001"), (-30_641_716_800.0, "0999")] {
            let date = Date(timeIntervalSince1970: seconds)
            let formatted = HTTPDate.format(date)
            XCTAssertTrue(formatted.contains(" \(year) "), formatted)
            XCTAssertEqual(HTTPDate.parse(formatted), date, formatted)
        }
    }
}

extension FuzzFindingsTests {
    /// A comma after U+070F (a prepending mark) was one `Character` with it, so the
    /// `Character`-based splitters did not see it: `CacheControl.directives` returned a
    /// directive name with a comma in it (the fuzzer's invariant), and `Vary: x\u{70F}, *` was
    /// not seen as `Vary: *`. Field values are now split on their bytes.
    func testACommaNextToAMarkStillSeparatesListMembers() throws {
        let prepended = "no-store\u{70F}, max-age=60"
        XCTAssertEqual(CacheControl.directives(in: prepended).map { String($0.name) }, ["no-store\u{70F}", "max-age"])
        XCTAssertEqual(CacheControl(prepended).maxAge, 60)
        // A combining mark after the comma used to join the comma to the next directive.
        XCTAssertEqual(CacheControl("max-age=5,\u{301}no-cache").maxAge, 5)

        let vary = HTTPHeaders(["Vary": "x\u{70F}, *", "Cache-Control": "max-age=60"])
        let decision = CachingPolicy.heuristic().storageDecision(for: PolicyFixtures.request(), status: 200, headers: vary,
                                                                 requestDate: PolicyFixtures.start, responseDate: PolicyFixtures.start)
        XCTAssertEqual(decision, .doNotStore(reason: "Vary: *"))
        XCTAssertEqual(HTTPHeaders.listMembers("a\u{70F}, b ,, c\t"), ["a\u{70F}", "b", "c"])
        XCTAssertEqual(HTTPHeaders.listMembers(", 5", omittingEmpty: false), ["", "5"])

        // The input the fuzzer saved, replayed through its target's invariants.
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus/http/finding-cache-control-prepend-comma")
        let input = try Data(contentsOf: url)
        let text = String(decoding: input.dropFirst(), as: UTF8.self)
        for (name, _) in CacheControl.directives(in: text) {
            XCTAssertFalse(name.contains(",") || name.contains("="), "directive name \(name)")
        }
    }

    /// A journal (or snapshot) record with a huge file size, checksummed correctly, made
    /// `DiskIndex.load` overflow the index's byte count and trap: opening such a cache crashed.
    func testHugeFileSizesInTheIndexAreDamageNotACrash() throws {
        let huge = DiskIndex.Entry(fileSize: Int.max, latestResponseDate: Date(), lastAccess: Date())
        let journal = DiskIndex.encodeJournal([.put(EntryDigest(high: 1, low: 1), huge), .put(EntryDigest(high: 2, low: 2), huge)])
        let loaded = try DiskIndex.load(snapshot: DiskIndex().snapshotData(), journal: journal)
        XCTAssertEqual(loaded.index.count, 0)
        XCTAssertEqual(loaded.damagedJournalBytes, journal.count, "both records are skipped as damaged")

        var index = DiskIndex()
        index.put(EntryDigest(high: 3, low: 3), DiskIndex.Entry(fileSize: DiskIndex.maximumFileSize + 1, latestResponseDate: Date(), lastAccess: Date()))
        XCTAssertThrowsError(try DiskIndex.load(snapshot: index.snapshotData(), journal: Data()), "the snapshot is rebuilt from the files")
    }

    func testCacheWithAHugeSizeInItsJournalStillOpensAndServes() throws {
        // Given a cache directory holding one entry, whose journal then gets two such records
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocolTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = URL(string: "https://example.com/kept")!
        do {
            let cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory)
            let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=60"])!
            cache.storeCachedResponse(CachedURLResponse(response: response, data: Data("kept".utf8)), for: URLRequest(url: url))
            cache.waitUntilSettled()
        }
        let huge = DiskIndex.Entry(fileSize: Int.max, latestResponseDate: Date(), lastAccess: Date())
        let handle = try FileHandle(forWritingTo: directory.appendingPathComponent("journal"))
        try handle.seekToEnd()
        try handle.write(contentsOf: DiskIndex.encodeJournal([.put(EntryDigest(high: 1, low: 1), huge), .put(EntryDigest(high: 2, low: 2), huge)]))
        try handle.close()
        // When the app opens it, then the entry is served and nothing crashed
        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory)
        reopened.waitUntilSettled()
        XCTAssertEqual(reopened.cachedResponse(for: URLRequest(url: url))?.data, Data("kept".utf8))
        XCTAssertEqual(reopened.statistics.disk.entryCount, 1)
    }
}

/// Entry files whose numbers are absurd (infinite or huge lifetimes and ages, NaN or infinite
/// dates) but whose framing and checksums are right: the engine turns ages and lifetimes into
/// `Int`s for `Age` and `Cache-Status`, which traps on such values, so serving one crashed the
/// app. The codec now rejects them: a miss, counted as corrupt, refetched.
final class CraftedEntryTests: CachingTestCase {
    func testEntriesWithAbsurdNumbersAreMissesNotCrashes() async throws {
        let base = CacheEntry(
            responseURL: "", statusCode: 200,
            headers: HTTPHeaders([.init(name: "Cache-Control", value: "max-age=600"), .init(name: "ETag", value: "\"v1\"")]),
            body: Data("crafted".utf8), requestDate: clock.now, responseDate: clock.now,
            initialAge: 0, freshnessLifetime: 600, varyFields: [], partition: .anonymous, userInfo: nil)
        let mutations: [(String, (inout CacheEntry) -> Void)] = [
            ("huge lifetime", { $0.freshnessLifetime = 1e300 }),
            ("infinite lifetime", { $0.freshnessLifetime = .infinity }),
            ("NaN lifetime", { $0.freshnessLifetime = .nan }),
            ("huge age", { $0.initialAge = 1e300 }),
            ("negative huge age", { $0.initialAge = -1e300 }),
            ("NaN age", { $0.initialAge = .nan }),
            ("NaN response date", { $0.responseDate = Date(timeIntervalSinceReferenceDate: .nan) }),
            ("distant response date", { $0.responseDate = Date(timeIntervalSinceReferenceDate: -1e300) }),
            ("infinite request date", { $0.requestDate = Date(timeIntervalSinceReferenceDate: .infinity) }),
            ("status out of range", { $0.statusCode = Int.max }),
        ]
        // Given entry files with those numbers, written as the codec would write them
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("entries"), withIntermediateDirectories: true)
        for (index, (_, mutate)) in mutations.enumerated() {
            let url = origin.url("/crafted\(index)")
            origin.handle("/crafted\(index)") { _ in .text("from the origin", headers: [HTTPField("Cache-Control", "max-age=600")]) }
            var entry = base
            entry.responseURL = url.absoluteString
            mutate(&entry)
            let key = CacheKey.make(method: "GET", url: url)
            try EntryCodec.encode(CacheRecord(key: key, variants: [entry]))
                .write(to: directory.appendingPathComponent("entries/" + StableHash.hexDigest128(key)))
        }
        // When a cache opens the directory (adopting the files) and the app asks for each
        cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
        cache.waitUntilSettled()
        for (index, (name, _)) in mutations.enumerated() {
            let (data, _) = try await get("/crafted\(index)")
            // Then each is a miss answered by the origin, not a crash
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "from the origin", name)
        }
        XCTAssertEqual(origin.requestCount(), mutations.count)
        XCTAssertEqual(cache.statistics.corruptEntriesRemoved, mutations.count)
    }
}
