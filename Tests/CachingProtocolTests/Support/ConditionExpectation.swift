import Foundation
import XCTest
@testable import CachingProtocol

/// An expectation fulfilled once `condition` holds, checked every millisecond on a timer: no
/// thread sleeps, and it works where `XCTNSPredicateExpectation` does not (it is not evaluated
/// while an `async` test waits on Linux). The timer stops once it is fulfilled.
final class ConditionExpectation: XCTestExpectation, @unchecked Sendable {
    // @unchecked: its one field is set in `init` and never changed; XCTestExpectation is thread-safe.
    private let timer = DispatchSource.makeTimerSource(queue: .global())

    init(_ description: String, _ condition: @escaping @Sendable () -> Bool) {
        super.init(description: description)
        let fulfilled = Locked(false)
        timer.setEventHandler { [weak self, timer] in
            guard condition(), fulfilled.withLock({ let first = !$0; $0 = true; return first }) else { return }
            timer.cancel()
            self?.fulfill()
        }
        timer.schedule(deadline: .now(), repeating: .milliseconds(1))
        timer.resume()
    }

    deinit {
        timer.cancel()
    }
}
