import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request on its way through the engine, from the lookup to its answer.
struct Load: Sendable {
    let request: CacheRequest
    /// The app session it comes from.
    let settings: SessionSettings
    let handle: LoadHandle
    let client: LoadClient
    /// What the client asked for when the load was made (read once: the engine never calls back
    /// into the protocol to learn it).
    let streamsBody: Bool
    /// Whether the answer must carry the whole body, even when the client took its pieces as
    /// they arrived (`LoadClient.needsWholeBody`).
    let needsWholeBody: Bool
    let redirects: RedirectHandling
    /// The app's session it comes from, when known (`LoadClient.appSession`).
    let appSession: AppSession?
    let started: DispatchTime
    /// Whether it may share an upstream request with identical loads: not when it is retried
    /// after another load's credentialed answer, nor for an unsafe request.
    var collapsible = true
    /// Redirects the engine followed to get here (`CacheEngine+Redirects`), from the app's
    /// request: the same load, going on with the target's request.
    var redirectsFollowed = 0
    /// A stored redirect was followed on the way: the answer's `Cache-Status` says so.
    var followedStoredRedirect = false

    init(request: CacheRequest, settings: SessionSettings, client: LoadClient, started: DispatchTime,
         handle: LoadHandle = LoadHandle()) {
        self.request = request
        self.settings = settings
        self.client = client
        self.started = started
        self.handle = handle
        streamsBody = client.streamsBody
        needsWholeBody = client.needsWholeBody
        redirects = client.redirects
        appSession = client.appSession
    }

    /// Whether the upstream request may be collected whole by Foundation for this load: it takes
    /// no body as it arrives. (Redirects never matter: the upstream session stops at each one,
    /// and the engine follows it.)
    var takesWholeBody: Bool { !streamsBody }

    /// This load going on with `request`, the target of a redirect it follows, from a session
    /// with `settings`: the same client, handle and start time, one redirect further.
    func following(_ request: CacheRequest, from settings: SessionSettings, viaStoredRedirect: Bool) -> Load {
        var next = Load(request: request, settings: settings, client: client, started: started, handle: handle)
        next.redirectsFollowed = redirectsFollowed + 1
        next.followedStoredRedirect = followedStoredRedirect || viaStoredRedirect
        return next
    }
}

/// A load in progress, as its caller holds it. `cancel()` stops it: no answer is delivered
/// afterwards, and the upstream request is cancelled when no other load shares it.
///
/// Threading: any member from any thread; `cancel` may race with the answer, and exactly one of
/// the two wins (`finish`).
final class LoadHandle: Sendable {
    private struct State {
        var isFinished = false
        /// How to stop waiting on the exchange the load joined, once it joined one.
        var leaveExchange: (@Sendable () -> Void)?
    }
    private let state = Locked(State())

    /// Whether the load was answered or cancelled.
    var isFinished: Bool { state.withLock { $0.isFinished } }

    /// Marks the load answered; false when it was already answered or cancelled.
    func claimAnswer() -> Bool {
        state.withLock { state in
            guard !state.isFinished else { return false }
            state.isFinished = true
            state.leaveExchange = nil
            return true
        }
    }

    /// Records how the load leaves the exchange it waits on. A load cancelled before it got here
    /// leaves at once, so an upstream request nobody waits for is cancelled.
    func joined(leavingWith leave: @escaping @Sendable () -> Void) {
        let cancelledAlready = state.withLock { state -> Bool in
            guard !state.isFinished else { return true }
            state.leaveExchange = leave
            return false
        }
        if cancelledAlready { leave() }
    }

    func cancel() {
        state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.isFinished else { return nil }
            state.isFinished = true
            defer { state.leaveExchange = nil }
            return state.leaveExchange
        }?()
    }
}

/// One upstream operation — a fetch, or a revalidation with its follow-up GET — and the loads
/// waiting for its answer. Identical concurrent loads share one exchange, so the origin sees one
/// request. It only keeps its state (`ExchangeStateMachine`, under a lock); the engine drives it
/// and performs the actions the machine returns, outside the lock (`CacheEngine+Exchange.swift`).
final class Exchange: Sendable {
    /// A load waiting for the answer; `collapsed` when it joined an exchange another load started.
    struct Waiter: Sendable {
        let load: Load
        let collapsed: Bool
    }

