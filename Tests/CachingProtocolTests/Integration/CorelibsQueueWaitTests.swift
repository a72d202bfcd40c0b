import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

#if canImport(FoundationNetworking)
/// corelibs' one serial queue held busy, as a running transfer holds it (Docs/foundation-facts.md,
/// L25, L34): of the layer's calls that wait for it — making and resuming an upstream task,
/// handing an answer to an app task's client — at most `CorelibsCallLane.poolWaiters` wait on
/// the thread that asked; the others return at once, so the global pool, where the app's
/// delegate queues and completion handlers run, keeps threads for other work. Each test asks
/// from more threads of that pool than the machine has processors, then asks the pool for one
/// more piece of work. Linux only: the queue is corelibs'.
final class CorelibsQueueWaitTests: LoaderRulesTestCase {
    private var origin: LoopbackOrigin!
    private var session: URLSession!

    override func setUpWithError() throws {
        origin = try LoopbackOrigin()
        session = URLSession(configuration: .default)
    }

    override func tearDown() {
        session.invalidateAndCancel()
        origin.stop()
    }

    /// More callers than the global pool runs at once.
    private var callers: Int { ProcessInfo.processInfo.activeProcessorCount + 2 }

    /// Holds corelibs' serial queue (through a task's work queue, which targets it) until the
    /// returned semaphore is signalled.
    private func holdCorelibsQueue() throws -> DispatchSemaphore {
        let queue = try XCTUnwrap(TaskWorkQueue.of(session.dataTask(with: origin.url("/unused"))),
                                  "corelibs' URLSessionTask.workQueue was not found")
        let release = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        queue.async {
            held.signal()
            release.wait()
        }
        held.wait()
        return release
    }

    /// Work queued on the global pool after the callers: it runs while the queue is held only
    /// if no caller's thread waits there.
    private func probeOfTheGlobalPool() -> XCTestExpectation {
        let probe = expectation(description: "the global pool ran other work")
        DispatchQueue.global().async { probe.fulfill() }
        return probe
    }

    func testUpstreamRequestsAreSentWithoutHoldingTheCallersThread() throws {
        origin.handle("/item") { request in .text("item \(request.query ?? "")") }
        let client = UpstreamClient(configuration: SessionSettings.standard.upstreamConfiguration { $0 == CachingURLProtocol.self })
        defer { client.shutdown() }
        let release = try holdCorelibsQueue()
        var released = false
        defer { if !released { release.signal() } }

        // When requests are sent from the global pool while the queue is held
        let returned = expectation(description: "all sends but those waiting on their own thread returned")
        returned.expectedFulfillmentCount = callers - CorelibsCallLane.poolWaiters
        let answered = (0..<callers).map { expectation(description: "request \($0) answered") }
        let bodies = Locked<[Int: String]>([:])
        let origin: LoopbackOrigin = self.origin
        for number in 0..<callers {
            DispatchQueue.global().async {
                _ = client.send(URLRequest(url: origin.url("/item?\(number)")), clock: { Date() }, listener: nil) { outcome in
                    bodies.withLock { $0[number] = (try? outcome.get().body).map { String(decoding: $0, as: UTF8.self) } }
                    answered[number].fulfill()
                }
                returned.fulfill()
            }
        }

        // Then all sends returned but `poolWaiters`, and the pool ran other work, the queue still held
        wait(for: [returned, probeOfTheGlobalPool()], timeout: 10)
        // And once the queue is free, every request is answered, each with its own body
        release.signal()
        released = true
        wait(for: answered, timeout: 20)
        XCTAssertEqual(bodies.withLock { $0 }, Dictionary(uniqueKeysWithValues: (0..<callers).map { ($0, "item \($0)") }))
        XCTAssertEqual(origin.requests(to: "/item").count, callers)
    }

    func testAnswersAreHandedToTheClientWithoutHoldingTheCallersThread() throws {
        // Given loads of app tasks, each answered from off its task's queue, as the engine answers
        let body = Data("answer".utf8)
        let response = try XCTUnwrap(HTTPURLResponse(url: origin.url("/answer"), statusCode: 200, httpVersion: "HTTP/1.1",
                                                     headerFields: ["Content-Length": "\(body.count)"]))
        let loads = try (0..<callers).map { number -> (client: RecordingClient, owner: CachingURLProtocol, delivery: ClientDelivery) in
            let task = session.dataTask(with: origin.url("/answer?\(number)"))
            let client = RecordingClient()
            let owner = CachingURLProtocol(task: task, cachedResponse: nil, client: client)
            let queue = try XCTUnwrap(TaskWorkQueue.of(task), "corelibs' URLSessionTask.workQueue was not found")
            return (client, owner, ClientDelivery(owner: owner, executor: TaskQueueExecutor(queue: queue)))
        }
        let release = try holdCorelibsQueue()
        var released = false
        defer { if !released { release.signal() } }

        // When each is answered from the global pool while the queue is held
        let returned = expectation(description: "all deliveries but those waiting on their own thread returned")
        returned.expectedFulfillmentCount = callers - CorelibsCallLane.poolWaiters
        for load in loads {
            let delivery = load.delivery
            DispatchQueue.global().async {
                delivery.deliver(.response(response, body))
                returned.fulfill()
            }
        }

        // Then all deliveries returned but `poolWaiters`, and the pool ran other work, the queue still held
        wait(for: [returned, probeOfTheGlobalPool()], timeout: 10)
        XCTAssertEqual(loads.map(\.client.calls), Array(repeating: [], count: callers), "nothing reached a client yet")
        // And once the queue is free, each client gets the whole answer
        release.signal()
        released = true
        wait(for: loads.map(\.client.ended), timeout: 10)
        for load in loads {
            XCTAssertEqual(load.client.calls, ["response 200", "data 6", "finish"])
            XCTAssertEqual(load.client.body, body)
        }
        withExtendedLifetime(loads.map(\.owner)) {}
    }
}
#endif
