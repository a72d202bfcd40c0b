import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import CachingProtocol

/// What is stored and for how long: every rule of the contract as a table, for both presets.
final class StorageDecisionTests: LoaderRulesTestCase {
    private typealias F = PolicyFixtures

    private struct Case {
        let name: String
        let headers: [String: String]
        var status = 200
        /// Request header fields (none by default).
        var request: [String: String] = [:]
        /// Expected freshness lifetime, or nil for "not stored".
        let lifetime: TimeInterval?
    }

    private func check(_ cases: [Case], policy: CachingPolicy, file: StaticString = #filePath, line: UInt = #line) {
        for testCase in cases {
            let entry = F.entry(testCase.headers, status: testCase.status, policy: policy, request: F.request(testCase.request))
            XCTAssertEqual(entry?.freshnessLifetime, testCase.lifetime, testCase.name, file: file, line: line)
        }
    }

    func testHeuristicPresetRules() {
        check([
            Case(name: "rule 1: ETag → one-day window", headers: ["ETag": "\"v1\""], lifetime: 86_400),
            Case(name: "rule 2: max-age", headers: ["Cache-Control": "max-age=600"], lifetime: 600),
            Case(name: "max-age decides freshness over a validator", headers: ["Cache-Control": "max-age=600", "ETag": "\"v1\""], lifetime: 600),
            Case(name: "Expires counts like max-age", headers: ["Expires": F.httpDate(3600), "Date": F.httpDate(0)], lifetime: 3600),
            Case(name: "max-age wins over Expires", headers: ["Cache-Control": "max-age=5", "Expires": F.httpDate(3600)], lifetime: 5),
            Case(name: "rule 3: Last-Modified → one-day window", headers: ["Last-Modified": F.httpDate(-86_400 * 30)], lifetime: 86_400),
            Case(name: "rule 4: no-cache reused for 60 s", headers: ["Cache-Control": "no-cache"], lifetime: 60),
            Case(name: "no-cache caps the ETag window", headers: ["Cache-Control": "no-cache", "ETag": "\"v1\""], lifetime: 60),
            Case(name: "no-cache with a shorter max-age", headers: ["Cache-Control": "no-cache, max-age=10"], lifetime: 10),
            Case(name: "Pragma: no-cache without Cache-Control", headers: ["Pragma": "no-cache"], lifetime: 60),
            Case(name: "rule 5: image without caching headers → 7 days", headers: ["Content-Type": "image/png"], lifetime: 604_800),
            Case(name: "image with max-age=0 is not the image rule", headers: ["Content-Type": "image/jpeg", "Cache-Control": "max-age=0"], lifetime: nil),
            Case(name: "JSON without caching headers is not stored", headers: ["Content-Type": "application/json"], lifetime: nil),
            Case(name: "no-store is never stored", headers: ["Cache-Control": "no-store", "ETag": "\"v1\""], lifetime: nil),
            Case(name: "no-store beats no-cache", headers: ["Cache-Control": "no-store, no-cache"], lifetime: nil),
            Case(name: "invalid Expires means expired", headers: ["Expires": "0"], lifetime: nil),
            Case(name: "expired but revalidatable is kept", headers: ["Expires": "0", "ETag": "\"v1\""], lifetime: 0),
            Case(name: "negative max-age is stale", headers: ["Cache-Control": "max-age=-1", "ETag": "\"v1\""], lifetime: 0),
            Case(name: "huge max-age is clamped", headers: ["Cache-Control": "max-age=99999999999"], lifetime: 2_147_483_648),
            Case(name: "404 is not stored by the heuristic preset", headers: ["Cache-Control": "max-age=60"], status: 404, lifetime: nil),
            Case(name: "203 is stored", headers: ["Cache-Control": "max-age=60"], status: 203, lifetime: 60),
            Case(name: "Vary: * is never stored", headers: ["Cache-Control": "max-age=60", "Vary": "Accept, *"], lifetime: nil),
            Case(name: "Set-Cookie is stored (a private cache may, RFC 9111 §7.1)", headers: ["Cache-Control": "max-age=60", "Set-Cookie": "a=b"], lifetime: 60),
            Case(name: "Set-Cookie with public is stored", headers: ["Cache-Control": "public, max-age=60", "Set-Cookie": "a=b"], lifetime: 60),
        ], policy: .heuristic())
    }

