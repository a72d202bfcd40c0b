import XCTest
@testable import CachingProtocol

final class CacheControlTests: LoaderRulesTestCase {
    func testParsesEveryDirective() {
        let parsed = CacheControl("public, max-age=60, s-maxage=30, must-revalidate, no-transform, "
                                  + "stale-while-revalidate=5, stale-if-error=600, immutable")
        XCTAssertTrue(parsed.isPublic)
        XCTAssertEqual(parsed.maxAge, 60)
        XCTAssertEqual(parsed.sharedMaxAge, 30)
        XCTAssertTrue(parsed.mustRevalidate)
        XCTAssertTrue(parsed.noTransform)
        XCTAssertEqual(parsed.staleWhileRevalidate, 5)
        XCTAssertEqual(parsed.staleIfError, 600)
        XCTAssertTrue(parsed.immutable)
        XCTAssertFalse(parsed.hasInvalidFreshness)
    }

    func testRequestDirectives() {
        let parsed = CacheControl("max-stale, min-fresh=10, only-if-cached, no-cache, no-store")
        XCTAssertEqual(parsed.maxStale, .any)
        XCTAssertEqual(parsed.minFresh, 10)
        XCTAssertTrue(parsed.onlyIfCached)
        XCTAssertTrue(parsed.noCache)
        XCTAssertTrue(parsed.noStore)
        XCTAssertEqual(CacheControl("max-stale=30").maxStale, .seconds(30))
    }

    /// Bad `max-age` values never crash and never make a response fresh: RFC 9111 §4.2.1.
    func testMalformedMaxAgeIsStale() {
        let cases: [(String, Int?, Bool)] = [
            ("max-age=-1", 0, true),
            ("max-age=abc", 0, true),
            ("max-age=1.5", 0, true),
            ("max-age=", 0, true),
            ("max-age", 0, true),
            ("max-age=60, max-age=120", 0, true),
            ("max-age=60, max-age=60", 60, false),
            ("max-age=\"60\"", 60, false),
            ("MAX-AGE=60", 60, false),
            ("max-age = 60", 60, false),
            ("max-age=99999999999999999999999", CacheControl.maximumDeltaSeconds, false),
        ]
        for (value, maxAge, invalid) in cases {
            let parsed = CacheControl(value)
            XCTAssertEqual(parsed.maxAge, maxAge, value)
            XCTAssertEqual(parsed.hasInvalidFreshness, invalid, value)
        }
    }

    /// Optional whitespace (spaces and tabs, RFC 9110 §5.6.3) around a value, before the comma
    /// that ends it, is not part of the value: `max-age=60 , public` is 60 seconds and public.
    func testWhitespaceBeforeTheCommaIsNotPartOfTheValue() {
        let cases: [(String, Int?, Bool)] = [
            ("max-age=60 , public", 60, true),
            ("max-age=60\t,public", 60, true),
            ("max-age=60 \t , public", 60, true),
            ("public , max-age=60 ", 60, true),
            ("max-age=60\t", 60, false),
            ("max-age = 60 ,public", 60, true),
            ("max-age=\"60\" , public", 60, true),
        ]
        for (value, maxAge, isPublic) in cases {
            let parsed = CacheControl(value)
            XCTAssertEqual(parsed.maxAge, maxAge, value)
            XCTAssertFalse(parsed.hasInvalidFreshness, value)
            XCTAssertEqual(parsed.isPublic, isPublic, value)
        }
        XCTAssertEqual(CacheControl("stale-if-error=600 , max-stale=30\t,min-fresh=5 ").staleIfError, 600)
        XCTAssertEqual(CacheControl("max-stale=30\t,min-fresh=5 ").maxStale, .seconds(30))
        XCTAssertEqual(CacheControl("max-stale=30\t,min-fresh=5 ").minFresh, 5)
    }

    func testQuotedValuesWithCommasAndEscapes() {
        let parsed = CacheControl(#"private="Set-Cookie, X-Secret", no-cache="a\"b", max-age=5"#)
        XCTAssertTrue(parsed.isPrivate)
        XCTAssertTrue(parsed.noCache)
        XCTAssertEqual(parsed.maxAge, 5)
    }

    func testGarbageIsIgnored() {
        for garbage in ["", ",,,", "=", "==5", "\u{0}\u{1}", "max-age=\u{7}", "\"unterminated", String(repeating: "a,", count: 5000)] {
            let parsed = CacheControl(garbage)
            XCTAssertNil(parsed.maxAge.flatMap { $0 > 0 ? $0 : nil }, garbage)
        }
    }
}

final class HTTPDateTests: LoaderRulesTestCase {
    private let reference = Date(timeIntervalSince1970: 784_111_777)   // Sun, 06 Nov 1994 08:49:37 GMT

