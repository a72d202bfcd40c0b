import Foundation

/// A value guarded by an `NSLock`, for the origin only: `LoopbackOrigin` deliberately does not
/// depend on the library (it is the independent server the library is tested against), so it
/// cannot use the library's `Locked`.
///
/// In the origin, the lock is never held across a socket read or write, nor across a call into
/// a request handler, so a slow client or a stalling handler cannot block another connection.
public final class LockedBox<State>: @unchecked Sendable {
    // @unchecked: `state` is only read or written inside `withLock`, while `lock` is held.
    private let lock = NSLock()
    private var state: State

    public init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&state) }
    }
}