    /// What identifies an exchange in the table: loads whose `ID`s are equal share it — the same
    /// operation, URL key and cache mode, the same request header fields (so the same variant
    /// would be selected, and the same credentials sent), the same partition (the same user and
    /// trust judge: a revalidation's `304` answers with the stored body of the load that started
    /// it, which is served to no other user, even when an identity that reads more than the
    /// header fields tells two identical requests apart), from sessions with the same settings
    /// (the same cookie jar, proxies and TLS rules upstream). A load that shares with nobody gets
    /// a serial number of its own. Two tokens of one user are two sets of header fields: their
    /// loads do not share, and each goes as the app wrote it.
    struct ID: Hashable, Sendable {
        /// What the exchange asks: "fetch", "forward", "unsafe", or the validators revalidated.
        let operation: String
        let key: String
        let mode: CacheRequest.Mode
        /// `headerDigest(of:)` of the request's header fields.
        let headers: UInt64
        let partition: Partition
        let settings: SessionSettings
        /// Non-zero for a load that shares with nobody.
        let serial: Int
    }

    let id: ID
    let plan: ExchangePlan
    /// The request of the load that started the exchange (the others' are identical).
    let request: CacheRequest
    /// Started with nobody waiting (stale-while-revalidate); counted in the table's `background`
    /// group until it finishes.
    let isBackground: Bool
    private let state = Locked(ExchangeStateMachine<Waiter, UpstreamTask>())

    fileprivate init(id: ID, plan: ExchangePlan, request: CacheRequest, isBackground: Bool) {
        self.id = id
        self.plan = plan
        self.request = request
        self.isBackground = isBackground
    }

    /// The `ID` of `plan` for `request` from a session with `settings` (`serial` 0: one identical
    /// loads may share).
    static func id(for plan: ExchangePlan, of request: CacheRequest, from settings: SessionSettings, serial: Int) -> ID {
        let operation: String
        switch plan {
        case .fetch: operation = "fetch"
        case .forward: operation = "forward"
        case .unsafe: operation = "unsafe"
        case .revalidate(_, let conditions): operation = "revalidate \(conditions.ifNoneMatch ?? "") \(conditions.ifModifiedSince ?? "")"
        }
        return ID(operation: operation, key: request.key, mode: request.mode, headers: headerDigest(of: request.urlRequest),
                  partition: request.partition, settings: settings, serial: serial)
    }

    /// A digest of `request`'s header fields that does not depend on their order or on the case
    /// of their names: the sum of a stable hash of each "name:value" line (0 for none).
    private static func headerDigest(of request: URLRequest) -> UInt64 {
        guard let fields = request.allHTTPHeaderFields, !fields.isEmpty else { return 0 }
        return fields.reduce(0) { digest, field in digest &+ StableHash.hash(field.key.lowercased() + ":" + field.value) }
    }

    /// Runs `event` on the exchange's state machine under its lock, and returns the action the
    /// caller performs after it (the machine's events are its whole interface).
    func machine<Action>(_ event: (inout ExchangeStateMachine<Waiter, UpstreamTask>) -> Action) -> Action {
        state.withLock { event(&$0) }
    }

    /// The loads waiting now, in the order they joined.
    var waiting: [Waiter] {
        machine { $0.waiting.map(\.waiter) }
    }
}

/// The exchanges running now, by `Exchange.ID`: where identical loads find one another.
///
/// Threading: every member from any thread; nothing is called back under its lock.
final class ExchangeTable: Sendable {
    private struct State {
        var running: [Exchange.ID: Exchange] = [:]
        var serial = 0
    }
    private let state = Locked(State())
    /// Background exchanges (stale-while-revalidate) still running.
    let background = DispatchGroup()

    /// How `enter` went.
    enum Entry {
        /// A new exchange, which the caller must run; `load` (if any) waits on it.
        case started(Exchange)
        /// `load` joined an identical exchange that runs.
        case joined(Exchange)
        /// A background exchange found an identical one running: nothing to do.
        case alreadyRunning
    }

