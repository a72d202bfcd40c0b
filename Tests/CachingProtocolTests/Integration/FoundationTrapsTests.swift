import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The traps of FoundationNetworking on Linux (see linux-foundation-notes.md), each pinned down.
final class FoundationTrapsTests: CachingTestCase {
    private let body = Data.pattern(300_000, seed: 5)

    override func setUpWithError() throws {
        try super.setUpWithError()
        let body = self.body
        origin.handle("/chunked") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: body, transfer: .chunked(chunkSize: 1_000))
        }
    }

    /// Note 10: only the last `didLoad` reaches completion handlers and `async` callers, so the
    /// body must be handed over in one piece, whatever the number of upstream chunks.
    func testManyChunkBodyReachesEveryKindOfCallerWhole() async throws {
        let (asyncData, _) = try await get("/chunked")
        XCTAssertEqual(asyncData, body, "async data(for:) on the miss")
        let (handlerData, _) = try loadWithCompletionHandler(request("/chunked"))
        XCTAssertEqual(handlerData, body, "completion handler on the hit")
        let (delegateData, _, _) = try loadWithDelegate(request("/chunked"))
        XCTAssertEqual(delegateData, body, "delegate on the hit")

        cache.removeAll()
        let (missByHandler, _) = try loadWithCompletionHandler(request("/chunked"))
        XCTAssertEqual(missByHandler, body, "completion handler on a miss")
        cache.removeAll()
        let (missByDelegate, _, _) = try loadWithDelegate(request("/chunked"))
        XCTAssertEqual(missByDelegate, body, "delegate on a miss")
        XCTAssertEqual(originMethods("/chunked"), ["GET", "GET", "GET"])
    }

    /// Note 11: calling the client after `stopLoading` crashes the process. Cancel while the
    /// origin stalls, then check nothing was stored and the next request goes out again.
    func testCancellingATaskInFlightNeitherCrashesNorStores() async throws {
        let started = expectation(description: "the origin saw the request")
        origin.handle("/slow") { _ in
            started.fulfill()
            return OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: Data("late".utf8), fault: .stall(2))
        }
        let finished = expectation(description: "completion")
        let outcome = Locked<Error?>(nil)
        let task = session.dataTask(with: request("/slow")) { _, _, error in
            outcome.withLock { $0 = error }
            finished.fulfill()
        }
        task.resume()
        await fulfillment(of: [started], timeout: 5)
        task.cancel()
        await fulfillment(of: [finished], timeout: 5)
        XCTAssertEqual((outcome.withLock { $0 } as? URLError)?.code, .cancelled)
        XCTAssertNil(cache.cachedResponse(for: request("/slow")), "a cancelled load stores nothing")

        origin.handle("/slow") { _ in .text("now", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (data, _) = try await get("/slow")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "now")
        XCTAssertEqual(originMethods("/slow").count, 2)
    }

    func testOriginDyingMidBodyStoresNothingAndTheNextRequestRefetches() async throws {
        let full = Data.pattern(50_000)
        origin.handle("/dies") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: full, fault: .closeAfterBodyBytes(10_000))
        }
        do {
            _ = try await get("/dies")
            XCTFail("a truncated body must be an error")
        } catch {
            XCTAssertTrue(error is URLError, "\(error)")
        }
        XCTAssertNil(cache.cachedResponse(for: request("/dies")))
        origin.handle("/dies") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: full) }
        let (data, _) = try await get("/dies")
        XCTAssertEqual(data, full)
        XCTAssertEqual(originMethods("/dies").count, 2)
    }

    func testRedirectsAreFollowedInsideTheCache() async throws {
        origin.handle("/old") { _ in OriginResponse(status: 301, headers: [HTTPField("Location", "/new")]) }
        origin.handle("/new") { _ in .text("moved here", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (data, response) = try await get("/old")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "moved here")
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(response.url, origin.url("/new"))
        _ = try await get("/old")
        XCTAssertEqual(originMethods("/old"), ["GET"], "a permanent redirect's target is served from the cache")
        XCTAssertEqual(originMethods("/new"), ["GET"])
    }

    func testTemporaryRedirectTargetsAreNotStoredUnderTheOriginalURL() async throws {
        origin.handle("/today") { _ in OriginResponse(status: 302, headers: [HTTPField("Location", "/monday")]) }
        origin.handle("/monday") { _ in .text("monday", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        _ = try await get("/today")
        _ = try await get("/today")
        XCTAssertEqual(originMethods("/today"), ["GET", "GET"])
    }

    func testDelegateTasksGetHitsToo() async throws {
        _ = try await get("/chunked")
        let (data, response, _) = try loadWithDelegate(request("/chunked"))
        XCTAssertEqual(data, body)
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status")?.contains("hit"), true)
        XCTAssertEqual(originMethods("/chunked"), ["GET"])
    }
}
