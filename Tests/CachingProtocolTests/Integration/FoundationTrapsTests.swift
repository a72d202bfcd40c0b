import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The traps of FoundationNetworking on Linux (Docs/foundation-facts.md), each pinned down.
final class FoundationTrapsTests: CachingTestCase {
    private let body = Data.pattern(300_000, seed: 5)

    override func setUpWithError() throws {
        try super.setUpWithError()
        let body = self.body
        origin.handle("/chunked") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: body, transfer: .chunked(chunkSize: 1_000))
        }
    }

    #if canImport(FoundationNetworking)
    /// corelibs' client reads the session's task registry on every call; the session changes it
    /// on the task's work queue as tasks come and go. Client calls made from the engine's
    /// threads raced with it and crashed the process now and then under concurrent misses
    /// (`URLSession.behaviour(for:)`, a null dereference): deliveries go to that queue now.
    /// Linux only: the work queue is corelibs' (on Apple the client thread orders deliveries).
    func testConcurrentMissesCallTheClientOnTheTasksWorkQueue() throws {
        // Given the work queue of an app task, marked so a client call can tell it runs there
        let small = Data.pattern(1_000, seed: 9)
        origin.handle("/many") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: small) }
        let task = session.dataTask(with: origin.url("/many?item=0"))
        let queue = try XCTUnwrap(TaskWorkQueue.of(task), "corelibs' URLSessionTask.workQueue was not found")
        XCTAssertEqual(queue.label, "org.swift.URLSessionTask.WorkQueue")
        let marker = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: marker, value: true)
        // When a miss is loaded for it, answered from the engine's threads
        let client = RecordingClient(queueMarker: marker)
        let loading = CachingURLProtocol(task: task, cachedResponse: nil, client: client)
        loading.startLoading()
        wait(for: [client.ended], timeout: 10)
        // Then every client call ran on that queue
        XCTAssertEqual(client.calls, ["response 200 on the marked queue", "data 1000 on the marked queue", "finish on the marked queue"])

        // And many concurrent misses through a session all arrive whole (before, one run in a
        // few crashed)
        let wrong = Locked(0)
        let group = DispatchGroup()
        let issued = Locked(0)
        let session: URLSession = self.session
        let origin: LoopbackOrigin = self.origin
        @Sendable func next() {
            let number = issued.withLock { $0 += 1; return $0 }
            guard number <= 600 else { return group.leave() }
            session.dataTask(with: origin.url("/many?item=\(number)")) { data, _, _ in
                if data != small { wrong.withLock { $0 += 1 } }
                next()
            }.resume()
        }
        for _ in 0..<8 {
            group.enter()
            next()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(wrong.withLock { $0 }, 0)
        XCTAssertEqual(origin.requests(to: "/many").count, 601, "every one a miss")
    }
    #endif

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
        // The 301 is stored under /old and the 200 under /new: followed by the engine (Linux) or
        // reported to the system, which follows it (Apple), both answer from the cache.
        XCTAssertEqual(originMethods("/old"), ["GET"], "the permanent redirect is served from the cache")
        XCTAssertEqual(originMethods("/new"), ["GET"], "and so is its target")
    }

    func testTemporaryRedirectTargetsAreNotStoredUnderTheOriginalURL() async throws {
        origin.handle("/today") { _ in OriginResponse(status: 302, headers: [HTTPField("Location", "/monday")]) }
        origin.handle("/monday") { _ in .text("monday", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        _ = try await get("/today")
        _ = try await get("/today")
        XCTAssertEqual(originMethods("/today"), ["GET", "GET"], "a 302 without freshness is asked again")
        XCTAssertEqual(originMethods("/monday"), ["GET"], "its target is stored under its own URL")
    }

    func testDelegateTasksGetHitsToo() async throws {
        _ = try await get("/chunked")
        let (data, response, _) = try loadWithDelegate(request("/chunked"))
        XCTAssertEqual(data, body)
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status")?.contains("hit"), true)
        XCTAssertEqual(originMethods("/chunked"), ["GET"])
    }
}
