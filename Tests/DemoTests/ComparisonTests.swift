import CachingProtocol
@testable import DemoSupport
import Foundation
import XCTest

/// The Demo's comparison, run in-process: the protocol saves origin requests and bytes against
/// both baselines and against header-only caching, never answers wrongly, and each rule behaves
/// as the contract says, under the heuristic rules and under the headers alone.
final class ComparisonTests: LoaderRulesTestCase {
    private let policy = CachingPolicy.heuristic()

    private func runComparison() async throws -> ComparisonReport {
        let report = try await Comparison(policy: policy).run()
        XCTAssertEqual(report.clients.map(\.kind), ClientKind.allCases)
        for client in report.clients {
            XCTAssertEqual(client.anomalies, [], "\(client.name): its own account and the origin's log agree")
            XCTAssertEqual(client.failed, 0, "\(client.name): every request answered")
            XCTAssertEqual(client.records.count, Scenario.standard.requestCount)
            // The origin's log, request by request, adds up to the log as a whole, per phase too.
            var logged: [String: Int] = [:]
            for hop in client.records.flatMap(\.hops) { logged[hop.method, default: 0] += 1 }
            XCTAssertEqual(logged, client.originRequests, client.name)
            XCTAssertEqual(client.phases.map(\.originRequests).reduce(0, +), client.originRequestTotal, client.name)
            XCTAssertEqual(client.phases.map(\.requests).reduce(0, +), client.records.count, client.name)
            XCTAssertEqual(client.phases.map(\.originBytes).reduce(0, +), client.originBytes, client.name)
            // Nobody got a body the origin made for another user, through the account switch and offline.
            XCTAssertEqual(client.otherUsersAnswers, 0, client.name)
            XCTAssertEqual(client.offline?.records.filter(\.isOtherUsers).count ?? 0, 0, client.name)
            let bob = client.records.filter { $0.user == DemoUser.bob.name }
            XCTAssertEqual(bob.map(\.phase).first, "account switch +8 d 10 min", client.name)
            XCTAssertTrue(bob.allSatisfy { $0.isCurrent }, "\(client.name): bob gets his own, current bodies")
        }
        return report
    }

