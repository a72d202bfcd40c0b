import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Why a fetched response was not stored, as `CacheEvent.notStoredReason` says: one case per
/// reason, each checked in the event and in the origin's log (a response not stored is fetched
/// again), against a response that is stored and has no reason.
final class NotStoredReasonTests: CachingTestCase {
    private struct Case {
        let path: String
        let response: OriginResponse
        var headers: [String: String] = [:]
        let expected: NotStoredReason?
    }

    private func cases() -> [Case] {
        let maxAge = HTTPField("Cache-Control", "max-age=600")
        return [
            Case(path: "/stored", response: .text("kept", headers: [maxAge]), expected: nil),
            Case(path: "/no-store", response: .text("secret", headers: [HTTPField("Cache-Control", "no-store")]), expected: .noStore),
            Case(path: "/not-found", response: .text("missing", status: 404, headers: [maxAge]), expected: .status),
            Case(path: "/large", response: .text(String(repeating: "x", count: 5_000), headers: [maxAge]), expected: .tooLarge),
            Case(path: "/vary-all", response: .text("varies", headers: [maxAge, HTTPField("Vary", "*")]), expected: .varyAll),
            // Stored for its user by default (`CachingPolicy.storesCredentialedResponses`).
            Case(path: "/private", response: .text("mine", headers: [maxAge]), headers: ["Authorization": "Bearer alice"],
                 expected: nil),
            Case(path: "/plain", response: .text("no caching headers"), expected: .noFreshness),
            Case(path: "/events", response: OriginResponse(status: 200, headers: [
                maxAge, HTTPField("Content-Type", "text/event-stream; charset=utf-8"),
            ], body: Data("data: 1\n\n".utf8)), expected: .eventStream),
            Case(path: "/moved", response: OriginResponse(status: 302, headers: [HTTPField("Location", "/stored-target")]),
                 expected: .temporaryRedirect),
            Case(path: "/moved-with-cookie", response: OriginResponse(status: 301, headers: [
                HTTPField("Location", "/stored-target"), HTTPField("Set-Cookie", "seen=1; Path=/nowhere"),
            ]), expected: .cookieSetOnRedirect),
        ]
    }

    func testEachReasonIsReportedAndTheResponseIsFetchedAgain() async throws {
        // Given an origin with one resource per reason, and a cache that stores nothing above 1,000 bytes
        cache.maximumEntrySize = 1_000
        origin.handle("/stored-target") { _ in .text("target", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        for testCase in cases() {
            origin.handle(testCase.path) { _ in testCase.response }
        }
        for testCase in cases() {
            // When each is asked for twice
            var statuses: [String?] = []
            for _ in 0..<2 {
                let (_, response) = try await get(testCase.path, headers: testCase.headers)
                statuses.append(cacheStatus(response))
            }
            // Then the first event names the reason (none for the stored one), as the answer's
            // Cache-Status does, and a response not stored went to the origin again
            let event = try XCTUnwrap(events.first { $0.key.hasSuffix(testCase.path) }, testCase.path)
            XCTAssertEqual(event.outcome, .fetched, testCase.path)
            XCTAssertEqual(event.notStoredReason, testCase.expected, testCase.path)
            // (A redirect is followed: the app sees its target's answer.)
            guard !(300...399).contains(testCase.response.status) else { continue }
            let first = try XCTUnwrap(statuses[0], testCase.path)
            if let expected = testCase.expected {
                XCTAssertTrue(first.hasSuffix("; detail=\(expected)"), "\(testCase.path): \(first)")
                XCTAssertFalse(first.contains("; stored"), "\(testCase.path): \(first)")
            } else {
                XCTAssertFalse(first.contains("detail="), "\(testCase.path): \(first)")
                XCTAssertEqual(statuses[1], "CachingProtocol; hit", testCase.path)
            }
            XCTAssertEqual(origin.requests(to: testCase.path).count, testCase.expected == nil ? 1 : 2, testCase.path)
        }
        XCTAssertEqual(NotStoredReason.tooLarge.description, "tooLarge")
    }

    func testCredentialsAreTheReasonWhereThePolicyKeepsCredentialedAnswersOut() async throws {
        // Given a policy that keeps answers to requests with credentials out, as a shared cache must
        var configuration = makeConfiguration()
        configuration.policy.storesCredentialedResponses = false
        installSession(configuration)
        origin.handle("/private") { _ in .text("mine", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/public") { _ in .text("ours", headers: [HTTPField("Cache-Control", "public, max-age=600")]) }
        // When each is asked for twice with a credential
        for path in ["/private", "/public"] {
            for _ in 0..<2 { _ = try await get(path, headers: ["Authorization": "Bearer alice"]) }
        }
        // Then the private one was not stored, for that reason; the public one was
        XCTAssertEqual(events.first { $0.key.hasSuffix("/private") }?.notStoredReason, .credentials)
        XCTAssertEqual(origin.requests(to: "/private").count, 2)
        XCTAssertNil(events.first { $0.key.hasSuffix("/public") }?.notStoredReason)
        XCTAssertEqual(origin.requests(to: "/public").count, 1)
    }

    func testAHitAndARevalidationCarryNoReason() async throws {
        // Given a stored response with a validator
        origin.handle("/tagged") { request in
            request.header("If-None-Match") == "\"v1\""
                ? OriginResponse(status: 304, headers: [HTTPField("ETag", "\"v1\"")])
                : .text("tagged", headers: [HTTPField("ETag", "\"v1\""), HTTPField("Cache-Control", "max-age=60")])
        }
        _ = try await get("/tagged")
        // When it is hit, then revalidated once stale
        _ = try await get("/tagged")
        clock.advance(by: 120)
        _ = try await get("/tagged")
        // Then no event names a reason
        XCTAssertEqual(events.map(\.outcome), [.fetched, .hit, .revalidatedNotModified])
        XCTAssertEqual(events.compactMap(\.notStoredReason), [])
    }
}
