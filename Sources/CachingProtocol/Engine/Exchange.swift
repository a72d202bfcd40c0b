import Foundation

/// One upstream operation — a fetch, or a revalidation with its follow-up GET — and the loads
/// waiting for its answer. Identical concurrent loads share one exchange, so the origin sees one
/// request.
///
/// An exchange only keeps its state (`ExchangeStateMachine`, under a lock); the engine drives it
/// and performs the actions the machine returns, outside the lock (`CacheEngine+Upstream.swift`).
final class Exchange: Sendable {
    /// What the exchange asks the origin.
    enum Kind: Sendable {
        /// A plain GET; `fallback` is what an error may fall back to, `forward` why the request
        /// went to the origin (for `Cache-Status`).
        case fetch(fallback: CacheEntry?, forward: CacheStatus.Forward)
        /// A conditional request for a stored response.
        case revalidate(CacheEntry, RevalidationConditions)
        /// The request as it is, whose answer is handed on and never stored (a byte range the
        /// store could not answer after all, for a policy that stores no partial content).
        case forward
        /// An unsafe request (POST, PUT, PATCH, DELETE …) sent as it is, method and body, for a
        /// URL with something stored: when the origin accepts it, what is stored for the URL (and
        /// its `Location` and `Content-Location` on the same origin) is dropped (RFC 9111 §4.4).
        case unsafe

        /// Loads with equal keys may share an exchange: same operation, same URL, same
        /// credentials and the same request headers (so the same variant would be selected).
        /// (`ID` adds the session settings: the same cookie jar, proxies and TLS rules upstream.)
        func collapseKey(for request: CacheRequest) -> String {
            let headers = (request.urlRequest.allHTTPHeaderFields ?? [:])
                .map { "\($0.key.lowercased()):\($0.value)" }.sorted().joined(separator: "\n")
            let operation: String
            switch self {
            case .fetch: operation = "fetch"
            case .forward: operation = "forward"
            case .unsafe: operation = "unsafe"
            case .revalidate(_, let conditions): operation = "revalidate \(conditions.ifNoneMatch ?? "") \(conditions.ifModifiedSince ?? "")"
            }
            return "\(operation)\n\(request.key)\n\(request.mode.rawValue)\n\(StableHash.hash(headers))"
        }
    }

    /// A load waiting for the answer; `collapsed` when it joined an exchange another load started.
    struct Waiter: Sendable {
        let load: CacheEngine.Load
        let collapsed: Bool
    }

    typealias StateMachine = ExchangeStateMachine<Waiter, UpstreamTask>

    /// What identifies an exchange in the engine's table: loads whose `ID`s are equal share it.
    struct ID: Hashable, Sendable {
        /// `Kind.collapseKey`, or a serial number for a load that shares with nobody.
        let key: String
        /// The settings of the app session the loads come from.
        let settings: SessionSettings
    }

    /// The key under which the engine finds the exchange for collapsing.
    let id: ID
    let kind: Kind
    /// The request of the load that started the exchange (the others' are identical).
    let request: CacheRequest
    /// Started by the engine with nobody waiting (stale-while-revalidate); counted in the
    /// engine's `backgroundWork` until it finishes.
    let isBackground: Bool
    private let machine = Locked(StateMachine())

    init(id: ID, kind: Kind, request: CacheRequest, isBackground: Bool) {
        self.id = id
        self.kind = kind
        self.request = request
        self.isBackground = isBackground
    }

    func join(_ waiter: Waiter) -> StateMachine.JoinAction {
        machine.withLock { $0.join(waiter) }
    }

    func leave(_ number: Int) -> StateMachine.LeaveAction {
        machine.withLock { $0.leave(number) }
    }

    func prepareToSend() -> StateMachine.SendAction {
        machine.withLock { $0.prepareToSend() }
    }

    func upstreamStarted(_ task: UpstreamTask) -> StateMachine.StartAction {
        machine.withLock { $0.upstreamStarted(task) }
    }

    func upstreamFinished() -> StateMachine.FinishAction {
        machine.withLock { $0.upstreamFinished() }
    }

    /// The loads waiting now, in the order they joined.
    var waiting: [(number: Int, waiter: Waiter)] {
        machine.withLock { $0.waiting }
    }
}
