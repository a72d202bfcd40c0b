import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import CachingProtocol

/// RFC 9111 rules the conformance suite checks, each as a table from the RFC's text.
final class ConformanceRulesTests: LoaderRulesTestCase {
    private typealias F = PolicyFixtures
    private let rfc = CachingPolicy.rfc9111

    private func at(_ seconds: TimeInterval) -> Date { F.start.addingTimeInterval(seconds) }

    /// §5.1: of a list-valued `Age`, the first member counts; a first member that is not a
    /// non-negative integer is ignored; values beyond 2^31 count as 2^31.
    func testAgeParsing() {
        let cases: [(String, Int?)] = [
            ("30", 30), ("  30 ", 30), ("7200, 0", 7200), ("0, 7200", 0), ("0, 0", 0),
            ("abc", nil), ("-7200", nil), ("7200.0", nil), ("10a", nil), ("7200;foo=bar", nil), ("", nil),
            ("2147483647", 2_147_483_647), ("2147483649", 2_147_483_648), ("99999999999999999999", 2_147_483_648),
        ]
        for (value, expected) in cases {
            XCTAssertEqual(CachingPolicy.ageValue(HTTPHeaders(["Age": value])), expected, value)
        }
        let twoLines = HTTPHeaders([.init(name: "Age", value: "7200"), .init(name: "Age", value: "0")])
        XCTAssertEqual(CachingPolicy.ageValue(twoLines), 7200, "the first line")
        XCTAssertNil(CachingPolicy.ageValue(HTTPHeaders()))
    }

    /// An `Age` of 7200 on a response fresh for 3600 makes it stale at once; an invalid one is
    /// ignored.
    func testAgeDecidesFreshness() {
        let stale = F.entry(["Cache-Control": "max-age=3600", "Age": "7200, 0", "ETag": "\"a\""], policy: rfc)!
        XCTAssertLessThan(stale.timeToLive(at: F.start), 0)
        let ignored = F.entry(["Cache-Control": "max-age=3600", "Age": "abc"], policy: rfc)!
        XCTAssertEqual(ignored.timeToLive(at: F.start), 3600)
    }

    /// §5.3: an `Expires` that is not a valid HTTP-date means already expired.
    func testInvalidExpiresIsAlreadyExpired() {
        for expires in ["Thu, 18 Aug 2050 02:01:18 UTC", "Thu, 18 Aug 50 02:01:18 GMT", "Thu 18 Aug 2050 02:01:18 GMT",
                        "Thu, 18  Aug  2050 02:01:18 GMT", "Thu, 18-Aug-2050 02:01:18 GMT", "Thu, 18 Aug 2050 2:01:18 GMT", "0"] {
            let entry = F.entry(["Expires": expires, "Date": F.httpDate(0), "ETag": "\"a\""], policy: rfc)
            XCTAssertEqual(entry?.freshnessLifetime, 0, expires)
        }
        let valid = F.entry(["Expires": F.httpDate(600), "Date": F.httpDate(0)], policy: rfc)
        XCTAssertEqual(valid?.freshnessLifetime, 600)
    }

    /// §3.1: `Connection`, the fields it names and the hop-by-hop fields are not stored.
    func testHopByHopFieldsAreNotStored() {
        let received = HTTPHeaders([
            .init(name: "Connection", value: "a, B"), .init(name: "a", value: "1"), .init(name: "b", value: "2"),
            .init(name: "c", value: "3"), .init(name: "Keep-Alive", value: "timeout=5"), .init(name: "TE", value: "trailers"),
            .init(name: "Transfer-Encoding", value: "chunked"), .init(name: "Upgrade", value: "h2c"),
            .init(name: "Proxy-Connection", value: "keep-alive"), .init(name: "Proxy-Authenticate", value: "Basic"),
            .init(name: "Proxy-Authentication-Info", value: "x"), .init(name: "Proxy-Authorization", value: "y"),
            .init(name: "Content-Type", value: "text/plain"), .init(name: "Set-Cookie", value: "s=1"),
        ])
        let stored = CachingPolicy.storableHeaders(received)
        XCTAssertEqual(stored.fields.map(\.name), ["c", "Content-Type", "Set-Cookie"])
        let plain = HTTPHeaders(["Content-Type": "text/plain", "ETag": "\"a\""])
        XCTAssertEqual(CachingPolicy.storableHeaders(plain), plain, "nothing to drop, nothing changed")
        let merged = CachingPolicy.headersAfterValidation(stored: plain, received: HTTPHeaders(["Connection": "x", "x": "1", "Y": "2"]))
        XCTAssertNil(merged["x"], "a 304 does not bring hop-by-hop fields either")
        XCTAssertEqual(merged["Y"], "2")
    }

