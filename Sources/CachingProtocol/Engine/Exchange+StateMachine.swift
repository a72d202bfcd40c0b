import Foundation

/// The life of one exchange as a value, with no I/O and no locks: who waits, which upstream
/// request runs, and how it ends. Each event returns the action its caller must perform; the
/// caller performs it after releasing the lock the machine lives in (as async-http-client's
/// `RequestBag.StateMachine` does), so no callback ever runs under that lock.
///
/// `Waiter` is what a joining load leaves behind to be answered; `Task` is the running upstream
/// request. Both are generic so the machine can be tested without a network.
///
/// ```text
///            join / leave (others still wait) / upstreamStarted
///            ┌──────┐
///            ▼      │
///  ──────► running ─┴── upstreamFinished ──────────────────────────► finished
///            │                                                          ▲
///            └── leave (the last waiter) ──► abandoned ── upstreamFinished
/// ```
struct ExchangeStateMachine<Waiter, Task> {
    private enum State {
        /// Upstream work may run; `waiters` are answered when it finishes. `task` is the upstream
        /// request running now, if any.
        case running(waiters: [Int: Waiter], task: Task?)
        /// Every waiter left before the end: the upstream request was cancelled, nothing further
        /// is sent, and a load that comes later starts a new exchange.
        case abandoned
        /// The answer was handed out (or the exchange ended abandoned).
        case finished
    }

    private var state = State.running(waiters: [:], task: nil)
    /// The number the next waiter gets: numbers say in which order loads joined.
    private var nextNumber = 1

    /// What `join` asks of its caller.
    enum JoinAction {
        /// Joined as waiter `number`; `leave(number)` undoes it.
        case joined(number: Int)
        /// The exchange ended or was abandoned: start a new one.
        case refused
    }

    /// What `leave` asks of its caller.
    enum LeaveAction {
        /// Others still wait (or the exchange had ended): nothing to do.
        case none
        /// That was the last waiter: retire the exchange (so later loads start a new one) and
        /// cancel `task` when one is running.
        case abandon(cancelling: Task?)
    }

    /// What `prepareToSend` asks of its caller.
    enum SendAction {
        /// Send the upstream request, then report it with `upstreamStarted`.
        case send
        /// Nobody waits any more: send nothing and finish the exchange.
        case stop
    }

    /// What `upstreamStarted` asks of its caller.
    enum StartAction {
        case none
        /// Every waiter left while the request was being made: cancel it.
        case cancel(Task)
    }

    /// What `upstreamFinished` asks of its caller.
    enum FinishAction {
        /// Hand the answer to `waiters` (in the order they joined; none when abandoned) and retire
        /// the exchange.
        case deliver(to: [Waiter])
        /// The exchange had already finished: nothing to do.
        case none
    }

    /// A load asks to wait for this exchange's answer.
    mutating func join(_ waiter: Waiter) -> JoinAction {
        guard case .running(var waiters, let task) = state else { return .refused }
        let number = nextNumber
        nextNumber += 1
        waiters[number] = waiter
        state = .running(waiters: waiters, task: task)
        return .joined(number: number)
    }

    /// Waiter `number` stops waiting (its load was cancelled). The last waiter leaving abandons
    /// the exchange, also a background exchange that a load had joined.
    mutating func leave(_ number: Int) -> LeaveAction {
        guard case .running(var waiters, let task) = state else { return .none }
        guard waiters.removeValue(forKey: number) != nil else { return .none }
        guard waiters.isEmpty else {
            state = .running(waiters: waiters, task: task)
            return .none
        }
        state = .abandoned
        return .abandon(cancelling: task)
    }

    /// The caller is about to send an upstream request (the first, or a follow-up GET).
    mutating func prepareToSend() -> SendAction {
        guard case .running = state else { return .stop }
        return .send
    }

    /// The upstream request `task` was created and runs.
    mutating func upstreamStarted(_ task: Task) -> StartAction {
        guard case .running(let waiters, _) = state else { return .cancel(task) }
        state = .running(waiters: waiters, task: task)
        return .none
    }

    /// The exchange's work is over: its answer is ready, or it ended without one.
    mutating func upstreamFinished() -> FinishAction {
        switch state {
        case .running(let waiters, _):
            state = .finished
            return .deliver(to: waiters.sorted { $0.key < $1.key }.map(\.value))
        case .abandoned:
            state = .finished
            return .deliver(to: [])
        case .finished:
            return .none
        }
    }

    /// The waiters now, in the order they joined (to hand them a body as it arrives).
    var waiting: [(number: Int, waiter: Waiter)] {
        guard case .running(let waiters, _) = state else { return [] }
        return waiters.sorted { $0.key < $1.key }.map { (number: $0.key, waiter: $0.value) }
    }

    /// Whether the exchange still runs (for tests and assertions).
    var isRunning: Bool {
        if case .running = state { return true }
        return false
    }
}