    /// Makes `load` wait on an identical running exchange (when `collapses`, and neither the load
    /// nor its request forbids it: `Load.collapsible`, `CacheRequest.Mode.wantsAnAnswerSentAfterIt`),
    /// or starts a new one for `plan`. `load` nil starts a background exchange nobody waits for,
    /// unless one runs.
    func enter(_ plan: ExchangePlan, for request: CacheRequest, from settings: SessionSettings, load: Load?,
               collapses: Bool) -> Entry {
        let collapses = collapses && load?.collapsible != false && !request.mode.wantsAnAnswerSentAfterIt
        var joinedNumber: Int?
        let entry = state.withLock { state -> Entry in
            var serial = 0
            if !collapses {
                state.serial += 1
                serial = state.serial
            }
            let id = Exchange.id(for: plan, of: request, from: settings, serial: serial)
            if let existing = state.running[id] {
                guard let load else { return .alreadyRunning }
                if case .joined(let number) = existing.machine({ $0.join(Exchange.Waiter(load: load, collapsed: true)) }) {
                    joinedNumber = number
                    return .joined(existing)
                }
            }
            let exchange = Exchange(id: id, plan: plan, request: request, isBackground: load == nil)
            state.running[id] = exchange
            if let load, case .joined(let number) = exchange.machine({ $0.join(Exchange.Waiter(load: load, collapsed: false)) }) {
                joinedNumber = number
            }
            return .started(exchange)
        }
        switch entry {
        case .started(let exchange), .joined(let exchange):
            if case .started = entry, exchange.isBackground { background.enter() }
            if let load, let joinedNumber {
                load.handle.joined { [self] in leave(exchange, waiter: joinedNumber) }
            }
        case .alreadyRunning:
            break
        }
        return entry
    }

    /// How many loads wait on the exchanges running now (tests wait on it to know a load joined).
    var waitingLoadCount: Int {
        state.withLock { Array($0.running.values) }.reduce(0) { $0 + $1.waiting.count }
    }

    /// Hands back the loads that wait for `exchange`'s answer and retires it (identical loads
    /// start a new one from now on); nil when it had finished already.
    func close(_ exchange: Exchange) -> [Exchange.Waiter]? {
        retire(exchange)
        guard case .deliver(let waiters) = exchange.machine({ $0.upstreamFinished() }) else { return nil }
        if exchange.isBackground { background.leave() }
        return waiters
    }

    /// A waiting load was cancelled. When it was the last, the exchange is abandoned: it is
    /// retired and its upstream request is cancelled.
    private func leave(_ exchange: Exchange, waiter number: Int) {
        guard case .abandon(let task) = exchange.machine({ $0.leave(number) }) else { return }
        retire(exchange)
        task?.cancel()
    }

    /// How many loads wait on the running exchanges for `key` (for tests and diagnostics).
    func waitingLoads(forKey key: String) -> Int {
        state.withLock { state in state.running.filter { $0.key.key == key }.map(\.value) }
            .reduce(0) { $0 + $1.waiting.count }
    }

    private func retire(_ exchange: Exchange) {
        state.withLock { state in
            if state.running[exchange.id] === exchange { state.running[exchange.id] = nil }
        }
    }
}

/// The life of one exchange as a value, with no I/O and no locks: who waits, which upstream
/// request runs, and how it ends. Each event returns the action its caller must perform; the
/// caller performs it after releasing the lock the machine lives in (as async-http-client's
/// `RequestBag.StateMachine` does), so no callback ever runs under that lock.
///
/// `Waiter` is what a joining load leaves behind to be answered; `Task` is the running upstream
/// request. Both are generic so the machine can be tested without a network.
///
/// ```text
///            join / leave (others still wait) / upstreamStarted
///            ┌──────┐
///            ▼      │
///  ──────► running ─┴── upstreamFinished ──────────────────────────► finished
///            │                                                          ▲
///            └── leave (the last waiter) ──► abandoned ── upstreamFinished
/// ```
struct ExchangeStateMachine<Waiter, Task> {
    private enum State {
        /// Upstream work may run; `waiters` are answered when it finishes. `task` is the upstream
        /// request running now, if any.
        case running(waiters: [Int: Waiter], task: Task?)
        /// Every waiter left before the end: the upstream request was cancelled, nothing further
        /// is sent, and a load that comes later starts a new exchange.
        case abandoned
        /// The answer was handed out (or the exchange ended abandoned).
        case finished
    }

