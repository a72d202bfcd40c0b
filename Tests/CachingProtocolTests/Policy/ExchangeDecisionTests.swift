import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import CachingProtocol

/// The policy's two pure steps around the network, as tables: what to do with a request
/// (`plan`: answer, send — and why, for `Cache-Status` — or refuse), and what an answer from the
/// origin means (`step`: store what, answer with what, or fetch the body).
final class ExchangeDecisionTests: LoaderRulesTestCase {
    private typealias F = PolicyFixtures

    private func describe(_ plan: LoadPlan) -> String {
        switch plan {
        case .answerStored(_, let isStale): return isStale ? "stored, stale" : "stored"
        case .answerStaleAndRevalidate: return "stale, revalidate in the background"
        case .send(.fetch(let fallback, let forward)): return "fetch \(forward.rawValue)\(fallback == nil ? "" : " with fallback")"
        case .send(.revalidate): return "revalidate"
        case .send(.forward): return "forward"
        case .send(.unsafe): return "unsafe"
        case .unavailable(let gatewayTimeout): return gatewayTimeout ? "504" : "not in cache"
        }
    }

    private func plan(_ request: CacheRequest, stored: CacheEntry?, offline: Bool = false, keyWasStored: Bool? = nil,
                      policy: CachingPolicy = .heuristic(), at offset: TimeInterval = 0) -> String {
        let now = F.start.addingTimeInterval(offset)
        return describe(policy.plan(for: request, stored: stored, keyWasStored: keyWasStored ?? (stored != nil), now: now, offline: offline))
    }

    func testWhyARequestGoesToTheOrigin() {
        let fresh = F.entry(["Cache-Control": "max-age=60", "ETag": "\"a\""])
        let noValidator = F.entry(["Cache-Control": "max-age=60"])
        let rows: [(String, CacheRequest, CacheEntry?, Bool, TimeInterval, String)] = [
            ("nothing stored", F.request(), nil, false, 0, "fetch uri-miss"),
            ("another variant stored", F.request(), nil, true, 0, "fetch vary-miss"),
            ("fresh", F.request(), fresh, true, 10, "stored"),
            ("stale with a validator", F.request(), fresh, true, 120, "revalidate"),
            ("stale without a validator", F.request(), noValidator, true, 120, "fetch stale with fallback"),
            ("the app reloads", F.request(cachePolicy: .reloadIgnoringLocalCacheData), fresh, true, 10, "fetch request with fallback"),
            ("the request says no-cache", F.request(["Cache-Control": "no-cache"]), fresh, true, 10, "revalidate"),
            ("only-if-cached, nothing stored", F.request(["Cache-Control": "only-if-cached"]), nil, false, 0, "504"),
            ("returnCacheDataDontLoad, nothing stored", F.request(cachePolicy: .returnCacheDataDontLoad), nil, false, 0, "not in cache"),
        ]
        for (name, request, stored, keyWasStored, offset, expected) in rows {
            XCTAssertEqual(plan(request, stored: stored, keyWasStored: keyWasStored, at: offset), expected, name)
        }
        XCTAssertEqual(plan(F.request(["Cache-Control": "only-if-cached"]), stored: nil, offline: true), "not in cache",
                       "offline mode answers a miss with an error, as Foundation does, not a 504")
        XCTAssertEqual(plan(F.request(), stored: fresh, offline: true, at: 999_999), "stored, stale")
        let swr = F.entry(["Cache-Control": "max-age=60, stale-while-revalidate=60", "ETag": "\"a\""])
        XCTAssertEqual(plan(F.request(), stored: swr, at: 90), "stale, revalidate in the background")
    }

