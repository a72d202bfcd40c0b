import CachingProtocol
@testable import DemoSupport
import Foundation
import XCTest

/// The wrong-answer count is only worth something if it can be non-zero: these tests show that
/// it counts a stale body the contract forbids, and nothing the contract allows.
final class WrongAnswerTests: XCTestCase {
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
}
