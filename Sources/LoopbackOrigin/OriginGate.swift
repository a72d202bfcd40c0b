import Foundation

/// A gate that request handlers wait at until the test opens it: it holds responses (a slow
/// origin, a connection kept busy) for exactly as long as a test needs, without sleeping.
///
/// A handler calls ``pass()``, which blocks its connection's thread while the gate is closed;
/// ``open()`` lets every waiting handler and every later one through. A test that closes a gate
/// opens it before it stops the origin (in a `defer` or its tear-down): a handler still waiting
/// keeps its thread.
///
/// Threading: every member from any thread.
public final class OriginGate: @unchecked Sendable {
    // @unchecked: `isOpen` and `waiting` are only read or written while `condition` is locked.
    private let condition = NSCondition()
    private var isOpen = false
    private var waiting = 0

    /// A closed gate.
    public init() {}

    /// Waits until the gate is open (at once when it is).
    public func pass() {
        condition.lock()
        defer { condition.unlock() }
        waiting += 1
        condition.broadcast()
        while !isOpen { condition.wait() }
        waiting -= 1
    }

    /// Opens the gate for good: the handlers waiting go on, and later ones pass at once.
    public func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    /// How many handlers wait at the gate now.
    public var waitingCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return waiting
    }

    /// Waits until at least `count` handlers wait at the gate; false when they did not within
    /// `timeout` seconds (the gate stays as it is).
    public func waitUntilWaiting(_ count: Int, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while waiting < count {
            guard condition.wait(until: deadline) else { return waiting >= count }
        }
        return true
    }
}
