import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

#if canImport(FoundationNetworking)
/// The protocol between the two hops of corelibs' `cancel()` (Docs/foundation-facts.md, L30):
/// the first marks the task `.canceling` on its work queue, the second calls `stopLoading` and
/// reports the cancellation; a load that ends in between, or that starts after the second, ends
/// a task the report then finds gone from its session's registry, and corelibs traps. Here the
/// task is held between the hops deterministically: it is cancelled on a session whose delegate
/// queue is suspended, so the report never completes it and its state stays `.canceling`. The
/// races themselves, run as apps meet them, are `CancelRaceTests`.
final class CancellationHopsTests: CachingTestCase {
    private var heldSession: URLSession?
    private let heldDelegateQueue = OperationQueue()

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin.handle("/item") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: Data("stored item".utf8))
        }
    }

    override func tearDownWithError() throws {
        heldDelegateQueue.isSuspended = false
        heldSession?.invalidateAndCancel()
        try super.tearDownWithError()
    }

    /// A completion-handler task for `url` on a session whose only protocol does nothing and
    /// whose delegate queue is suspended; `cancelled`: after the first hop of `cancel()`.
    /// `completed` is fulfilled when the completion handler ran.
    private func task(for url: URL, cancelled: Bool, completed: XCTestExpectation? = nil) -> URLSessionDataTask {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.protocolClasses = [InertProtocol.self]
        heldDelegateQueue.isSuspended = true
        let session = URLSession(configuration: configuration, delegate: nil, delegateQueue: heldDelegateQueue)
        heldSession = session
        let task = session.dataTask(with: url) { _, _, _ in completed?.fulfill() }
        if cancelled { task.cancel() }
        return task
    }

    /// A stored answer for `/item`, fetched once through the layer.
    private func storeItem() async throws {
        _ = try await get("/item")
        XCTAssertEqual(origin.requests(to: "/item").count, 1)
    }

    func testAHitForATaskBeingCancelledIsLeftToTheCancellation() async throws {
        try await storeItem()
        let task = task(for: origin.url("/item"), cancelled: true)
        XCTAssertEqual(task.state, .canceling)
        let client = RecordingClient()
        let load = CachingURLProtocol(task: task, cachedResponse: nil, client: client)
        load.startLoading()
        XCTAssertEqual(client.calls, [], "the cancellation's own report ends the task; an answer before it would end it twice")
        load.stopLoading()
        XCTAssertEqual(client.calls, [])
    }

    /// corelibs' second hop can run before `resume()`'s `startLoading` when the task's protocol
    /// was made while the task was being cancelled: `stopLoading`, the cancellation's report (the
    /// task completes and leaves its session's registry), then `startLoading`.
    func testStartLoadingAfterTheCancellationsStopLoadingDoesNothing() async throws {
        try await storeItem()
        let completed = expectation(description: "the cancellation completed the task")
        let task = task(for: origin.url("/item"), cancelled: true, completed: completed)
        let client = RecordingClient()
        let load = CachingURLProtocol(task: task, cachedResponse: nil, client: client)
        load.stopLoading()
        heldDelegateQueue.isSuspended = false
        await fulfillment(of: [completed], timeout: 10)
        XCTAssertEqual(task.state, .completed)
        load.startLoading()
        XCTAssertEqual(client.calls, [], "a load after the cancellation's report answers a task that is gone")
    }

    /// The same calls for a task nobody cancelled: answered as usual, so the two tests above
    /// are not empty for some other reason.
    func testATaskNotBeingCancelledIsAnswered() async throws {
        try await storeItem()
        let task = task(for: origin.url("/item"), cancelled: false)
        let client = RecordingClient()
        let load = CachingURLProtocol(task: task, cachedResponse: nil, client: client)
        load.startLoading()
        XCTAssertEqual(client.calls, ["response 200", "data 11", "finish"])
        // A suspension's `stopLoading`, then `resume()`'s `startLoading`: loaded again.
        load.stopLoading()
        let again = RecordingClient()
        load.client = again
        load.startLoading()
        XCTAssertEqual(again.calls, ["response 200", "data 11", "finish"])
    }
}

/// A protocol that takes every request and never answers: what the held sessions' cancellations
/// make and stop.
private final class InertProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {}
    override func stopLoading() {}
}
#endif