    /// §7.1: a private cache may store a response that sets a cookie; this one keeps it in
    /// memory only.
    func testSetCookieIsStoredInMemoryOnly() {
        XCTAssertNotNil(F.entry(["Cache-Control": "max-age=60", "Set-Cookie": "a=b"], policy: rfc))
        XCTAssertTrue(CachingPolicy.isKeptInMemoryOnly(HTTPHeaders(["Set-Cookie": "a=b"])))
        XCTAssertFalse(CachingPolicy.isKeptInMemoryOnly(HTTPHeaders(["Cache-Control": "max-age=60"])))
    }

    /// `Vary: Accept-Language`: case and order do not make requests different, and a request
    /// whose most preferred language is the variant's `Content-Language` selects it.
    func testAcceptLanguageNormalisation() {
        func stored(_ accept: String, contentLanguage: String? = nil) -> CacheEntry {
            var headers = ["Cache-Control": "max-age=600", "Vary": "Accept-Language"]
            if let contentLanguage { headers["Content-Language"] = contentLanguage }
            return F.entry(headers, policy: rfc, request: F.request(["Accept-Language": accept]))!
        }
        let cases: [(String, String?, String, Bool)] = [
            ("en, de", nil, "en, de", true),
            ("en, de", nil, "de, en", true),
            ("en, de", nil, "eN, De", true),
            ("en, de", nil, "en;q=1.0, de", true),
            ("en, de", nil, "en", false),
            ("en, de", nil, "en, de;q=0.5", false),
            ("en, de", "de", "fr;q=0.5, de;q=1.0", true),
            ("en, de", "de", "fr, de;q=0.5", false),
            ("en, de", "de", "de, fr", false),
            ("en, de", "de, en", "de", false),
        ]
        for (storedAccept, language, requested, matches) in cases {
            let record = CacheRecord(key: "k", variants: [stored(storedAccept, contentLanguage: language)])
            let found = CachingPolicy.matchingVariant(in: record, for: F.request(["Accept-Language": requested]))
            XCTAssertEqual(found != nil, matches, "\(storedAccept) (\(language ?? "-")) vs \(requested)")
        }
    }

    /// RFC 8246: a fresh `immutable` response is used on a reload; a stale one is revalidated.
    func testImmutable() {
        let entry = F.entry(["Cache-Control": "max-age=100, immutable", "ETag": "\"a\""], policy: rfc)!
        let reload = F.request(cachePolicy: .reloadRevalidatingCacheData)
        XCTAssertEqual(rfc.plan(for: reload, stored: entry, now: at(50)), .answerStored(entry, isStale: false))
        XCTAssertEqual(rfc.plan(for: reload, stored: entry, now: at(150)), .send(.revalidate(entry, RevalidationConditions(entry)!)))
        let mutable = F.entry(["Cache-Control": "max-age=100", "ETag": "\"a\""], policy: rfc)!
        XCTAssertEqual(rfc.plan(for: reload, stored: mutable, now: at(50)), .send(.revalidate(mutable, RevalidationConditions(mutable)!)))
    }

