#if canImport(Darwin)
import Foundation
@testable import CachingProtocol

/// A protocol for the claim tests that is asked first and takes nothing. It records the header
/// fields of each request it is asked about (in `canInit(with request:)`, or the task's current
/// request in `canInit(with task:)`), so a test sees what a protocol is given before the
/// system sends the request. Put it first in a configuration's `protocolClasses` and call
/// `reset()` before the loads.
final class RequestWatcher: URLProtocol {
    private static let seen = Locked<[[String: String]]>([])

    static func reset() {
        seen.withLock { $0 = [] }
    }

    /// For each request asked about, in order: its value of the field `name`, or nil.
    static func values(of name: String) -> [String?] {
        seen.withLock { $0 }.map { fields in fields.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value }
    }

    override class func canInit(with request: URLRequest) -> Bool {
        record(request)
        return false
    }

    override class func canInit(with task: URLSessionTask) -> Bool {
        if let request = task.currentRequest { record(request) }
        return false
    }

    private static func record(_ request: URLRequest) {
        let fields = request.allHTTPHeaderFields ?? [:]
        seen.withLock { $0.append(fields) }
    }
}
#endif