    func testByteRanges() {
        let whole = F.entry(["Cache-Control": "max-age=60", "ETag": "\"a\""])
        let range = F.request(["Range": "bytes=0-1"])
        XCTAssertEqual(plan(range, stored: whole, at: 10), "stored", "a fresh whole answers a range")
        XCTAssertEqual(plan(range, stored: whole, at: 120), "forward",
                       "heuristic preset: a stale one is not revalidated for a range, the range goes as it is")
        XCTAssertEqual(plan(range, stored: whole, policy: .rfc9111, at: 120), "revalidate",
                       "a policy that stores parts revalidates what holds the range")
        XCTAssertEqual(plan(range, stored: nil, policy: .rfc9111), "fetch uri-miss")
    }

    // MARK: The origin's answer

    /// A response received two minutes after `PolicyFixtures.start` (when the tables judge it).
    private func received(_ status: Int, _ headers: [String: String] = [:], body: String = "") -> Result<ReceivedResponse, Error> {
        let response = HTTPURLResponse(url: F.url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        let arrival = F.start.addingTimeInterval(120)
        let head = ReceivedHead(response: response, route: .direct, requestDate: arrival, responseDate: arrival)
        return .success(ReceivedResponse(head: head, body: Data(body.utf8), transferSeconds: 0.01))
    }

    private func describe(_ step: ExchangeStep) -> String {
        guard case .finish(let outcome) = step else { return "fetch the body" }
        var parts: [String] = []
        switch outcome.answer {
        case .received(let status): parts.append("received (\(status.headerValue))")
        case .stored(_, let status): parts.append("stored (\(status.headerValue))")
        case .redirect: parts.append("redirect")
        case .gatewayTimeout(let status): parts.append("504 (\(status.headerValue))")
        case .failure: parts.append("error")
        }
        switch outcome.storage {
        case .none: break
        case .store: parts.append("store")
        case .removeVariant: parts.append("remove the variant")
        case .removeRecords(let keys): parts.append("remove \(keys.count)")
        }
        if outcome.learnsNoStore { parts.append("learn no-store") }
        return parts.joined(separator: ", ")
    }

    private func step(_ result: Result<ReceivedResponse, Error>, _ sent: SentRequest, _ plan: ExchangePlan,
                      request: CacheRequest = F.request(), policy: CachingPolicy = .heuristic(), at offset: TimeInterval = 120) -> String {
        let context = ExchangeContext(storedPart: nil, maximumEntrySize: 1 << 20,
                                      now: F.start.addingTimeInterval(offset))
        return describe(policy.step(after: result, to: sent, of: plan, for: request, context: context))
    }

    func testWhatAnAnswerToARevalidationMeans() throws {
        let stored = try XCTUnwrap(F.entry(["Cache-Control": "max-age=60", "ETag": "\"a\""]))
        let revalidate = ExchangePlan.revalidate(stored, try XCTUnwrap(RevalidationConditions(stored)))
        let head = SentRequest.planned(method: "HEAD")
        XCTAssertEqual(step(received(304, ["ETag": "\"a\""]), head, revalidate),
                       "stored (CachingProtocol; fwd=stale; fwd-status=304; stored; ttl=60), store")
        XCTAssertEqual(step(received(200, ["ETag": "\"b\""]), head, revalidate), "fetch the body", "a HEAD carries no new body")
        XCTAssertEqual(step(received(200, ["ETag": "\"b\"", "Cache-Control": "max-age=30"], body: "new"), .planned(method: "GET"), revalidate),
                       "received (CachingProtocol; fwd=stale; fwd-status=200; stored; ttl=30), store")
        XCTAssertEqual(step(received(503), head, revalidate),
                       "stored (CachingProtocol; fwd=stale; fwd-status=503; ttl=-60; detail=stale-if-error)",
                       "a 5xx is answered with the stale copy, which stays")
        XCTAssertEqual(step(.failure(URLError(.cannotConnectToHost)), head, revalidate),
                       "stored (CachingProtocol; fwd=stale; ttl=-60; detail=stale-if-error)")
        XCTAssertEqual(step(.failure(URLError(.cancelled)), head, revalidate), "error", "a cancellation is never answered stale")
        XCTAssertEqual(step(received(200, ["Cache-Control": "no-store"], body: "x"), .bodyAfterHead, revalidate),
                       "received (CachingProtocol; fwd=stale; fwd-status=200; detail=noStore), remove the variant, learn no-store")
    }

    func testStaleOr504WhenTheOriginCannotBeReached() throws {
        let mustRevalidate = try XCTUnwrap(F.entry(["Cache-Control": "max-age=60, must-revalidate", "ETag": "\"a\""]))
        let fetch = ExchangePlan.fetch(fallback: mustRevalidate, forward: .stale)
        XCTAssertEqual(step(.failure(URLError(.cannotConnectToHost)), .planned(method: "GET"), fetch),
                       "504 (CachingProtocol; fwd=stale; detail=origin-unreachable)")
        XCTAssertEqual(step(received(500), .planned(method: "GET"), fetch),
                       "received (CachingProtocol; fwd=stale; fwd-status=500; detail=status)",
                       "a must-revalidate response is never served stale: the 5xx goes to the app")
        let plain = try XCTUnwrap(F.entry(["Cache-Control": "max-age=60"]))
        XCTAssertEqual(step(.failure(URLError(.cannotConnectToHost)), .planned(method: "GET"), .fetch(fallback: plain, forward: .stale),
                            at: 60 + 8 * 86_400),
                       "error", "staler than the policy's maximum staleness (7 days): the error")
        XCTAssertEqual(step(.failure(URLError(.timedOut)), .planned(method: "GET"), .fetch(fallback: nil, forward: .uriMiss)), "error")
    }

    /// Every answer the cache did not store names the reason in its `Cache-Status` (`detail`, the
    /// name `CacheEvent.notStoredReason` carries); a stored one has none.
    func testAnAnswerNotStoredSaysWhyInItsCacheStatus() throws {
        let fetch = ExchangePlan.fetch(fallback: nil, forward: .uriMiss)
        let get = SentRequest.planned(method: "GET")
        let maxAge = "max-age=600"
        struct Row {
            var name: String
            var status = 200
            var headers: [String: String] = ["Cache-Control": "max-age=600"]
            var body = "body"
            var request = F.request()
            var credential = false
            var expected: NotStoredReason?
        }
        let rows: [Row] = [
            Row(name: "stored", expected: nil),
            Row(name: "no-store", headers: ["Cache-Control": "no-store"], expected: .noStore),
            Row(name: "the request's no-store", request: F.request(["Cache-Control": "no-store"]), expected: .requestNoStore),
            Row(name: "a status the heuristic preset does not store", status: 404, expected: .status),
            Row(name: "larger than the largest entry", body: String(repeating: "x", count: 2_000), expected: .tooLarge),
            Row(name: "Vary: *", headers: ["Cache-Control": maxAge, "Vary": "*"], expected: .varyAll),
            Row(name: "no freshness, no validator", headers: [:], expected: .noFreshness),
            Row(name: "a temporary redirect", status: 302, headers: ["Location": "/next"], body: "", expected: .temporaryRedirect),
            Row(name: "a redirect that sets a cookie", status: 301, headers: ["Location": "/next", "Set-Cookie": "a=1"], body: "",
                expected: .cookieSetOnRedirect),
            Row(name: "answered with the app's credential", credential: true, expected: .challengeCredential),
            Row(name: "a part to a request for the whole", status: 206,
                headers: ["Cache-Control": maxAge, "Content-Range": "bytes 0-3/10"], expected: .partialContent),
            Row(name: "must-understand, a status not understood", status: 299, headers: ["Cache-Control": "max-age=600, must-understand"],
                expected: .mustUnderstand),
            Row(name: "an event stream", headers: ["Cache-Control": maxAge, "Content-Type": "text/event-stream"], expected: .eventStream),
            Row(name: "a body shorter than its Content-Length", headers: ["Cache-Control": maxAge, "Content-Length": "10"],
                expected: .incompleteBody),
        ]
        var seen = Set<NotStoredReason>()
        for row in rows {
            let response = HTTPURLResponse(url: F.url, statusCode: row.status, httpVersion: "HTTP/1.1", headerFields: row.headers)!
            let arrival = F.start.addingTimeInterval(120)
            let head = ReceivedHead(response: response, route: ResponseRoute(answeredWithCredential: row.credential),
                                    requestDate: arrival, responseDate: arrival)
            let context = ExchangeContext(storedPart: nil, maximumEntrySize: 1_000, now: arrival)
            let result = Result<ReceivedResponse, Error>.success(ReceivedResponse(head: head, body: Data(row.body.utf8), transferSeconds: 0.01))
            guard case .finish(let outcome) = CachingPolicy.heuristic().step(after: result, to: get, of: fetch, for: row.request,
                                                                             context: context) else { return XCTFail(row.name) }
            let status: CacheStatus
            switch outcome.answer {
            case .received(let received), .redirect(_, let received): status = received
            default: return XCTFail("\(row.name): \(outcome.answer)")
            }
            XCTAssertEqual(outcome.notStoredReason, row.expected, row.name)
            XCTAssertEqual(status.detail, row.expected.map(CacheStatus.notStored), row.name)
            XCTAssertEqual(status.stored, row.expected == nil, row.name)
            if let expected = row.expected {
                XCTAssertTrue(status.headerValue.hasSuffix("; detail=\(expected)"), "\(row.name): \(status.headerValue)")
                seen.insert(expected)
            }
        }
        XCTAssertEqual(seen.count, rows.count - 1, "one row per reason")
    }

    /// A `304` whose fields forbid storing confirms the stored body for this answer only: its
    /// `Cache-Status` has no `stored` and says why, as the event does.
    func testARevalidationThatMayNotBeStoredSaysWhy() throws {
        let stored = try XCTUnwrap(F.entry(["Cache-Control": "max-age=60", "ETag": "\"a\""]))
        let revalidate = ExchangePlan.revalidate(stored, try XCTUnwrap(RevalidationConditions(stored)))
        let context = ExchangeContext(storedPart: nil, maximumEntrySize: 1 << 20, now: F.start.addingTimeInterval(120))
        let step = CachingPolicy.heuristic().step(after: received(304, ["ETag": "\"a\"", "Cache-Control": "no-store"]),
                                                  to: .planned(method: "HEAD"), of: revalidate, for: F.request(), context: context)
        guard case .finish(let outcome) = step, case .stored(_, let status) = outcome.answer else { return XCTFail("confirmed") }
        XCTAssertEqual(status.headerValue, "CachingProtocol; fwd=stale; fwd-status=304; ttl=0; detail=noStore")
        XCTAssertEqual(outcome.notStoredReason, .noStore)
        XCTAssertEqual(describe(step), "stored (CachingProtocol; fwd=stale; fwd-status=304; ttl=0; detail=noStore), remove the variant")
    }

    /// Each reason's name is a structured-field token (RFC 8941 §3.3.4), one of the two forms
    /// RFC 9211 §2.8 allows for `detail`: it is written unquoted.
    func testEveryReasonsNameIsAToken() {
        let reasons: [NotStoredReason] = [
            .noStore, .requestNoStore, .status, .tooLarge, .varyAll, .credentials, .noFreshness, .temporaryRedirect, .redirect,
            .cookieSetOnRedirect, .challengeCredential, .partialContent, .mustUnderstand, .incompleteBody, .eventStream, .other,
        ]
        let tchar = Set("!#$%&'*+-.^_`|~:/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for reason in reasons {
            let name = CacheStatus.notStored(reason)
            XCTAssertTrue(name.first.map { $0.isLetter && $0.isASCII || $0 == "*" } ?? false, name)
            XCTAssertTrue(name.allSatisfy(tchar.contains), name)
        }
    }

    /// A request whose cache policy refuses stored data the origin did not confirm gets what it
    /// gets without the layer when the origin fails: its error, or its 5xx as it is. Stored data
    /// stands in only when the policy decides or the app prefers stored data.
    func testAReloadGetsTheOriginsAnswerOrItsError() throws {
        let plain = try XCTUnwrap(F.entry(["Cache-Control": "max-age=60", "ETag": "\"a\""]))
        let mustRevalidate = try XCTUnwrap(F.entry(["Cache-Control": "max-age=60, must-revalidate", "ETag": "\"a\""]))
        let down = Result<ReceivedResponse, Error>.failure(URLError(.networkConnectionLost))
        let get = SentRequest.planned(method: "GET")
        let modes: [(String, URLRequest.CachePolicy, String, String, String, String)] = [
            // mode, cache policy, origin down, origin 503, must-revalidate and origin down, 503 to a conditional GET
            ("the policy decides", .useProtocolCachePolicy, "stored (CachingProtocol; fwd=stale; ttl=-60; detail=stale-if-error)",
             "stored (CachingProtocol; fwd=stale; fwd-status=503; ttl=-60; detail=stale-if-error)",
             "504 (CachingProtocol; fwd=stale; detail=origin-unreachable)",
             "stored (CachingProtocol; fwd=stale; fwd-status=503; ttl=-60; detail=stale-if-error)"),
            ("reload", .reloadIgnoringLocalCacheData, "error", "received (CachingProtocol; fwd=stale; fwd-status=503; detail=status)", "error",
             "received (CachingProtocol; fwd=stale; fwd-status=503; detail=status)"),
            ("reload from the origin", .reloadIgnoringLocalAndRemoteCacheData, "error",
             "received (CachingProtocol; fwd=stale; fwd-status=503; detail=status)", "error", "received (CachingProtocol; fwd=stale; fwd-status=503; detail=status)"),
            ("revalidate", .reloadRevalidatingCacheData, "error", "received (CachingProtocol; fwd=stale; fwd-status=503; detail=status)", "error",
             "received (CachingProtocol; fwd=stale; fwd-status=503; detail=status)"),
        ]
        for (name, cachePolicy, whenDown, when503, mustRevalidateWhenDown, revalidation503) in modes {
            let request = F.request(cachePolicy: cachePolicy)
            let fetch = ExchangePlan.fetch(fallback: plain, forward: .stale)
            XCTAssertEqual(step(down, get, fetch, request: request), whenDown, name)
            XCTAssertEqual(step(received(503), get, fetch, request: request), when503, name)
            XCTAssertEqual(step(down, get, .fetch(fallback: mustRevalidate, forward: .stale), request: request), mustRevalidateWhenDown, name)
            let revalidate = ExchangePlan.revalidate(plain, try XCTUnwrap(RevalidationConditions(plain)))
            XCTAssertEqual(step(received(503), get, revalidate, request: request), revalidation503, name)
            XCTAssertEqual(step(received(503), .planned(method: "HEAD"), revalidate, request: request),
                           revalidation503 == when503 && whenDown == "error" ? "fetch the body" : revalidation503,
                           "\(name): a HEAD's 5xx that may not be replaced is fetched again as the GET the app sent")
            XCTAssertEqual(step(down, .planned(method: "HEAD"), revalidate, request: request),
                           whenDown == "error" ? "error" : "stored (CachingProtocol; fwd=stale; ttl=-60; detail=stale-if-error)", name)
        }
    }

    func testForwardedAndUnsafeAnswersAreNeverStored() {
        XCTAssertEqual(step(received(206, ["Cache-Control": "max-age=60"]), .planned(method: "GET"), .forward),
                       "received (CachingProtocol; fwd=request; fwd-status=206)")
        XCTAssertEqual(step(received(201, ["Location": "/feed/2"]), .planned(method: "POST"), .unsafe),
                       "received (CachingProtocol; fwd=method; fwd-status=201), remove 2", "the URL and its same-origin Location")
        XCTAssertEqual(step(received(409), .planned(method: "POST"), .unsafe), "received (CachingProtocol; fwd=method; fwd-status=409)",
                       "a refused unsafe request leaves the store as it was")
    }
}
