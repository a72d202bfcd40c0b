import XCTest
@testable import CachingProtocol

/// The exchange's life as a value: joining, leaving, the upstream request, the end. No network.
final class ExchangeStateMachineTests: LoaderRulesTestCase {
    /// Waiters are load names; the upstream task is a name too.
    private typealias Machine = ExchangeStateMachine<String, String>

    private func joined(_ action: Machine.JoinAction, file: StaticString = #filePath, line: UInt = #line) -> Int? {
        guard case .joined(let number) = action else {
            XCTFail("expected .joined, got \(action)", file: file, line: line)
            return nil
        }
        return number
    }

    func testJoinersAreAnsweredInTheOrderTheyJoined() throws {
        var machine = Machine()
        XCTAssertEqual(joined(machine.join("first")), 1)
        XCTAssertEqual(joined(machine.join("second")), 2)
        XCTAssertEqual(joined(machine.join("third")), 3)
        guard case .send = machine.prepareToSend() else { return XCTFail("a running exchange sends") }
        guard case .none = machine.upstreamStarted("GET") else { return XCTFail("nobody left: keep the task") }
        guard case .deliver(let waiters) = machine.upstreamFinished() else { return XCTFail("the end delivers") }
        XCTAssertEqual(waiters, ["first", "second", "third"])
        XCTAssertFalse(machine.isRunning)
    }

    func testTheLastWaiterLeavingCancelsTheUpstreamRequest() {
        var machine = Machine()
        let first = joined(machine.join("first"))!
        let second = joined(machine.join("second"))!
        _ = machine.upstreamStarted("HEAD")
        guard case .none = machine.leave(first) else { return XCTFail("another load still waits") }
        guard case .abandon(let task) = machine.leave(second) else { return XCTFail("the last one abandons") }
        XCTAssertEqual(task, "HEAD", "the running request is named for cancelling")
        XCTAssertFalse(machine.isRunning)
        guard case .refused = machine.join("late") else { return XCTFail("an abandoned exchange takes nobody") }
        guard case .deliver(let waiters) = machine.upstreamFinished() else { return XCTFail("the cancelled request still ends it") }
        XCTAssertEqual(waiters, [], "nobody is answered")
        guard case .none = machine.upstreamFinished() else { return XCTFail("it ends once") }
    }

    func testLeavingBeforeTheRequestStartsAbandonsWithNothingToCancel() {
        var machine = Machine()
        let only = joined(machine.join("only"))!
        guard case .abandon(let task) = machine.leave(only) else { return XCTFail("the last one abandons") }
        XCTAssertNil(task)
        guard case .stop = machine.prepareToSend() else { return XCTFail("nothing is sent for nobody") }
    }

    func testARequestMadeWhileTheLastWaiterLeftIsCancelled() {
        var machine = Machine()
        let only = joined(machine.join("only"))!
        guard case .send = machine.prepareToSend() else { return XCTFail("sends while someone waits") }
        // The waiter leaves between the check and the task's creation.
        guard case .abandon(nil) = machine.leave(only) else { return XCTFail("abandons with no task yet") }
        guard case .cancel(let task) = machine.upstreamStarted("GET") else { return XCTFail("the late task is cancelled") }
        XCTAssertEqual(task, "GET")
    }

    func testCancelDuringRevalidationSendsNoFollowUpGet() {
        var machine = Machine()
        let only = joined(machine.join("only"))!
        _ = machine.upstreamStarted("HEAD")
        guard case .abandon(let task) = machine.leave(only) else { return XCTFail("abandons") }
        XCTAssertEqual(task, "HEAD")
        // The HEAD answered "changed" before the cancel reached it: the follow-up GET is not sent.
        guard case .stop = machine.prepareToSend() else { return XCTFail("no follow-up for nobody") }
    }

    func testAFollowUpRequestReplacesTheTaskToCancel() {
        var machine = Machine()
        let only = joined(machine.join("only"))!
        _ = machine.upstreamStarted("HEAD")
        guard case .send = machine.prepareToSend() else { return XCTFail("the follow-up is sent") }
        _ = machine.upstreamStarted("GET")
        guard case .abandon(let task) = machine.leave(only) else { return XCTFail("abandons") }
        XCTAssertEqual(task, "GET")
    }

    func testAWaiterJoiningAfterCompletionIsRefused() {
        var machine = Machine()
        _ = machine.join("first")
        _ = machine.upstreamFinished()
        guard case .refused = machine.join("late") else { return XCTFail("a finished exchange takes nobody") }
        guard case .none = machine.leave(1) else { return XCTFail("leaving a finished exchange does nothing") }
        guard case .stop = machine.prepareToSend() else { return XCTFail("a finished exchange sends nothing") }
    }

    func testABackgroundExchangeWithNobodyWaitingRunsToItsEnd() {
        var machine = Machine()
        guard case .send = machine.prepareToSend() else { return XCTFail("a background exchange sends") }
        guard case .none = machine.upstreamStarted("HEAD") else { return XCTFail("keeps its task") }
        guard case .none = machine.leave(7) else { return XCTFail("an unknown number changes nothing") }
        XCTAssertTrue(machine.isRunning)
        guard case .deliver(let waiters) = machine.upstreamFinished() else { return XCTFail("it ends") }
        XCTAssertEqual(waiters, [])
    }

    func testALoadThatJoinedABackgroundExchangeAndLeftAbandonsIt() {
        var machine = Machine()
        _ = machine.upstreamStarted("HEAD")
        let joiner = joined(machine.join("joiner"))!
        guard case .abandon(let task) = machine.leave(joiner) else { return XCTFail("the last waiter abandons") }
        XCTAssertEqual(task, "HEAD")
    }

    func testLeavingTwiceCountsOnce() {
        var machine = Machine()
        let first = joined(machine.join("first"))!
        _ = machine.join("second")
        _ = machine.leave(first)
        guard case .none = machine.leave(first) else { return XCTFail("a second leave of the same waiter is ignored") }
        XCTAssertTrue(machine.isRunning)
    }
}
