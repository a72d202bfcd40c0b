import Foundation

/// A load in progress, as its caller holds it. `cancel()` stops it: no answer is delivered
/// afterwards, and the upstream request is cancelled when no other load shares it.
///
/// Threading: any member from any thread; `cancel` may race with the answer, and exactly one of
/// the two wins (`finish`).
final class LoadHandle: Sendable {
    private struct State {
        var isFinished = false
        /// How to stop waiting on the exchange the load joined, once it joined one.
        var leaveExchange: (@Sendable () -> Void)?
    }
    private let state = Locked(State())

    /// Marks the load answered; false when it was already answered or cancelled.
    func finish() -> Bool {
        state.withLock { state in
            guard !state.isFinished else { return false }
            state.isFinished = true
            state.leaveExchange = nil
            return true
        }
    }

    /// Records how the load leaves the exchange it waits on. A load cancelled before it got here
    /// leaves at once, so an upstream request nobody waits for is cancelled.
    func joined(leavingWith leave: @escaping @Sendable () -> Void) {
        let cancelledAlready = state.withLock { state -> Bool in
            guard !state.isFinished else { return true }
            state.leaveExchange = leave
            return false
        }
        if cancelledAlready { leave() }
    }

    func cancel() {
        let leave = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.isFinished else { return nil }
            state.isFinished = true
            defer { state.leaveExchange = nil }
            return state.leaveExchange
        }
        leave?()
    }
}
