import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import CachingProtocol

/// What an answer to a revalidation means (RFC 9111 §4.3.3–4.3.5): a table over status, method
/// and validators, the §4.3.4 header merge, and the temporary-redirect rule. No network.
final class ValidationDecisionTests: LoaderRulesTestCase {
    private typealias F = PolicyFixtures
    private let heuristic = CachingPolicy.heuristic()

    private func at(_ seconds: TimeInterval) -> Date { F.start.addingTimeInterval(seconds) }

    /// The outcome for an answer received 100 000 s after `stored` was stored.
    private func outcome(
        _ stored: CacheEntry, method: String, status: Int, headers: [String: String],
        policy: CachingPolicy? = nil
    ) -> RevalidationOutcome {
        (policy ?? heuristic).revalidationOutcome(
            stored: stored, request: F.request(), method: method, status: status, headers: HTTPHeaders(headers),
            requestDate: at(100_000), responseDate: at(100_000), now: at(100_000))
    }

    /// The kind of outcome, without the updated entry, for table comparisons.
    private enum Kind: Equatable {
        case notModified(mayStore: Bool), changed(bodyIncluded: Bool), serverError
    }

    private func kind(_ outcome: RevalidationOutcome) -> Kind {
        switch outcome {
        case .notModified(_, let notStored): return .notModified(mayStore: notStored == nil)
        case .changed(let bodyIncluded): return .changed(bodyIncluded: bodyIncluded)
        case .serverError: return .serverError
        }
    }

    func testStatusMethodAndValidatorsTable() {
        let tagged = F.entry(["ETag": "\"v1\"", "Last-Modified": F.httpDate(-3600)])!
        let dated = F.entry(["Last-Modified": F.httpDate(-3600)])!
        let mustRevalidate = F.entry(["ETag": "\"v1\"", "Cache-Control": "max-age=60, must-revalidate"])!
        let cases: [(String, CacheEntry, String, Int, [String: String], Kind)] = [
            ("304 naming the stored ETag", tagged, "GET", 304, ["ETag": "\"v1\""], .notModified(mayStore: true)),
            ("304 without an ETag", tagged, "GET", 304, [:], .notModified(mayStore: true)),
            ("304 with the weak form of the stored ETag", tagged, "HEAD", 304, ["ETag": "W/\"v1\""], .notModified(mayStore: true)),
            ("304 naming another representation, GET", tagged, "GET", 304, ["ETag": "\"v2\""], .changed(bodyIncluded: false)),
            ("304 naming another representation, HEAD", tagged, "HEAD", 304, ["ETag": "\"v2\""], .changed(bodyIncluded: false)),
            ("HEAD 200 with the same strong ETag", tagged, "HEAD", 200, ["ETag": "\"v1\""], .notModified(mayStore: true)),
            ("HEAD 200 with a weak ETag", tagged, "HEAD", 200, ["ETag": "W/\"v1\""], .changed(bodyIncluded: false)),
            ("HEAD 200 with another ETag", tagged, "HEAD", 200, ["ETag": "\"v2\""], .changed(bodyIncluded: false)),
            ("HEAD 200 with another Content-Length", tagged, "HEAD", 200, ["ETag": "\"v1\"", "Content-Length": "99"], .changed(bodyIncluded: false)),
            ("HEAD 200 with the stored Content-Length", tagged, "HEAD", 200, ["ETag": "\"v1\"", "Content-Length": "4"], .notModified(mayStore: true)),
            ("HEAD 200, no ETags, same Last-Modified", dated, "HEAD", 200, ["Last-Modified": F.httpDate(-3600)], .notModified(mayStore: true)),
            ("HEAD 200, no ETags, newer Last-Modified", dated, "HEAD", 200, ["Last-Modified": F.httpDate(-10)], .changed(bodyIncluded: false)),
            ("HEAD 200 with no validators", dated, "HEAD", 200, [:], .changed(bodyIncluded: false)),
            ("GET 200 carries the new response", tagged, "GET", 200, ["ETag": "\"v1\""], .changed(bodyIncluded: true)),
            ("GET 404 carries the new response", tagged, "GET", 404, [:], .changed(bodyIncluded: true)),
            ("HEAD 404: fetch the body", tagged, "HEAD", 404, [:], .changed(bodyIncluded: false)),
            ("GET 503 within stale-if-error", tagged, "GET", 503, [:], .serverError),
            ("HEAD 500 within stale-if-error", tagged, "HEAD", 500, [:], .serverError),
            ("GET 503 of a must-revalidate response", mustRevalidate, "GET", 503, [:], .changed(bodyIncluded: true)),
            ("HEAD 503 of a must-revalidate response", mustRevalidate, "HEAD", 503, [:], .changed(bodyIncluded: false)),
        ]
        for (name, stored, method, status, headers, expected) in cases {
            XCTAssertEqual(kind(outcome(stored, method: method, status: status, headers: headers)), expected, name)
        }
    }

