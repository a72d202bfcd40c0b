import CachingProtocol
@testable import DemoSupport
import Foundation
import XCTest

/// The wrong-answer count is only worth something if it can be non-zero: these tests show that
/// it counts a stale body the contract forbids, and nothing the contract allows.
final class WrongAnswerTests: LoaderRulesTestCase {
    func testTheJudgementFollowsTheDefinition() {
        let cases: [(current: Bool, contacted: Bool, since: TimeInterval?, window: TimeInterval, expected: Freshness)] = [
            (true, false, nil, 0, .current),
            (true, true, 10, 0, .current),
            (false, false, 3_600, 86_400, .allowedStale),    // inside the ETag day
            (false, false, 86_400, 86_400, .wrong),          // the window is over
            (false, true, 0, 86_400, .wrong),                // stale after a 304 or HEAD
            (false, false, nil, 86_400, .wrong),             // never came from the origin
            (false, false, 1, 0, .wrong),                    // a resource that must always be current
        ]
        for item in cases {
            XCTAssertEqual(Freshness.judge(isCurrent: item.current, contactedOrigin: item.contacted,
                                           sinceConfirmation: item.since, window: item.window),
                           item.expected, "\(item)")
        }
    }

    /// A body the origin made for one user counts as wrong when another user gets it.
    func testAnotherUsersBodyIsCaught() {
        let alicesProfile = DemoContent.json("profile v1", bytes: 4_000, owner: DemoUser.alice.name)
        let alicesFeed = DemoContent.feed(at: Date(timeIntervalSince1970: 1_700_000_000), owner: DemoUser.alice.name)
        for body in [alicesProfile, alicesFeed] {
            XCTAssertTrue(Comparison.isOtherUsers(body, answeredTo: .bob))
            XCTAssertFalse(Comparison.isOtherUsers(body, answeredTo: .alice))
        }
        XCTAssertFalse(Comparison.isOtherUsers(DemoContent.json("config", bytes: 8_000), answeredTo: .bob), "a body for everyone")
    }

    func testACacheThatKeepsETagResourcesTooLongIsCaught() async throws {
        // Given the protocol configured with a 30-day ETag window, judged by the default contract
        let comparison = Comparison(clients: [.cachingProtocolHead],
                                    policy: .heuristic(etagWindow: 30 * 86_400),
                                    contract: .heuristic())
        // When the session runs
        let report = try await comparison.run()
        let client = try XCTUnwrap(report.client(.cachingProtocolHead))
        // Then the changed profile served days after the one-day window counts as wrong
        let wrong = client.records.filter(\.isWrong)
        XCTAssertFalse(wrong.isEmpty)
        XCTAssertTrue(wrong.allSatisfy { $0.path == DemoSite.profilePath && $0.offset > 86_400 && $0.hops.isEmpty })
        XCTAssertEqual(client.wrongAnswers, wrong.count)
        XCTAssertTrue(try XCTUnwrap(report.rule(.changing)).line.contains("WRONG"))
    }

    func testEachClientIsJudgedByItsOwnRules() async throws {
        // Given the changed profile, which the heuristic rules serve from the cache at +1 h
        // (inside the ETag day) and RFC 9111's rules never serve without asking
        let session = Scenario(phases: Array(Scenario.standard.phases.prefix(6)))
        // When a heuristic client runs, judged by its own rules, then by RFC 9111's
        let own = try await Comparison(scenario: session, clients: [.cachingProtocolHead]).run()
        let strict = try await Comparison(scenario: session, clients: [.cachingProtocolHead], contract: .rfc9111).run()
        // Then the same older body is allowed by the first and wrong by the second
        let allowed = try XCTUnwrap(own.client(.cachingProtocolHead))
        XCTAssertEqual(allowed.wrongAnswers, 0)
        XCTAssertEqual(allowed.records.filter(\.isAllowedStale).map(\.path), [DemoSite.profilePath])
        let judged = try XCTUnwrap(strict.client(.cachingProtocolHead))
        XCTAssertEqual(judged.records.filter(\.isWrong).map(\.path), [DemoSite.profilePath])
    }

    func testAHeaderOnlyClientThatKeepsETagResourcesIsCaughtByTheHeaderOnlyRules() async throws {
        // Given the header-only client configured with a day's ETag window, judged by RFC 9111
        var lenient = CachingPolicy.rfc9111
        lenient.etagWindow = 86_400
        let comparison = Comparison(clients: [.cachingProtocolRFC9111], headerOnlyPolicy: lenient,
                                    headerOnlyContract: .rfc9111)
        // When the session runs
        let report = try await comparison.run()
        let client = try XCTUnwrap(report.client(.cachingProtocolRFC9111))
        // Then the older profile it serves after the change counts as wrong
        let wrong = client.records.filter(\.isWrong)
        XCTAssertEqual(wrong.map(\.path), [DemoSite.profilePath])
        XCTAssertTrue(wrong.allSatisfy { $0.hops.isEmpty && $0.offset == 3_600 })
        XCTAssertTrue(try XCTUnwrap(report.headerOnlyRules.first { $0.rule == .changing }).line.contains("WRONG"))
    }
}
