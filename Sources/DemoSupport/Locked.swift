import Foundation

/// A value guarded by an `NSLock`: DemoSupport's one mechanism for shared mutable state (the
/// library's own lock type is internal to it).
final class Locked<State>: @unchecked Sendable {
    // @unchecked: `state` is only read or written inside `withLock`, while `lock` is held.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