    func testTheProtocolSavesOriginRequestsAndBytesWithoutWrongAnswers() async throws {
        // Given the standard session, when it runs through every client
        let report = try await runComparison()
        let baselines = [try XCTUnwrap(report.client(.noCache)), try XCTUnwrap(report.client(.urlCache))]

        // Then each heuristic column costs the origin strictly less than both baselines and than
        // header-only caching
        let headerOnly = try XCTUnwrap(report.client(.cachingProtocolRFC9111))
        for kind in [ClientKind.cachingProtocolHead, .cachingProtocolConditionalGet] {
            let ours = try XCTUnwrap(report.client(kind))
            for baseline in baselines + [headerOnly] {
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

    func testTheHeaderOnlyClientCachesByTheHeadersAloneAndTheHeuristicsSaveWhereTheRulesDiffer() async throws {
        // Given the standard session through every client
        let report = try await runComparison()
        let headerOnly = try XCTUnwrap(report.client(.cachingProtocolRFC9111))
        let get200 = OriginHop(method: "GET", status: 200, validator: nil)
        func records(_ path: String) -> [RequestRecord] {
            headerOnly.records.filter { $0.path == path && $0.user == DemoUser.alice.name }
        }

        // Then the header-only client's own account matches the origin's log (runComparison), it
        // never serves an older body, and it revalidates with conditional GETs only
        XCTAssertEqual(headerOnly.wrongAnswers, 0)
        XCTAssertEqual(headerOnly.allowedStale, 0, "its rules grant no window to an ETag, no-cache or image")
        XCTAssertTrue(headerOnly.records.allSatisfy(\.isCurrent))
        XCTAssertNil(headerOnly.originRequests["HEAD"])

        // ETag without freshness: revalidated on every use, the body from the cache
        let config = records(DemoSite.configPath)
        XCTAssertEqual(config.first?.hops, [get200])
        for record in config.dropFirst() {
            XCTAssertEqual(record.hops, [OriginHop(method: "GET", status: 304, validator: "If-None-Match")], record.phase)
            XCTAssertEqual(record.answer, .revalidated)
        }
        // Last-Modified five hours old: fresh for 30 minutes, so the return after an hour asks
        let terms = records(DemoSite.termsPath)
        XCTAssertEqual(terms.first { $0.offset == 3_600 }?.hops,
                       [OriginHop(method: "GET", status: 304, validator: "If-Modified-Since")])
        XCTAssertEqual(report.headerOnlyRules.first { $0.rule == .lastModified }?.treatment, "30 min window")
        // no-cache without validators, and an image without caching headers: fetched every time
        for path in [DemoSite.scoresPath, DemoSite.avatarPath] {
            XCTAssertEqual(records(path).count, 7, path)
            XCTAssertTrue(records(path).allSatisfy { $0.hops == [get200] }, path)
        }
        // max-age: the same as the heuristic rules
        let catalog = records(DemoSite.catalogPath).map(\.hops)
        XCTAssertEqual(catalog, try XCTUnwrap(report.client(.cachingProtocolConditionalGet)).records
            .filter { $0.path == DemoSite.catalogPath && $0.user == DemoUser.alice.name }.map(\.hops))
        // the changed profile: seen at the first check after the change
        let profile = try XCTUnwrap(records(DemoSite.profilePath).first { $0.offset == 3_600 })
        XCTAssertEqual(profile.hops, [OriginHop(method: "GET", status: 200, validator: "If-None-Match")])
        XCTAssertTrue(profile.isCurrent)

        // Offline, as a disconnected cache: what it stored, stale or not, and nothing else
        let offline = try XCTUnwrap(headerOnly.offline)
        XCTAssertEqual(Set(offline.records.filter(\.isAnswered).map(\.path)),
                       [DemoSite.configPath, DemoSite.catalogPath, DemoSite.termsPath, DemoSite.profilePath])
        XCTAssertEqual(offline.wrongAnswers, 0)

        // And phase by phase, each heuristic client is ahead of it or the same, never behind: the
        // same at launch (nothing stored yet) and at +8 d (every window over, the avatar's too)
        let burst = ["refresh +10 s", "refresh +20 s", "refresh +30 s"]
        for kind in [ClientKind.cachingProtocolHead, .cachingProtocolConditionalGet] {
            let standings = report.standings(of: kind, against: .cachingProtocolRFC9111)
            XCTAssertEqual(standings.map(\.ours.phase), headerOnly.phases.map(\.phase))
            // (and at the account switch: nothing is stored for the new user yet)
            XCTAssertEqual(standings.filter { $0.standing == .same }.map(\.ours.phase),
                           ["launch", "return +8 d", "account switch +8 d 10 min"], kind.name)
            XCTAssertEqual(standings.filter { $0.standing == .ahead }.map(\.ours.phase),
                           burst + ["return +1 h", "return +2 d"], kind.name)
            // Request by request, the header-only client did better on the changed profile only:
            // it saw the change at +1 h (inside the heuristic client's ETag day), and at +2 d its
            // check found nothing new where the heuristic client's found the change
            let better = report.requests(where: .cachingProtocolRFC9111, didBetterThan: kind)
            XCTAssertEqual(better.map(\.ours.path), [DemoSite.profilePath, DemoSite.profilePath], kind.name)
            XCTAssertEqual(better.map(\.ours.phase), ["return +1 h", "return +2 d"], kind.name)
            XCTAssertTrue(better.first.map { $0.ours.isAllowedStale && $0.theirs.isCurrent } ?? false, kind.name)
        }
    }

    func testTheTableShowsEveryClientAndRule() async throws {
        let report = try await runComparison()
        let text = ReportText.render(report)
        for kind in ClientKind.allCases {
            XCTAssertTrue(text.contains(kind.name), kind.name)
        }
        for rule in report.rules + report.headerOnlyRules {
            XCTAssertTrue(text.contains(rule.line))
        }
        XCTAssertFalse(text.contains("Anomalies"))
        XCTAssertTrue(text.contains("CachingProtocol (HEAD) against header-only (CachingProtocol .rfc9111): "), text)
        XCTAssertTrue(text.contains("CachingProtocol (conditional GET): ahead at +10 s, +20 s, +30 s, +1 h, +2 d; "
                                    + "the same at launch, +8 d, +8 d 10 min; behind nowhere"), text)
        XCTAssertTrue(text.contains("  1 ETag  /api/config.json  — heuristic: 1 d window; header-only: revalidated on every use"))
        #if os(Linux)
        // Foundation's URLCache stores nothing through URLSession here: the row says so.
        XCTAssertTrue(text.contains("\nURLCache (AFNetworking-style) *  "), text)
        XCTAssertTrue(text.contains("* stored nothing: its cache held 0 bytes at the end"))
        #endif
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