    func testParsesTheThreeFormats() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), reference)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), reference)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), reference)
    }

    func testFormatsIMFFixdate() {
        XCTAssertEqual(HTTPDate.format(reference), "Sun, 06 Nov 1994 08:49:37 GMT")
        let leapDay = HTTPDate.parse("Thu, 29 Feb 2024 23:59:59 GMT")!
        XCTAssertEqual(HTTPDate.format(leapDay), "Thu, 29 Feb 2024 23:59:59 GMT")
        XCTAssertEqual(HTTPDate.parse(HTTPDate.format(Date(timeIntervalSince1970: 0))), Date(timeIntervalSince1970: 0))
    }

    func testRejectsGarbage() {
        let garbage = ["", "0", "-1", "tomorrow", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 2023 08:49:37 GMT",
                       "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 PST",
                       "Sun, 06 Nov 1994 08:49:37 GMT\r\nSet-Cookie: x", "Sun,\u{0}06 Nov 1994 08:49:37 GMT",
                       String(repeating: "9", count: 1000)]
        for text in garbage {
            XCTAssertNil(HTTPDate.parse(text), text)
        }
    }

    /// RFC 9110 §5.6.7's grammar, exactly: the forms the HTTP caching tests call invalid are
    /// rejected (RFC 9111 §5.3: an invalid `Expires` means already expired), names in any case
    /// are accepted.
    func testOnlyTheGrammarsFormsParse() {
        let date = Date(timeIntervalSince1970: 2_544_400_878)   // Thu, 18 Aug 2050 02:01:18 GMT
        for valid in ["Thu, 18 Aug 2050 02:01:18 GMT", "THU, 18 Aug 2050 02:01:18 GMT", "Thu, 18 AUG 2050 02:01:18 GMT",
                      "Thu, 18 Aug 2050 02:01:18 gMT", "Thursday, 18-Aug-50 02:01:18 GMT", "Thu Aug 18 02:01:18 2050"] {
            XCTAssertEqual(HTTPDate.parse(valid), date, valid)
        }
        XCTAssertEqual(HTTPDate.parse("Mon Aug  8 02:01:18 2050"), Date(timeIntervalSince1970: 2_543_536_878))
        for invalid in ["Thu, 18 Aug 2050 02:01:18 UTC", "Thu, 18 Aug 2050 02:01:18 AEST", "Thu, 18 Aug 50 02:01:18 GMT",
                        "Thu 18 Aug 2050 02:01:18 GMT", "Thu, 18  Aug  2050 02:01:18 GMT", "Thu, 18-Aug-2050 02:01:18 GMT",
                        "Thu, 18 Aug 2050 02.01.18 GMT", "Thu, 18 Aug 2050 2:01:18 GMT",
                        "Thu, 18 Aug 2050 02:01:18 GMT, Thu, 18 Aug 2050 02:01:19 GMT", "Thu, 8 Aug 2050 02:01:18 GMT",
                        " Thu, 18 Aug 2050 02:01:18 GMT", "Thu, 18 Aug 2050 02:01:18 GMT ", "Thursday, 18 Aug 2050 02:01:18 GMT",
                        "Thu, 18-Aug-50 02:01:18 GMT", "Thu Aug 8 02:01:18 2050"] {
            XCTAssertNil(HTTPDate.parse(invalid), invalid)
        }
    }
}

final class HTTPHeadersTests: LoaderRulesTestCase {
    func testLookupIsCaseInsensitiveAndJoinsRepeats() {
        let headers = HTTPHeaders([.init(name: "Cache-Control", value: "max-age=5"), .init(name: "cache-control", value: "public")])
        XCTAssertEqual(headers["CACHE-CONTROL"], "max-age=5, public")
        XCTAssertTrue(headers.contains("cache-control"))
        XCTAssertNil(headers["ETag"])
    }

    func testSetReplacesEveryOccurrenceInPlace() {
        var headers = HTTPHeaders([.init(name: "A", value: "1"), .init(name: "ETag", value: "x"),
                                   .init(name: "B", value: "2"), .init(name: "etag", value: "y")])
        headers.set("ETag", "z")
        XCTAssertEqual(headers.fields.map(\.name), ["A", "ETag", "B"])
        XCTAssertEqual(headers["etag"], "z")
        headers.remove("ETAG")
        XCTAssertEqual(headers.fields.map(\.name), ["A", "B"])
    }
}