    func testEveryHeuristicNumberIsConfigurable() {
        let policy = CachingPolicy.heuristic(etagWindow: 10, lastModifiedWindow: 20, noCacheReuse: 30, imageLifetime: 40)
        check([
            Case(name: "ETag window", headers: ["ETag": "\"v1\""], lifetime: 10),
            Case(name: "Last-Modified window", headers: ["Last-Modified": F.httpDate(-100)], lifetime: 20),
            Case(name: "no-cache reuse", headers: ["Cache-Control": "no-cache"], lifetime: 30),
            Case(name: "image lifetime", headers: ["Content-Type": "image/gif"], lifetime: 40),
        ], policy: policy)
    }

    func testRFC9111Preset() {
        check([
            Case(name: "ETag alone: stored to be revalidated", headers: ["ETag": "\"v1\""], lifetime: 0),
            Case(name: "10 % of the Last-Modified age", headers: ["Last-Modified": F.httpDate(-86_400), "Date": F.httpDate(0)], lifetime: 8_640),
            Case(name: "heuristic capped at one day", headers: ["Last-Modified": F.httpDate(-86_400 * 100), "Date": F.httpDate(0)], lifetime: 86_400),
            Case(name: "no-cache always revalidates", headers: ["Cache-Control": "no-cache", "ETag": "\"v1\""], lifetime: 0),
            Case(name: "no-cache without validator is useless", headers: ["Cache-Control": "no-cache"], lifetime: nil),
            Case(name: "image without headers is not stored", headers: ["Content-Type": "image/png"], lifetime: nil),
            Case(name: "404 with max-age is stored", headers: ["Cache-Control": "max-age=60"], status: 404, lifetime: 60),
            Case(name: "404 with Last-Modified gets heuristic freshness", headers: ["Last-Modified": F.httpDate(-1000), "Date": F.httpDate(0)], status: 404, lifetime: 100),
            Case(name: "500 without explicit freshness is not stored", headers: ["Last-Modified": F.httpDate(-1000)], status: 500, lifetime: nil),
            Case(name: "206 to a range request is stored (as a part)", headers: ["Cache-Control": "max-age=60"], status: 206,
                 request: ["Range": "bytes=0-9"], lifetime: 60),
            Case(name: "206 to a request for the whole is not stored", headers: ["Cache-Control": "max-age=60"], status: 206, lifetime: nil),
            Case(name: "max-age", headers: ["Cache-Control": "max-age=60"], lifetime: 60),
        ], policy: .rfc9111)
    }

    /// `Age` and `Date` are used (an older cache ignored both): RFC 9111 §4.2.3.
    func testRedirectsAreStoredPermanentOnesByDefaultTemporaryOnesWithExplicitFreshness() {
        let moved = ["Location": "/new"]
        let heuristicCases = [
            Case(name: "301 without caching headers → the permanent-redirect day", headers: moved, status: 301, lifetime: 86_400),
            Case(name: "308 likewise", headers: moved, status: 308, lifetime: 86_400),
            Case(name: "301 with max-age", headers: moved.merging(["Cache-Control": "max-age=60"]) { $1 }, status: 301, lifetime: 60),
            Case(name: "301 with an ETag → the ETag window", headers: moved.merging(["ETag": "\"r\""]) { $1 }, status: 301, lifetime: 86_400),
            Case(name: "302 without freshness", headers: moved, status: 302, lifetime: nil),
            Case(name: "302 with only an ETag", headers: moved.merging(["ETag": "\"r\""]) { $1 }, status: 302, lifetime: nil),
            Case(name: "302 with max-age", headers: moved.merging(["Cache-Control": "max-age=60"]) { $1 }, status: 302, lifetime: 60),
            Case(name: "303 with max-age", headers: moved.merging(["Cache-Control": "max-age=60"]) { $1 }, status: 303, lifetime: 60),
            Case(name: "307 with Expires", headers: moved.merging(["Expires": F.httpDate(120), "Date": F.httpDate(0)]) { $1 },
                 status: 307, lifetime: 120),
            Case(name: "a redirect that sets a cookie", headers: moved.merging(["Set-Cookie": "a=1", "Cache-Control": "max-age=60"]) { $1 },
                 status: 301, lifetime: nil),
            Case(name: "no-store", headers: moved.merging(["Cache-Control": "no-store"]) { $1 }, status: 301, lifetime: nil),
            Case(name: "a 301 without Location is no redirect (and not a stored status)", headers: [:], status: 301, lifetime: nil),
            Case(name: "300 is not followed", headers: moved.merging(["Cache-Control": "max-age=60"]) { $1 }, status: 300, lifetime: nil),
        ]
        check(heuristicCases, policy: .heuristic())
        check([
            Case(name: "RFC: a bare 301 has no freshness and no validator", headers: moved, status: 301, lifetime: nil),
            Case(name: "RFC: 301 with max-age", headers: moved.merging(["Cache-Control": "max-age=60"]) { $1 }, status: 301, lifetime: 60),
            Case(name: "RFC: 302 without freshness", headers: moved.merging(["Last-Modified": F.httpDate(-86_400)]) { $1 },
                 status: 302, lifetime: nil),
        ], policy: .rfc9111)
        var off = CachingPolicy.heuristic()
        off.storesRedirects = false
        check([Case(name: "storesRedirects off", headers: moved.merging(["Cache-Control": "max-age=60"]) { $1 }, status: 301, lifetime: nil)],
              policy: off)
    }

