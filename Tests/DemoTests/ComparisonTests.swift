import CachingProtocol
@testable import DemoSupport
import Foundation
import XCTest

/// The Demo's comparison, run in-process: the protocol saves origin requests and bytes against
/// both baselines, never answers wrongly, and each rule behaves as the contract says.
final class ComparisonTests: XCTestCase {
    private let policy = CachingPolicy.heuristic()

    private func runComparison() async throws -> ComparisonReport {
        let report = try await Comparison(policy: policy).run()
        XCTAssertEqual(report.clients.map(\.kind), ClientKind.allCases)
        for client in report.clients {
            XCTAssertEqual(client.anomalies, [], "\(client.name): its own account and the origin's log agree")
            XCTAssertEqual(client.failed, 0, "\(client.name): every request answered")
            XCTAssertEqual(client.records.count, Scenario.standard.requestCount)
        }
        return report
    }

    func testTheProtocolSavesOriginRequestsAndBytesWithoutWrongAnswers() async throws {
        // Given the standard session, when it runs through every client
        let report = try await runComparison()
        let baselines = [try XCTUnwrap(report.client(.noCache)), try XCTUnwrap(report.client(.urlCache))]

        // Then each protocol column costs the origin strictly less than both baselines
        for kind in [ClientKind.cachingProtocolHead, .cachingProtocolConditionalGet] {
            let ours = try XCTUnwrap(report.client(kind))
            for baseline in baselines {
                XCTAssertLessThan(ours.originRequestTotal, baseline.originRequestTotal, "\(ours.name) vs \(baseline.name): requests")
                XCTAssertLessThan(ours.originBytes, baseline.originBytes, "\(ours.name) vs \(baseline.name): bytes")
            }
            XCTAssertEqual(ours.wrongAnswers, 0, "\(ours.name): no stale body where the contract wants a current one")
            XCTAssertGreaterThan(ours.fromCache, 0)
            XCTAssertGreaterThan(ours.revalidated, 0)
        }
        // The numbers come from the origin: the plain client sends every request there.
        let plain = try XCTUnwrap(report.client(.noCache))
        XCTAssertEqual(plain.originRequestTotal, Scenario.standard.requestCount)
        XCTAssertEqual(plain.fetched, Scenario.standard.requestCount)
        XCTAssertEqual(plain.wrongAnswers, 0)
        XCTAssertGreaterThan(plain.originBytes, plain.originBodyBytes, "total bytes include status lines and headers")
    }

