import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// "Cached, then fresh" (`cachedThenFresh(for:)`): the stored body, then the changed one; plain callers never get two answers.
final class CachedThenFreshTests: CachingTestCase {
    private func collect(_ request: URLRequest) async throws -> [CachedThenFreshResponse] {
        var answers: [CachedThenFreshResponse] = []
        for try await answer in CachingURLProtocol.cachedThenFresh(for: request) {
            answers.append(answer)
        }
        return answers
    }

    func testCachedThenFreshYieldsTheStoredBodyThenTheChangedOne() async throws {
        let resource = OriginResource(body: Data("old".utf8), lastModified: .none)
        origin.serve("/twice", resource)

        let first = try await collect(request("/twice"))
        XCTAssertEqual(first.map(\.source), [.origin], "nothing stored: only the origin's answer")

        let unchanged = try await collect(request("/twice"))
        XCTAssertEqual(unchanged.map(\.source), [.cache(isStale: false)], "unchanged: the stored answer only")
        XCTAssertEqual(unchanged.first?.data, Data("old".utf8))
        XCTAssertEqual(originMethods("/twice"), ["GET", "HEAD"], "it always asks the origin")

        resource.update(body: Data("new".utf8))
        let changed = try await collect(request("/twice"))
        XCTAssertEqual(changed.map(\.source), [.cache(isStale: false), .origin])
        XCTAssertEqual(changed.map { String(decoding: $0.data, as: UTF8.self) }, ["old", "new"])
        XCTAssertEqual(changed.last?.response.statusCode, 200)
    }

    func testPlainCallersNeverGetTwoAnswers() throws {
        origin.serve("/once-only", OriginResource(body: Data("x".utf8), lastModified: .none))
        _ = try loadWithCompletionHandler(request("/once-only"))
        let calls = Locked(0)
        let done = expectation(description: "completion")
        session.dataTask(with: request("/once-only", cachePolicy: .reloadRevalidatingCacheData)) { _, _, _ in
            calls.withLock { $0 += 1 }
            done.fulfill()
        }.resume()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(calls.withLock { $0 }, 1)
    }
}