    func testARedirectLeadsWhereFoundationWouldGo() {
        func target(_ method: String, _ status: Int, _ location: String?, from url: String = "https://example.com/a/b?x=1") -> String {
            var request = URLRequest(url: URL(string: url)!)
            request.httpMethod = method
            request.httpBody = method == "GET" ? nil : Data("body".utf8)
            request.setValue("en", forHTTPHeaderField: "Accept-Language")
            guard let redirected = CachingPolicy.redirectTarget(of: request, status: status, location: location) else { return "none" }
            XCTAssertEqual(redirected.value(forHTTPHeaderField: "Accept-Language"), "en", "the header fields go along")
            return "\(redirected.httpMethod ?? "GET") \(redirected.url?.absoluteString ?? "-") \(redirected.httpBody.map { "\($0.count)" } ?? "no body")"
        }
        XCTAssertEqual(target("GET", 301, "https://other.example/n"), "GET https://other.example/n no body")
        XCTAssertEqual(target("GET", 302, "/n?y=2"), "GET https://example.com/n?y=2 no body")
        XCTAssertEqual(target("POST", 301, "/n"), "GET https://example.com/n no body", "POST becomes GET")
        XCTAssertEqual(target("POST", 302, "/n"), "GET https://example.com/n no body")
        XCTAssertEqual(target("PUT", 303, "/n"), "GET https://example.com/n no body", "303: GET")
        XCTAssertEqual(target("POST", 307, "/n"), "POST https://example.com/n 4", "307 and 308 keep method and body")
        XCTAssertEqual(target("POST", 308, "/n"), "POST https://example.com/n 4")
        XCTAssertEqual(target("GET", 301, "//cdn.example/i.png"), "GET https://cdn.example/i.png no body")
        #if canImport(FoundationNetworking)
        XCTAssertEqual(target("GET", 301, "n"), "GET https://example.com/n no body", "corelibs reads a relative path from the root")
        #else
        XCTAssertEqual(target("GET", 301, "n"), "GET https://example.com/a/n no body", "RFC 3986 resolution")
        #endif
        XCTAssertEqual(target("GET", 300, "/n"), "none", "300 is not followed")
        XCTAssertEqual(target("GET", 304, "/n"), "none")
        XCTAssertEqual(target("GET", 301, nil), "none", "no Location: the 3xx is the answer")
    }

    func testInitialAgeFromAgeAndDate() {
        let withAge = F.entry(["Cache-Control": "max-age=600", "Age": "100"])!
        XCTAssertEqual(withAge.initialAge, 100)
        XCTAssertEqual(withAge.timeToLive(at: F.start), 500)

        let olderDate = F.entry(["Cache-Control": "max-age=600", "Date": F.httpDate(-300)])!
        XCTAssertEqual(olderDate.initialAge, 300)
        XCTAssertEqual(olderDate.timeToLive(at: F.start.addingTimeInterval(200)), 100)

        let garbageAge = F.entry(["Cache-Control": "max-age=600", "Age": "-5", "Date": "yesterday"])!
        XCTAssertEqual(garbageAge.initialAge, 0)
    }