    /// §5.2.2.3: `must-understand` with a status the cache understands overrides `no-store`;
    /// with one it does not, nothing is stored.
    func testMustUnderstand() {
        let headers = HTTPHeaders(["Cache-Control": "max-age=3600, no-store, must-understand"])
        for (status, stored) in [(200, true), (404, true), (299, false), (599, false)] {
            let decision = rfc.storageDecision(for: F.request(), status: status, headers: headers, requestDate: F.start, responseDate: F.start)
            if case .store = decision { XCTAssertTrue(stored, "\(status)") } else { XCTAssertFalse(stored, "\(status)") }
        }
        let plainNoStore = rfc.storageDecision(for: F.request(), status: 200, headers: HTTPHeaders(["Cache-Control": "max-age=3600, no-store"]),
                                               requestDate: F.start, responseDate: F.start)
        XCTAssertEqual(plainNoStore, .doNotStore(reason: "no-store"))
    }

    /// §4.2.2: heuristic freshness for the statuses cacheable by default, and for any status
    /// marked `public`.
    func testHeuristicFreshnessByStatus() {
        let lastModified = ["Last-Modified": F.httpDate(-86_400 * 10), "Date": F.httpDate(0)]
        for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
            XCTAssertEqual(F.entry(lastModified, status: status, policy: rfc)?.freshnessLifetime, 86_400, "\(status)")
        }
        XCTAssertNil(F.entry(lastModified, status: 599, policy: rfc), "599 is not cacheable by default")
        var publicHeaders = lastModified
        publicHeaders["Cache-Control"] = "public"
        XCTAssertEqual(F.entry(publicHeaders, status: 599, policy: rfc)?.freshnessLifetime, 86_400, "public makes any status heuristic")
    }

    /// §4.2.4: a disconnected cache may serve a stale response (the RFC preset for up to a week);
    /// after a 5xx only `stale-if-error` allows it there; never with `must-revalidate`.
    func testStaleWhenDisconnected() {
        let entry = F.entry(["Cache-Control": "max-age=60", "ETag": "\"a\""], policy: rfc)!
        XCTAssertTrue(rfc.mayServeAfterError(entry, request: F.request(), now: at(3_600), disconnected: true))
        XCTAssertFalse(rfc.mayServeAfterError(entry, request: F.request(), now: at(3_600)), "a 5xx is not a disconnection")
        XCTAssertFalse(rfc.mayServeAfterError(entry, request: F.request(), now: at(60 + 604_801), disconnected: true))
        let strict = F.entry(["Cache-Control": "max-age=60, must-revalidate", "ETag": "\"a\""], policy: rfc)!
        XCTAssertFalse(rfc.mayServeAfterError(strict, request: F.request(), now: at(3_600), disconnected: true))
        let heuristic = CachingPolicy.heuristic()
        XCTAssertEqual(heuristic.maximumStalenessWhenDisconnected, nil, "the heuristic preset uses maximumStaleness for both")
        XCTAssertTrue(heuristic.mayServeAfterError(entry, request: F.request(), now: at(3_600)))
    }
}

/// `Range: bytes=…` (RFC 9110 §14.1.2): one byte range is parsed; the cache answers it from a
/// complete stored response (RFC 9111 §3.4).
final class ByteRangeTests: LoaderRulesTestCase {
    func testParsingAndBounds() {
        let cases: [(String, Int, ClosedRange<Int>?)] = [
            ("bytes=0-1", 11, 0...1), ("bytes=1-", 11, 1...10), ("bytes=-1", 11, 10...10), ("bytes=-20", 11, 0...10),
            ("bytes=5-100", 11, 5...10), ("BYTES = 2 - 3", 11, 2...3), ("bytes=11-", 11, nil), ("bytes=0-0", 0, nil),
        ]
        for (value, length, bounds) in cases {
            XCTAssertEqual(ByteRange(value)?.bounds(in: length), bounds, value)
        }
        for invalid in ["bytes=0-1,3-4", "items=0-1", "bytes=3-1", "bytes=-0", "bytes=-", "bytes=a-b", "bytes 0-1", "0-1", ""] {
            XCTAssertNil(ByteRange(invalid), invalid)
        }
    }