    func testEachRuleBehavesAsTheContractSays() async throws {
        let report = try await runComparison()
        XCTAssertEqual(report.rulesClient, .cachingProtocolHead)
        let day: TimeInterval = 86_400

        // 1 ETag: one GET, from cache inside the one-day window, then HEAD If-None-Match → 304
        // with the body from the cache.
        let etag = try XCTUnwrap(report.rule(.etag))
        XCTAssertEqual(etag.records.first?.hops, [OriginHop(method: "GET", status: 200, validator: nil)])
        assertFromCache(etag, before: try XCTUnwrap(policy.etagWindow))
        let etagChecks = etag.records.filter { $0.offset > day }
        XCTAssertFalse(etagChecks.isEmpty)
        for record in etagChecks {
            XCTAssertEqual(record.hops, [OriginHop(method: "HEAD", status: 304, validator: "If-None-Match")])
            XCTAssertEqual(record.answer, .revalidated)
            XCTAssertTrue(record.isCurrent)
            XCTAssertEqual(record.status, 200, "a 304 never reaches the app")
        }
        XCTAssertEqual(etag.records.flatMap(\.hops).filter { $0.method == "GET" }.count, 1, "one GET in the whole session")
        XCTAssertTrue(etag.line.hasPrefix("GET → 200 at launch"), etag.line)
        XCTAssertTrue(etag.line.contains("HEAD If-None-Match → 304 at +2 d, body from cache"), etag.line)

        // 2 max-age: from cache until it expires, then a plain GET (no validators).
        let maxAge = try XCTUnwrap(report.rule(.maxAge))
        assertFromCache(maxAge, before: TimeInterval(DemoSite.catalogMaxAge))
        for record in maxAge.records where record.offset >= TimeInterval(DemoSite.catalogMaxAge) {
            XCTAssertEqual(record.hops, [OriginHop(method: "GET", status: 200, validator: nil)])
        }

        // 3 Last-Modified: like ETag, with If-Modified-Since.
        let modified = try XCTUnwrap(report.rule(.lastModified))
        assertFromCache(modified, before: day)
        for record in modified.records where record.offset > day {
            XCTAssertEqual(record.hops, [OriginHop(method: "HEAD", status: 304, validator: "If-Modified-Since")])
            XCTAssertEqual(record.answer, .revalidated)
        }

        // 4 no-cache: reused within 60 s (the refresh burst costs nothing), refetched after.
        let noCache = try XCTUnwrap(report.rule(.noCache))
        let burst = noCache.records.filter { $0.offset > 0 && $0.offset < policy.noCacheReuse }
        XCTAssertEqual(burst.count, 3)
        XCTAssertTrue(burst.allSatisfy { $0.answer == .fromCache && $0.hops.isEmpty })
        for record in noCache.records where record.offset >= policy.noCacheReuse {
            XCTAssertEqual(record.hops, [OriginHop(method: "GET", status: 200, validator: nil)])
        }
        XCTAssertTrue(noCache.line.contains("3× from cache (+10 s … +30 s)"), noCache.line)

        // 5 image without caching headers: seven days from the cache, refetched after.
        let image = try XCTUnwrap(report.rule(.image))
        let imageLifetime = try XCTUnwrap(policy.imageLifetime)
        assertFromCache(image, before: imageLifetime)
        XCTAssertTrue(image.records.contains { $0.offset >= 2 * day && $0.offset < imageLifetime && $0.answer == .fromCache },
                      "still from the cache days later")
        let afterAWeek = image.records.filter { $0.offset >= imageLifetime }
        XCTAssertFalse(afterAWeek.isEmpty)
        XCTAssertTrue(afterAWeek.allSatisfy { $0.hops == [OriginHop(method: "GET", status: 200, validator: nil)] })

        // JSON without caching headers: fetched every time.
        let feed = try XCTUnwrap(report.rule(.uncachedJSON))
        XCTAssertTrue(feed.records.allSatisfy { $0.hops == [OriginHop(method: "GET", status: 200, validator: nil)] && $0.isCurrent })

        // POST: never cached, every one reaches the origin untouched.
        let post = try XCTUnwrap(report.rule(.post))
        XCTAssertEqual(post.records.count, 2)
        XCTAssertTrue(post.records.allSatisfy { $0.hops == [OriginHop(method: "POST", status: 200, validator: nil)] && $0.isCurrent })

        // The resource that changes half-way: the older body only inside the ETag window, then a
        // HEAD that finds the change, one GET for the new body, and the new body from then on.
        let changing = try XCTUnwrap(report.rule(.changing))
        let insideWindow = changing.records.filter { !$0.isCurrent }
        XCTAssertEqual(insideWindow.count, 1)
        XCTAssertTrue(insideWindow.allSatisfy { $0.isAllowedStale && !$0.isWrong && $0.offset < day })
        let changed = try XCTUnwrap(changing.records.first { $0.offset > day })
        XCTAssertEqual(changed.hops, [OriginHop(method: "HEAD", status: 200, validator: "If-None-Match"),
                                      OriginHop(method: "GET", status: 200, validator: nil)])
        XCTAssertTrue(changed.isCurrent, "the new body after revalidation")
        XCTAssertTrue(changing.records.filter { $0.offset > day }.allSatisfy(\.isCurrent))
        XCTAssertTrue(changing.line.contains("HEAD If-None-Match → 200, GET → 200 at +2 d, new body"), changing.line)

        // With conditional GETs the change costs one round trip that carries the new body.
        let conditional = try XCTUnwrap(report.client(.cachingProtocolConditionalGet))
        let conditionalChange = try XCTUnwrap(conditional.records.first { $0.rule == .changing && $0.offset > day })
        XCTAssertEqual(conditionalChange.hops, [OriginHop(method: "GET", status: 200, validator: "If-None-Match")])
        XCTAssertTrue(conditionalChange.isCurrent)
        XCTAssertEqual(conditional.originRequests["HEAD"], nil)
    }

    func testTheTableShowsEveryClientAndRule() async throws {
        let report = try await runComparison()
        let text = ReportText.render(report)
        for kind in ClientKind.allCases {
            XCTAssertTrue(text.contains(kind.name), kind.name)
        }
        for rule in report.rules {
            XCTAssertTrue(text.contains(rule.line))
        }
        XCTAssertFalse(text.contains("Anomalies"))
    }

    /// Every request of `trace` after the first and before `window` seconds is answered from the cache.
    private func assertFromCache(_ trace: RuleTrace, before window: TimeInterval, file: StaticString = #filePath, line: UInt = #line) {
        let early = trace.records.dropFirst().filter { $0.offset < window }
        for record in early {
            XCTAssertEqual(record.answer, .fromCache, "\(trace.path) at \(record.phase)", file: file, line: line)
            XCTAssertEqual(record.hops, [], "\(trace.path) at \(record.phase)", file: file, line: line)
        }
    }
}
