import Foundation

/// The package's one lock helper: a value guarded by a mutex.
///
/// Every piece of shared mutable state in the library lives inside a `Locked`. The lock is never
/// held across I/O or across a call into code the library does not own, except where a comment at
/// the call site says why.
final class Locked<State>: @unchecked Sendable {
    // @unchecked: `state` is only read or written inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    @inline(__always)
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