    func testOnlyACompleteUnencodedResponseAnswersARange() {
        typealias F = PolicyFixtures
        let complete = F.entry(["Cache-Control": "max-age=60"])!
        XCTAssertEqual(CachingPolicy.servesRange(ByteRange("bytes=0-1")!, from: complete)?.bounds, 0...1)
        let encoded = F.entry(["Cache-Control": "max-age=60", "Content-Encoding": "gzip"])!
        XCTAssertNil(CachingPolicy.servesRange(ByteRange("bytes=0-1")!, from: encoded))
        let notFound = F.entry(["Cache-Control": "max-age=60"], status: 404, policy: .rfc9111)!
        XCTAssertNil(CachingPolicy.servesRange(ByteRange("bytes=0-1")!, from: notFound))
    }
}

/// Partial content (RFC 9111 §3.3–3.4, RFC 9110 §14.4): which stored parts answer which ranges,
/// and what is stored when a new part arrives.
final class PartialContentRulesTests: LoaderRulesTestCase {
    /// A stored part: `Content-Range: bytes first-last/length` over `bytes`, with `etag`.
    private func part(_ first: Int, _ last: Int, of length: Int = 10, etag: String? = "\"a\"",
                      bytes: String? = nil, extra: [String: String] = [:]) -> CacheEntry {
        let digits = Array("0123456789abcdefghij")
        let body = bytes ?? String(digits[first...last])
        var fields = ["Content-Range": "bytes \(first)-\(last)/\(length)", "Content-Length": String(body.utf8.count)]
        if let etag { fields["ETag"] = etag }
        fields.merge(extra) { $1 }
        return CacheEntry(responseURL: PolicyFixtures.url.absoluteString, statusCode: 206, headers: HTTPHeaders(fields),
                          body: Data(body.utf8), requestDate: PolicyFixtures.start, responseDate: PolicyFixtures.start,
                          initialAge: 0, freshnessLifetime: 60, varyFields: [], partition: .anonymous, userInfo: nil)
    }

    func testContentRangeParsing() {
        XCTAssertEqual(ContentRange("bytes 0-4/10"), ContentRange(first: 0, last: 4, completeLength: 10))
        XCTAssertEqual(ContentRange("  Bytes 9-9/10 "), ContentRange(first: 9, last: 9, completeLength: 10))
        for invalid in ["bytes 0-4/*", "bytes */10", "bytes 4-0/10", "bytes 0-10/10", "items 0-4/10", "bytes 0-4", "bytes -4/10",
                        "bytes 0-4/1a", "bytes=0-4/10", "bytes 0-4,6-7/10", ""] {
            XCTAssertNil(ContentRange(invalid), invalid)
        }
    }

    func testAStoredPartAnswersOnlyTheRangesInsideIt() {
        let stored = part(4, 8)   // "45678"
        let cases: [(String, ClosedRange<Int>?, Int?)] = [
            ("bytes=4-8", 4...8, 0), ("bytes=5-6", 5...6, 1), ("bytes=8-", nil, nil), ("bytes=6-", nil, nil),
            ("bytes=-2", nil, nil), ("bytes=3-5", nil, nil), ("bytes=0-0", nil, nil), ("bytes=20-", nil, nil),
        ]
        for (value, bounds, offset) in cases {
            let range = CachingPolicy.servesRange(ByteRange(value)!, from: stored)
            XCTAssertEqual(range?.bounds, bounds, value)
            XCTAssertEqual(range?.bodyOffset, offset, value)
        }
        // bytes=8- selects 8-9 of ten bytes: 9 is not stored. A part that ends at the last byte
        // answers open and suffix ranges.
        let tail = part(5, 9)
        XCTAssertEqual(CachingPolicy.servesRange(ByteRange("bytes=7-")!, from: tail)?.contentRange.fieldValue, "bytes 7-9/10")
        XCTAssertEqual(CachingPolicy.servesRange(ByteRange("bytes=-3")!, from: tail)?.bodyOffset, 2)
        XCTAssertNil(CachingPolicy.servesRange(ByteRange("bytes=-6")!, from: tail))
        // A part whose Content-Range does not describe its body, or that is encoded, answers nothing.
        XCTAssertNil(CachingPolicy.servesRange(ByteRange("bytes=5-6")!, from: part(4, 9, bytes: "01234")))
        XCTAssertNil(CachingPolicy.servesRange(ByteRange("bytes=5-6")!, from: part(4, 8, extra: ["Content-Encoding": "gzip"])))
    }