    func testExpiresIsMeasuredFromTheOriginsDate() {
        // The origin's clock is an hour ahead of ours. Comparing Expires with our clock would give
        // an hour of freshness; Expires - Date gives the 60 s the origin meant.
        let entry = F.entry(["Expires": F.httpDate(3600 + 60), "Date": F.httpDate(3600)], policy: .rfc9111)!
        XCTAssertEqual(entry.freshnessLifetime, 60)
        XCTAssertEqual(entry.timeToLive(at: F.start), 60)
    }

    /// A private cache stores answers to requests with credentials by default, in both presets
    /// (each for its user: `CachingPolicy.variant(_:matches:)`).
    func testCredentialedResponsesAreStoredByDefaultInBothPresets() {
        let authorized = F.request(["Authorization": "Bearer secret"])
        let cookie = F.request(["Cookie": "session=1"])
        for policy in [CachingPolicy.heuristic(), .rfc9111] {
            XCTAssertTrue(policy.storesCredentialedResponses)
            XCTAssertNotNil(F.entry(["Cache-Control": "max-age=60"], policy: policy, request: authorized))
            XCTAssertNotNil(F.entry(["Cache-Control": "private, max-age=60"], policy: policy, request: authorized))
            XCTAssertNotNil(F.entry(["Cache-Control": "max-age=60"], policy: policy, request: cookie))
            XCTAssertNil(F.entry(["Cache-Control": "no-store"], policy: policy, request: authorized), "no-store is never stored")
        }
        XCTAssertNotNil(F.entry(["ETag": "\"v1\""], request: authorized), "an ETag-only answer: the heuristic window")
        XCTAssertNil(F.entry(["Cache-Control": "max-age=60"], request: F.request(["Cache-Control": "no-store"])))
    }

    /// With `storesCredentialedResponses` off, the rule RFC 9111 §3.5 sets for shared caches:
    /// only `public` answers to requests with credentials are stored.
    func testWithTheOptOutCredentialedResponsesNeedPublic() {
        let authorized = F.request(["Authorization": "Bearer secret"])
        var optOut = CachingPolicy.heuristic()
        optOut.storesCredentialedResponses = false
        XCTAssertNil(F.entry(["Cache-Control": "max-age=60"], policy: optOut, request: authorized))
        XCTAssertNotNil(F.entry(["Cache-Control": "public, max-age=60"], policy: optOut, request: authorized))
        XCTAssertNil(F.entry(["Cache-Control": "max-age=60"], policy: optOut, request: F.request(["Cookie": "session=1"])))
        XCTAssertNotNil(F.entry(["Cache-Control": "max-age=60"], policy: optOut, request: F.request()), "anonymous: as ever")
    }

    /// A response stale on arrival without a validator is kept only when a later request may use
    /// it stale (RFC 9111 §4.2.4): it was given a lifetime and arrived past it, or it (or the
    /// request) allows stale answers, and nothing forbids serving it stale.
    func testAResponseStaleOnArrivalIsKeptOnlyWhenItMayBeServedStale() {
        let fourMinutesOld = F.httpDate(-240)
        for policy in [CachingPolicy.rfc9111, .heuristic()] {
            check([
                Case(name: "max-age=120 that arrived 4 minutes old: a max-stale request may still use it",
                     headers: ["Cache-Control": "max-age=120", "Date": fourMinutesOld], lifetime: 120),
                Case(name: "Expires already past on arrival, by the origin's own clock",
                     headers: ["Expires": F.httpDate(-120), "Date": fourMinutesOld], lifetime: 120),
                Case(name: "stale-if-error allows stale use", headers: ["Cache-Control": "max-age=0, stale-if-error=600"], lifetime: 0),
                Case(name: "the request accepts stale answers", headers: ["Cache-Control": "max-age=0"],
                     request: ["Cache-Control": "max-stale=600"], lifetime: 0),
                Case(name: "must-revalidate: never served stale",
                     headers: ["Cache-Control": "max-age=120, must-revalidate", "Date": fourMinutesOld], lifetime: nil),
                Case(name: "max-age=0 says it is never fresh", headers: ["Cache-Control": "max-age=0"], lifetime: nil),
                Case(name: "an invalid Expires says the same", headers: ["Expires": "0"], lifetime: nil),
            ], policy: policy)
        }
    }
}
