import Foundation

/// A value guarded by an `NSLock`: the target's one mechanism for shared mutable state.
///
/// The lock is never held across a socket read or write, nor across a call into a request
/// handler, so a slow client or a stalling handler cannot block another connection.
final class LockedBox<State>: @unchecked Sendable {
    // @unchecked: `state` is only read or written inside `withLock`, while `lock` is held.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&state) }
    }
}
