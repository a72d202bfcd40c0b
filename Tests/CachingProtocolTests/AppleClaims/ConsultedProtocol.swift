#if canImport(Darwin)
import Foundation
@testable import CachingProtocol

/// A protocol that counts how often the system asks it about a request or a task, and takes
/// none: the claim tests' way to see whether a session consults a class at all. Reset
/// `consulted` before use.
final class ConsultedProtocol: URLProtocol {
    static let consulted = Locked(0)

    override class func canInit(with request: URLRequest) -> Bool {
        consulted.withLock { $0 += 1 }
        return false
    }

    override class func canInit(with task: URLSessionTask) -> Bool {
        consulted.withLock { $0 += 1 }
        return false
    }
}
#endif
