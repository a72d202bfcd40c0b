import Foundation
import XCTest
@testable import CachingProtocol
#if os(macOS) || os(Linux)
@testable import CacheTestTool

/// The stress test's judge of a byte range asked with `reloadIgnoringLocalCacheData`: the part
/// must come from a body the origin sent while the load ran. Every version of a resource begins
/// with the same line up to its version number, so a part of those bytes is part of many
/// versions, old and new alike.
final class StressCheckerTests: LoaderRulesTestCase {
    private let path = "/r/13"
    private let user = "alice"

    /// Versions 0 to 9 of one body, each sent once, version `v` at sequence `10 * v`: all of one
    /// length, all beginning with the same 25 bytes.
    private func versions() -> [Data: StressOrigin.Served] {
        var served: [Data: StressOrigin.Served] = [:]
        for version in 0..<10 {
            var body = Data("STRESS \(path) user=\(user) version=\(version)\n".utf8)
            body.append(Data(repeating: UInt8(version), count: 100))
            served[body] = StressOrigin.Served(status: 200, etags: ["\"v\(version)\""], sequences: [10 * version])
        }
        return served
    }

    private func part(from first: Int, to last: Int, of body: Data, window: ClosedRange<Int>) -> StressChecker.Answer {
        StressChecker.Answer(path: path, user: user, status: 206, etag: nil, contentRange: "bytes \(first)-\(last)/\(body.count)",
                             body: Data(body[first...last]), cacheStatus: nil, window: window)
    }

    func testAReloadsPartOfBytesEveryVersionSharesIsRightWhenOneOfThemWasSentWhileItRan() throws {
        let served = versions()
        let newest = try XCTUnwrap(served.first { $0.value.sequences == [90] }?.key)

        let shared = part(from: 0, to: 24, of: newest, window: 85...95)
        XCTAssertNil(StressChecker.problem(with: shared, served: served), "version 9 was sent at 90, while the load ran")

        let tooLate = part(from: 0, to: 24, of: newest, window: 91...95)
        XCTAssertNotNil(StressChecker.problem(with: tooLate, served: served), "no version was sent while the load ran")
    }

    func testAReloadsPartOfOneVersionOnlyIsJudgedByThatVersion() throws {
        let served = versions()
        let oldest = try XCTUnwrap(served.first { $0.value.sequences == [0] }?.key)
        let tail = oldest.count - 10

        let old = part(from: tail, to: oldest.count - 1, of: oldest, window: 85...95)
        let problem = try XCTUnwrap(StressChecker.problem(with: old, served: served), "version 0 was sent at 0, before the load")
        XCTAssertTrue(problem.contains("before it started"), problem)
        XCTAssertNil(StressChecker.problem(with: part(from: tail, to: oldest.count - 1, of: oldest, window: 0...5), served: served))
    }
}
#endif
