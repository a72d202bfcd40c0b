import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import CachingProtocol

/// How a stored response is reused: the plan table, driven by an injected time.
final class ReusePlanTests: LoaderRulesTestCase {
    private typealias F = PolicyFixtures
    private let heuristic = CachingPolicy.heuristic()

    private func at(_ seconds: TimeInterval) -> Date { F.start.addingTimeInterval(seconds) }

    func testFreshThenRevalidateWithTheRightValidator() {
        let etag = F.entry(["ETag": "\"v1\""])!
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: etag, now: at(86_399)), .answerStored(etag, isStale: false))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: etag, now: at(86_400)),
                       .send(.revalidate(etag, RevalidationConditions(etag)!)))
        XCTAssertEqual(RevalidationConditions(etag), RevalidationConditions(etag))
        XCTAssertEqual(RevalidationConditions(etag)?.ifNoneMatch, "\"v1\"")
        XCTAssertNil(RevalidationConditions(etag)?.ifModifiedSince)

        let modified = F.entry(["Last-Modified": F.httpDate(-10)])!
        XCTAssertEqual(RevalidationConditions(modified)?.ifModifiedSince, F.httpDate(-10))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: modified, now: at(86_400)),
                       .send(.revalidate(modified, RevalidationConditions(modified)!)))
    }

    func testExpiredWithoutValidatorIsRefetched() {
        let maxAge = F.entry(["Cache-Control": "max-age=60"])!
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: maxAge, now: at(59)), .answerStored(maxAge, isStale: false))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: maxAge, now: at(60)), .send(.fetch(fallback: maxAge, forward: .stale)))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: nil, now: at(0)), .send(.fetch(fallback: nil, forward: .uriMiss)))
    }

    func testNoCacheIsReusedForSixtySecondsThenRevalidated() {
        let noCache = F.entry(["Cache-Control": "no-cache", "ETag": "\"v1\""])!
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: noCache, now: at(59)), .answerStored(noCache, isStale: false))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: noCache, now: at(61)),
                       .send(.revalidate(noCache, RevalidationConditions(noCache)!)))
    }

    func testRequestDirectives() {
        let entry = F.entry(["Cache-Control": "max-age=600", "ETag": "\"v1\""])!
        let conditions = RevalidationConditions(entry)!
        let cases: [(String, [String: String], TimeInterval, LoadPlan)] = [
            ("no-cache forces revalidation", ["Cache-Control": "no-cache"], 10, .send(.revalidate(entry, conditions))),
            ("Pragma: no-cache too", ["Pragma": "no-cache"], 10, .send(.revalidate(entry, conditions))),
            ("max-age=0", ["Cache-Control": "max-age=0"], 10, .send(.revalidate(entry, conditions))),
            ("max-age larger than the age", ["Cache-Control": "max-age=100"], 10, .answerStored(entry, isStale: false)),
            ("min-fresh beyond the time left", ["Cache-Control": "min-fresh=595"], 10, .send(.revalidate(entry, conditions))),
            ("max-stale covers the staleness", ["Cache-Control": "max-stale=100"], 650, .answerStored(entry, isStale: true)),
            ("max-stale too small", ["Cache-Control": "max-stale=10"], 650, .send(.revalidate(entry, conditions))),
            ("max-stale without value", ["Cache-Control": "max-stale"], 99_999, .answerStored(entry, isStale: true)),
            ("only-if-cached and fresh", ["Cache-Control": "only-if-cached"], 10, .answerStored(entry, isStale: false)),
            ("only-if-cached and stale", ["Cache-Control": "only-if-cached"], 700, .unavailable(gatewayTimeout: true)),
        ]
        for (name, headers, time, expected) in cases {
            XCTAssertEqual(heuristic.plan(for: F.request(headers), stored: entry, now: at(time)), expected, name)
        }
        XCTAssertEqual(heuristic.plan(for: F.request(["Cache-Control": "only-if-cached"]), stored: nil, now: at(0)), .unavailable(gatewayTimeout: true))
    }

    func testMustRevalidateIsNeverServedStale() {
        let entry = F.entry(["Cache-Control": "max-age=60, must-revalidate", "ETag": "\"v1\""])!
        XCTAssertEqual(heuristic.plan(for: F.request(["Cache-Control": "max-stale"]), stored: entry, now: at(100)),
                       .send(.revalidate(entry, RevalidationConditions(entry)!)))
        XCTAssertFalse(heuristic.mayServeAfterError(entry, request: F.request(), now: at(100)))
    }

    func testStaleWhileRevalidate() {
        let entry = F.entry(["Cache-Control": "max-age=60, stale-while-revalidate=30", "ETag": "\"v1\""])!
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: entry, now: at(80)),
                       .answerStaleAndRevalidate(entry, RevalidationConditions(entry)!))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: entry, now: at(91)),
                       .send(.revalidate(entry, RevalidationConditions(entry)!)))
    }

    func testCachePolicyModes() {
        let entry = F.entry(["Cache-Control": "max-age=60", "ETag": "\"v1\""])!
        let cases: [(URLRequest.CachePolicy, TimeInterval, CacheEntry?, LoadPlan)] = [
            (.reloadIgnoringLocalCacheData, 0, entry, .send(.fetch(fallback: entry, forward: .request))),
            (.reloadIgnoringLocalAndRemoteCacheData, 0, entry, .send(.fetch(fallback: entry, forward: .request))),
            (.reloadRevalidatingCacheData, 0, entry, .send(.revalidate(entry, RevalidationConditions(entry)!))),
            (.returnCacheDataElseLoad, 10_000, entry, .answerStored(entry, isStale: true)),
            (.returnCacheDataElseLoad, 0, nil, .send(.fetch(fallback: nil, forward: .uriMiss))),
            (.returnCacheDataDontLoad, 10_000, entry, .answerStored(entry, isStale: true)),
            (.returnCacheDataDontLoad, 0, nil, .unavailable(gatewayTimeout: false)),
        ]
        for (mode, time, stored, expected) in cases {
            XCTAssertEqual(heuristic.plan(for: F.request(cachePolicy: mode), stored: stored, now: at(time)), expected, "\(mode)")
        }
    }

    func testOfflineModeServesAnythingStored() {
        let entry = F.entry(["Cache-Control": "max-age=60"])!
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: entry, now: at(1_000_000), offline: true), .answerStored(entry, isStale: true))
        XCTAssertEqual(heuristic.plan(for: F.request(), stored: nil, now: at(0), offline: true), .unavailable(gatewayTimeout: false))
    }

    func testStaleIfErrorWindows() {
        let entry = F.entry(["Cache-Control": "max-age=60"])!
        XCTAssertTrue(heuristic.mayServeAfterError(entry, request: F.request(), now: at(86_400)))
        XCTAssertFalse(heuristic.mayServeAfterError(entry, request: F.request(), now: at(60 + 604_801)))
        XCTAssertFalse(heuristic.mayServeAfterError(F.entry(["Cache-Control": "no-cache"])!, request: F.request(), now: at(100)))

        let strict = CachingPolicy.rfc9111
        let plain = F.entry(["Cache-Control": "max-age=60"], policy: strict)!
        XCTAssertFalse(strict.mayServeAfterError(plain, request: F.request(), now: at(61)))
        let allowed = F.entry(["Cache-Control": "max-age=60, stale-if-error=600"], policy: strict)!
        XCTAssertTrue(strict.mayServeAfterError(allowed, request: F.request(), now: at(600)))
        XCTAssertFalse(strict.mayServeAfterError(allowed, request: F.request(), now: at(700)))
        XCTAssertTrue(strict.mayServeAfterError(plain, request: F.request(["Cache-Control": "stale-if-error=100"]), now: at(100)))
    }

    func testVaryAndCredentialsSelectTheVariant() {
        let english = F.entry(["Cache-Control": "max-age=60", "Vary": "Accept-Language"],
                              request: F.request(["Accept-Language": "en,  de"]))!
        let anonymous = F.entry(["Cache-Control": "max-age=60", "Vary": "Accept-Language"])!
        let record = CacheRecord(key: "k", variants: [english, anonymous])
        XCTAssertEqual(CachingPolicy.matchingVariant(in: record, for: F.request(["Accept-Language": "en, de"])), english)
        XCTAssertEqual(CachingPolicy.matchingVariant(in: record, for: F.request()), anonymous)
        XCTAssertNil(CachingPolicy.matchingVariant(in: record, for: F.request(["Accept-Language": "fr"])))

        var optIn = CachingPolicy.heuristic()
        optIn.storesCredentialedResponses = true
        let alice = F.entry(["Cache-Control": "max-age=60"], policy: optIn, request: F.request(["Authorization": "Bearer alice"]))!
        let shared = CacheRecord(key: "k", variants: [alice])
        XCTAssertEqual(CachingPolicy.matchingVariant(in: shared, for: F.request(["Authorization": "Bearer alice"])), alice)
        XCTAssertNil(CachingPolicy.matchingVariant(in: shared, for: F.request(["Authorization": "Bearer bob"])))
        XCTAssertNil(CachingPolicy.matchingVariant(in: shared, for: F.request()))
    }

    func testCacheKeysKeepTheQueryAndDropTheFragment() {
        let first = CacheKey.make(method: "GET", url: URL(string: "https://Example.COM/Path?page=1#top")!)
        XCTAssertEqual(first, "GET https://example.com/Path?page=1")
        XCTAssertEqual(CacheKey.make(method: "GET", url: URL(string: "HTTP://Host:8080?Q=A")!), "GET http://host:8080?Q=A")
        XCTAssertEqual(CacheKey.make(method: "GET", url: URL(string: "http://host/A/B?C#D")!), "GET http://host/A/B?C")
        XCTAssertNotEqual(first, CacheKey.make(method: "GET", url: URL(string: "https://example.com/Path?page=2")!))
    }

    func testDispositions() {
        func disposition(_ method: String, _ headers: [String: String] = [:], url: String = "https://example.com/a") -> RequestDisposition {
            var request = URLRequest(url: URL(string: url)!)
            request.httpMethod = method
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            return RequestDisposition(request)
        }
        XCTAssertEqual(disposition("GET"), .cacheable)
        XCTAssertEqual(disposition("get"), .cacheable)
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            XCTAssertEqual(disposition(method), .invalidate, method)
        }
        XCTAssertEqual(disposition("HEAD"), .passThrough)
        XCTAssertEqual(disposition("GET", ["If-None-Match": "\"x\""]), .passThrough)
        XCTAssertEqual(disposition("GET", ["If-Modified-Since": F.httpDate(0)]), .passThrough)
        XCTAssertEqual(disposition("GET", ["Range": "bytes=0-1"]), .range(ByteRange("bytes=0-1")!), "answered from the store if it can")
        XCTAssertEqual(disposition("GET", ["Range": "bytes=0-1,4-5"]), .passThrough, "several ranges go to the origin")
        XCTAssertEqual(disposition("GET", ["Range": "bytes=0-1", "If-Range": "\"x\""]), .passThrough)
        XCTAssertEqual(disposition("GET", ["Accept": "text/event-stream"]), .passThrough)
        XCTAssertEqual(disposition("GET", ["if-none-match": "\"x\""]), .passThrough)
        XCTAssertEqual(disposition("GET", ["Upgrade": "websocket"]), .passThrough)
        XCTAssertEqual(disposition("GET", ["Accept": "*/*", "X-Other": "1"]), .cacheable)
        XCTAssertEqual(disposition("GET", ["Cache-Control": "no-store"]), .passThrough)
        XCTAssertEqual(disposition("GET", url: "ftp://example.com/a"), .passThrough)
    }
}