    private var state = State.running(waiters: [:], task: nil)
    /// The number the next waiter gets: numbers say in which order loads joined.
    private var nextNumber = 1
    /// Set when the exchange takes no more waiters while it runs (`closeToJoiners`).
    private var isClosedToJoiners = false

    /// What `join` asks of its caller.
    enum JoinAction {
        /// Joined as waiter `number`; `leave(number)` undoes it.
        case joined(number: Int)
        /// The exchange ended or was abandoned: start a new one.
        case refused
    }

    /// What `leave` asks of its caller.
    enum LeaveAction {
        /// Others still wait (or the exchange had ended): nothing to do.
        case none
        /// That was the last waiter: retire the exchange (so later loads start a new one) and
        /// cancel `task` when one is running.
        case abandon(cancelling: Task?)
    }

    /// What `prepareToSend` asks of its caller.
    enum SendAction {
        /// Send the upstream request, then report it with `upstreamStarted`.
        case send
        /// Nobody waits any more: send nothing and finish the exchange.
        case stop
    }

    /// What `upstreamStarted` asks of its caller.
    enum StartAction {
        case none
        /// Every waiter left while the request was being made: cancel it.
        case cancel(Task)
    }

    /// What `upstreamFinished` asks of its caller.
    enum FinishAction {
        /// Hand the answer to `waiters` (in the order they joined; none when abandoned) and retire
        /// the exchange.
        case deliver(to: [Waiter])
        /// The exchange had already finished: nothing to do.
        case none
    }

    /// A load asks to wait for this exchange's answer.
    mutating func join(_ waiter: Waiter) -> JoinAction {
        guard case .running(var waiters, let task) = state, !isClosedToJoiners else { return .refused }
        let number = nextNumber
        nextNumber += 1
        waiters[number] = waiter
        state = .running(waiters: waiters, task: task)
        return .joined(number: number)
    }

    /// Waiter `number` stops waiting (its load was cancelled). The last waiter leaving abandons
    /// the exchange, also a background exchange that a load had joined.
    mutating func leave(_ number: Int) -> LeaveAction {
        guard case .running(var waiters, let task) = state else { return .none }
        guard waiters.removeValue(forKey: number) != nil else { return .none }
        guard waiters.isEmpty else {
            state = .running(waiters: waiters, task: task)
            return .none
        }
        state = .abandoned
        return .abandon(cancelling: task)
    }

    /// Takes no more waiters from now on if every waiter now passes `test` (the body of the
    /// answer will not be kept, and a load joining later could not get it): whether it closed.
    /// An exchange nobody waits for any more is closed already.
    mutating func closeToJoiners(ifEvery test: (Waiter) -> Bool) -> Bool {
        guard case .running(let waiters, _) = state else { return true }
        guard waiters.values.allSatisfy(test) else { return false }
        isClosedToJoiners = true
        return true
    }

    /// The caller is about to send an upstream request (the first, or a follow-up GET).
    mutating func prepareToSend() -> SendAction {
        guard case .running = state else { return .stop }
        return .send
    }

    /// The upstream request `task` was created and runs.
    mutating func upstreamStarted(_ task: Task) -> StartAction {
        guard case .running(let waiters, _) = state else { return .cancel(task) }
        state = .running(waiters: waiters, task: task)
        return .none
    }

    /// The exchange's work is over: its answer is ready, or it ended without one.
    mutating func upstreamFinished() -> FinishAction {
        switch state {
        case .running(let waiters, _):
            state = .finished
            return .deliver(to: waiters.sorted { $0.key < $1.key }.map(\.value))
        case .abandoned:
            state = .finished
            return .deliver(to: [])
        case .finished:
            return .none
        }
    }

    /// The waiters now, in the order they joined (to hand them a body as it arrives).
    var waiting: [(number: Int, waiter: Waiter)] {
        guard case .running(let waiters, _) = state else { return [] }
        return waiters.sorted { $0.key < $1.key }.map { (number: $0.key, waiter: $0.value) }
    }

    /// Whether the exchange still runs: someone waits for it (or it runs in the background).
    var isRunning: Bool {
        if case .running = state { return true }
        return false
    }
}
