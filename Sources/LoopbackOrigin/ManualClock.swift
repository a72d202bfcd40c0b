import Foundation

/// A clock that only moves when told to, shared by an origin, a cache and a test or demo, so
/// that "a day later" takes no time at all.
public final class ManualClock: Sendable {
    private let current: LockedBox<Date>

    /// A clock reading `start` (default 2023-11-14 22:13:20 UTC, a fixed instant so runs repeat).
    public init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        current = LockedBox(start)
    }

    /// The current reading.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward (or back, for a negative value).
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// The clock as a closure, for `LoopbackOrigin(now:)` and `CachingConfiguration(now:)`.
    public var read: @Sendable () -> Date { { self.now } }
}