    func testAPartNeverAnswersARequestForTheWhole() {
        let record = CacheRecord(key: PolicyFixtures.request().key, variants: [part(0, 4)])
        XCTAssertNil(CachingPolicy.matchingVariant(in: record, for: PolicyFixtures.request()))
        XCTAssertNotNil(CachingPolicy.matchingVariant(in: record, for: PolicyFixtures.request(["Range": "bytes=0-1"])))
    }

    func testWhatIsStoredWhenAPartArrives() {
        func text(_ entry: CacheEntry?) -> String? { entry.map { String(decoding: $0.body, as: UTF8.self) } }
        let complete = PolicyFixtures.entry(["ETag": "\"a\"", "Cache-Control": "max-age=60"])!   // body "body", 4 bytes

        // Nothing stored, or nothing to combine with: the new part as it is.
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(2, 5), over: nil)), "2345")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(6, 9), over: part(0, 3))), "6789", "a gap between the parts")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(4, 9, etag: "\"b\""), over: part(0, 4))), "456789", "another ETag")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(4, 9, etag: "W/\"a\""), over: part(0, 4, etag: "W/\"a\""))),
                       "456789", "weak ETags do not combine")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(4, 9, etag: nil), over: part(0, 4, etag: nil))), "456789",
                       "no validator")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(0, 4, of: 20), over: part(5, 9))), "01234", "another length")

        // Not stored at all: inconsistent or encoded parts, or a part of a whole already stored.
        XCTAssertNil(CachingPolicy.partialContentToStore(part(4, 9, bytes: "01234"), over: nil))
        XCTAssertNil(CachingPolicy.partialContentToStore(part(0, 4, extra: ["Content-Encoding": "gzip"]), over: nil))
        XCTAssertNil(CachingPolicy.partialContentToStore(part(0, 1, of: 4), over: complete))
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(0, 1, of: 4, etag: "\"b\""), over: complete)), "01",
                       "a part of another representation replaces the stored whole")

        // Combined: overlapping or touching parts of one representation, the new bytes winning.
        let overlapping = CachingPolicy.partialContentToStore(part(3, 7, bytes: "DEFGH", extra: ["X": "new"]),
                                                               over: part(0, 4, extra: ["X": "old"]))
        XCTAssertEqual(text(overlapping), "012DEFGH")
        XCTAssertEqual(overlapping?.statusCode, 206)
        XCTAssertEqual(overlapping?.headers["Content-Range"], "bytes 0-7/10")
        XCTAssertEqual(overlapping?.headers["Content-Length"], "8")
        XCTAssertEqual(overlapping?.headers["X"], "new", "the new response's fields")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(2, 3), over: part(4, 6))), "23456", "touching, new part first")
        XCTAssertEqual(text(CachingPolicy.partialContentToStore(part(3, 4), over: part(0, 9))), "0123456789", "inside the stored part")

        // The whole, combined, is a complete 200 response.
        let whole = CachingPolicy.partialContentToStore(part(5, 9), over: part(0, 4))
        XCTAssertEqual(whole?.statusCode, 200)
        XCTAssertEqual(text(whole), "0123456789")
        XCTAssertNil(whole?.headers["Content-Range"])
        XCTAssertEqual(whole?.headers["Content-Length"], "10")
    }

    func testWhichPoliciesStorePartialContent() {
        XCTAssertTrue(CachingPolicy.rfc9111.storesPartialContent)
        XCTAssertFalse(CachingPolicy.heuristic().storesPartialContent, "200 and 203 only")
        var heuristic = CachingPolicy.heuristic()
        heuristic.cacheableStatusCodes = [200, 203, 206]
        XCTAssertTrue(heuristic.storesPartialContent)
    }
}
