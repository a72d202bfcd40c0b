import Foundation
import XCTest

/// Work run once on a global queue, as a transfer's callbacks run, with two expectations
/// fulfilled when it returns: `early` for a short wait that should time out (the work is held
/// somewhere), `done` for the wait for its end. An expectation may be waited for only once.
final class BackgroundWork: Sendable {
    let early = XCTestExpectation(description: "the work returned early")
    let done = XCTestExpectation(description: "the work returned")

    init(_ work: @escaping @Sendable () -> Void) {
        let (early, done) = (early, done)
        DispatchQueue.global().async {
            work()
            early.fulfill()
            done.fulfill()
        }
    }
}
