import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// 100 requests started and cancelled at once, without and with the layer: how many reach the
/// origin. Which ones do is a race in both (each cancellation against its transfer's start), so
/// the counts vary from run to run; what must hold every time is asserted, and the counts are
/// printed (`Docs/transparency.md` records their distributions). The origin holds every response
/// back, so no task can finish before its cancellation (when one does, corelibs itself can trap
/// on the cancellation's report, with or without the layer).
final class MassCancellationTests: CachingTestCase {
    private let count = 100

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin.handle("/item") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: Data("item".utf8), fault: .stall(5))
        }
        origin.handle("/sentinel") { _ in .text("done") }
    }

    /// How the app makes and cancels its tasks.
    enum Style: String, CaseIterable {
        /// Completion-handler tasks on a session without a delegate, `cancel()`.
        case completionHandler = "completion handler"
        /// Tasks of the session's delegate, `cancel()`.
        case sessionDelegate = "session delegate"
        /// Tasks of the session's delegate, `resume()` then `cancel()`, as Alamofire cancels.
        case alamofire = "Alamofire-style"
    }

    /// What one run saw.
    struct Run {
        /// Requests for the 100 URLs that reached the origin.
        var reached: Int
        /// URLs that reached the origin more than once.
        var sentTwice: Int
        /// How the tasks ended, by outcome.
        var outcomes: [String: Int]
    }

    /// Starts `count` tasks for distinct URLs on a new session (with the layer or not), then
    /// cancels them all; `whileTheEngineWaits` holds the engine's queue until every task ended,
    /// so every cancellation comes before the layer could send anything.
    private func startAndCancel(withLayer: Bool, style: Style, whileTheEngineWaits: Bool = false) async throws -> Run {
        origin.resetLog()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        if withLayer { CachingURLProtocol.inject(into: sessionConfiguration, using: configuration) }
        let ended = XCTestExpectation(description: "every task ended")
        ended.expectedFulfillmentCount = count
        let outcomes = Locked<[String: Int]>([:])
        let record: @Sendable (Error?) -> Void = { error in
            outcomes.withLock { $0[error.map { "error \(($0 as? URLError)?.code.rawValue ?? -1)" } ?? "ok", default: 0] += 1 }
            ended.fulfill()
        }
        let delegate = style == .completionHandler ? nil : CompletionDelegate(record)
        let session = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let tasks: [URLSessionDataTask] = (0..<count).map { number in
            let url = origin.url("/item?n=\(number)&layer=\(withLayer)&id=\(UUID().uuidString)")
            return style == .completionHandler ? session.dataTask(with: url) { _, _, error in record(error) } : session.dataTask(with: url)
        }
        let gate = DispatchSemaphore(value: 0)
        if whileTheEngineWaits { CacheEngine.queue.async(flags: .barrier) { _ = gate.wait(timeout: .now() + 60) } }
        for task in tasks { task.resume() }
        for task in tasks {
            if style == .alamofire { task.resume() }
            task.cancel()
        }
        await fulfillment(of: [ended], timeout: 30)
        if whileTheEngineWaits { gate.signal() }
        #if canImport(FoundationNetworking)
        // Every upstream task the layer made is made, and its cancellation handed to corelibs,
        // before the sentinel's request below: the engine makes them on its queue, and makes and
        // cancels them through their lanes.
        if withLayer {
            CacheEngine.queue.sync(flags: .barrier) {}
            CorelibsCallLane.waitForQueuedCalls()
        }
        #endif
        // A request through the same session after them (with a timeout of its own): once it is
        // answered, every cancellation has reached the transfer it stops (corelibs runs them in
        // order on its one queue), so no request of theirs is still on its way to the origin
        // (looked at earlier, none there yet would pass for all abandoned).
        _ = try? await session.data(for: URLRequest(url: origin.url("/sentinel"), timeoutInterval: 10))
        // Every request that reached the origin was given up by its client: the origin holds each
        // for 5 s, so one that is still held (or was sent whole) after 10 s was never cancelled.
        let server = self.origin!
        let abandoned: @Sendable () -> Bool = { server.responsesAbandoned == server.requests(to: "/item").count }
        await fulfillment(of: [expectation(until: "every request the origin got was abandoned", giveUpAfter: 10, abandoned)],
                          timeout: 10)
        // Stop here: every later round would wait behind the same requests.
        guard abandoned() else { throw UncancelledRequests(reached: server.requests(to: "/item").count, abandoned: server.responsesAbandoned) }
        let targets = origin.requests(to: "/item").map(\.target)
        return Run(reached: targets.count, sentTwice: targets.count - Set(targets).count, outcomes: outcomes.withLock { $0 })
    }

    /// Every cancellation arrives before the layer could send anything (its engine is held): no
    /// request reaches the origin, and every task ends with the cancellation error.
    func testTasksCancelledBeforeTheLayerSentThemNeverReachTheOrigin() async throws {
        for style in Style.allCases {
            let run = try await startAndCancel(withLayer: true, style: style, whileTheEngineWaits: true)
            XCTAssertEqual(run.outcomes, ["error -999": count], style.rawValue)
            XCTAssertEqual(run.reached, 0, style.rawValue)
        }
    }

    /// The race as it comes, without and with the layer, `rounds` times per style (3, or
    /// `CACHINGPROTOCOL_MASS_CANCEL_ROUNDS`): every task ends with the cancellation error either
    /// way, and through the layer no URL reaches the origin twice (before this round Alamofire's
    /// extra `resume()` started a second load that the cancellation never reached). The counts
    /// are printed: they vary too much between runs of one side for a bound between the sides.
    func testAHundredTasksCancelledAtOnce() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["CACHINGPROTOCOL_MASS_CANCEL_ROUNDS"] ?? "") ?? 3
        for style in Style.allCases {
            var counts: (without: [Int], with: [Int]) = ([], [])
            for _ in 0..<rounds {
                let without = try await startAndCancel(withLayer: false, style: style)
                let with = try await startAndCancel(withLayer: true, style: style)
                XCTAssertEqual(without.outcomes, ["error -999": count], style.rawValue)
                XCTAssertEqual(with.outcomes, ["error -999": count], style.rawValue)
                XCTAssertEqual(with.sentTwice, 0, style.rawValue)
                counts.without.append(without.reached)
                counts.with.append(with.reached)
            }
            print("mass cancel, \(style.rawValue), \(rounds) rounds: requests that reached the origin of \(count), "
                  + "without the layer \(counts.without.sorted()), with it \(counts.with.sorted())")
        }
    }
}

/// Requests the origin still held (or sent whole) after their tasks were cancelled: the layer
/// kept its upstream requests running.
private struct UncancelledRequests: Error, CustomStringConvertible {
    let reached: Int
    let abandoned: Int
    var description: String { "\(reached) requests reached the origin, \(abandoned) of them abandoned by their client" }
}

/// A session delegate that reports each task's end.
private final class CompletionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let completed: @Sendable (Error?) -> Void

    init(_ completed: @escaping @Sendable (Error?) -> Void) {
        self.completed = completed
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        completed(error)
    }
}