    func testServerErrorsAreServedStaleOnlyWhereThePresetAllows() {
        let stored = F.entry(["ETag": "\"v1\"", "Cache-Control": "max-age=600"], policy: .rfc9111)!
        XCTAssertEqual(kind(outcome(stored, method: "GET", status: 500, headers: [:], policy: .rfc9111)), .changed(bodyIncluded: true),
                       "RFC 9111 without stale-if-error: the 500 is the answer")
        XCTAssertEqual(kind(outcome(stored, method: "HEAD", status: 500, headers: [:], policy: .rfc9111)), .changed(bodyIncluded: false))
        let allowing = F.entry(["ETag": "\"v1\"", "Cache-Control": "max-age=600, stale-if-error=200000"], policy: .rfc9111)!
        XCTAssertEqual(kind(outcome(allowing, method: "GET", status: 500, headers: [:], policy: .rfc9111)), .serverError)
    }

    func testA304UpdatesDatesAndFreshnessFromTheMergedHeaders() throws {
        let stored = F.entry(["ETag": "\"v1\"", "Cache-Control": "max-age=60"])!
        guard case .notModified(let updated, let notStored) = outcome(
            stored, method: "GET", status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=600"]) else {
            return XCTFail("a matching 304 confirms")
        }
        XCTAssertNil(notStored)
        XCTAssertEqual(updated.headers["Cache-Control"], "max-age=600")
        XCTAssertEqual(updated.freshnessLifetime, 600)
        XCTAssertEqual(updated.requestDate, at(100_000))
        XCTAssertEqual(updated.responseDate, at(100_000))
        XCTAssertEqual(updated.body, stored.body, "the stored body is kept")
        XCTAssertEqual(updated.timeToLive(at: at(100_000)), 600)
    }

    func testA304ThatForbidsStoringIsServedOnceAndNotKept() throws {
        let stored = F.entry(["ETag": "\"v1\""])!
        guard case .notModified(let updated, let notStored) = outcome(
            stored, method: "HEAD", status: 304, headers: ["Cache-Control": "no-store"]) else {
            return XCTFail("a matching 304 confirms")
        }
        XCTAssertEqual(notStored, .noStore, "why it is not kept")
        XCTAssertEqual(updated.freshnessLifetime, 0)
        XCTAssertEqual(updated.headers["Cache-Control"], "no-store")
    }

    /// RFC 9111 §4.3.4: the answer's fields replace the stored ones, except those that describe
    /// the answer's own (empty) body or its connection.
    func testHeaderMergeMatrix() {
        let stored = HTTPHeaders([
            "Content-Type": "text/html", "Content-Length": "4", "Content-Encoding": "gzip", "ETag": "\"v1\"",
            "Cache-Control": "max-age=60", "X-Version": "1",
        ])
        let kept = ["Content-Length", "Content-Encoding", "Transfer-Encoding", "Content-Range", "Connection",
                    "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade"]
        XCTAssertEqual(CachingPolicy.headersNotUpdatedByValidation, kept)
        for name in kept {
            let merged = CachingPolicy.headersAfterValidation(stored: stored, received: HTTPHeaders([name: "from-304"]))
            XCTAssertNotEqual(merged[name], "from-304", "\(name) is not taken from a 304")
            XCTAssertEqual(merged[name], stored[name], "\(name) keeps its stored value")
        }
        for name in ["Cache-Control", "Date", "Expires", "ETag", "Last-Modified", "X-Version", "Vary", "Content-Type"] {
            let merged = CachingPolicy.headersAfterValidation(stored: stored, received: HTTPHeaders([name: "from-304"]))
            XCTAssertEqual(merged[name], "from-304", "\(name) is updated by a 304")
        }
        let merged = CachingPolicy.headersAfterValidation(stored: stored, received: HTTPHeaders(["x-version": "2"]))
        XCTAssertEqual(merged["X-Version"], "2", "names compare case-insensitively")
        XCTAssertEqual(merged.fields.filter { $0.name.isEqualIgnoringASCIICase("X-Version") }.count, 1, "one field replaces the other")
        XCTAssertEqual(merged["Content-Type"], "text/html", "fields the answer lacks stay")
    }
}
