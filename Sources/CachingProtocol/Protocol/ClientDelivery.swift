import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a `CachingURLProtocol` talks to its `URLProtocolClient`: on which thread, in what
/// pieces, and never after `stopLoading`. Every platform difference of delivery is in `Rules`.
///
/// Threading: `deliver…` and `forward` may be called from any thread (the engine's queues, the
/// upstream session's); the executor moves each delivery to where the client may be called.
final class ClientDelivery: Sendable {
    /// What the platform's URL loading system expects from a protocol: the one place where
    /// Linux and Apple platforms differ.
    struct Rules: Sendable {
        /// Whether a body fetched from the origin goes to the client as it arrives. Apple's
        /// client accumulates `didLoad` chunks for completion handlers (Docs/foundation-facts.md, A7);
        /// on Linux completion handlers and `async` callers see only the last chunk
        /// (Docs/foundation-facts.md, L10), so the whole body goes in one `didLoad`.
        var streamsBodies: Bool
        /// Whether client calls are made while holding the delivery lock. On Linux deliveries
        /// come from the engine's queues while `stopLoading` runs on the session's queue: the
        /// lock orders them, so nothing reaches the client after `stopLoading` (which would
        /// crash, Docs/foundation-facts.md, L11); corelibs' client calls never call back into the
        /// protocol. On Apple every client call and `stopLoading` run on the client thread,
        /// which orders them, and no lock is held across a client call (`os_unfair_lock` traps
        /// when the client re-enters, Docs/foundation-facts.md, A11).
        var holdsLockAcrossClientCalls: Bool
        /// Whether challenges raised on the way go to the client with a sender that relays the
        /// app's answer (Docs/foundation-facts.md, A5). corelibs raises none before a response (its
        /// 401 reaches the app's session as a response, and the session raises the challenge).
        var forwardsChallenges: Bool
        /// Whether redirects are reported to the client (`wasRedirectedTo`) rather than followed
        /// inside; on Linux that client call is a `fatalError` (Docs/foundation-facts.md, L15).
        var reportsRedirects: Bool
        /// Whether the protocol itself hands the body to the delegate of an `async` call
        /// (`data(for:delegate:)`): corelibs' client gives a custom protocol's body only to a
        /// session delegate, its own HTTP protocol to that task delegate too (`AsyncTaskDelegate`).
        var relaysBodiesToAsyncTaskDelegates = false
        /// Whether a load whose task the app is cancelling is left to end by the cancellation:
        /// the answer's end is not delivered once the task's `state` is `.canceling`. corelibs'
        /// `cancel()` marks the task on its work queue and calls `stopLoading` and the client's
        /// `didFailWithError` in a second turn of that queue; a load that ends in between
        /// completes the task, the session drops it from its registry, and that report traps
        /// (Docs/foundation-facts.md, L30). The check and every delivery run on corelibs' one
        /// serial queue (`TaskQueueExecutor`), so the mark cannot come between them.
        var endsGiveWayToCancellation = false

        /// swift-corelibs-foundation's client.
        static let corelibs = Rules(streamsBodies: false, holdsLockAcrossClientCalls: true,
                                    forwardsChallenges: false, reportsRedirects: false,
                                    relaysBodiesToAsyncTaskDelegates: true, endsGiveWayToCancellation: true)
        /// Apple's client (tests run it on Linux through `CachingURLProtocol.deliveryRules`).
        static let apple = Rules(streamsBodies: true, holdsLockAcrossClientCalls: false,
                                 forwardsChallenges: true, reportsRedirects: true)

        /// The client of the platform the package was built for. Not one of `LoaderRules`: the
        /// client is the platform's own code, which a test process cannot switch.
        #if canImport(FoundationNetworking)
        static let platform = corelibs
        #else
        static let platform = apple
        #endif
    }

    /// How the app takes a body fetched from the origin.
    enum BodyDelivery: Sendable, Equatable {
        /// In one `didLoad` at its end: what completion handlers and `async` callers need on Linux
        /// (Docs/foundation-facts.md, L10), and what a task nobody watches gets.
        case whole
        /// Each piece as it arrives (`didLoad` per piece): Apple's client for every task, and on
        /// Linux a task with a delegate, which corelibs hands every `didLoad`.
        case streamed
        /// Whole to the client at its end, and each piece as it arrives to the delegate of the
        /// `async` call behind the load (`data(for:delegate:)`, Linux): corelibs' own protocol
        /// feeds that delegate as the body arrives and the call's result at the end.
        case wholeAndRelayedAsItArrives
    }

    private struct State {
        /// Set by `stop` and by the end of the answer: nothing reaches the client afterwards.
        var isStopped = false
        /// The response that went to the client already, as it arrived: the answer only ends it.
        var streamed: StreamedResponse?
        var bodyDelivery: BodyDelivery
        /// Someone in the app may refuse a reported redirect (`redirectsMayBeRefused`).
        var redirectsMayBeRefused = false
        /// The senders of the challenges forwarded to the client: `stop` cancels those the app has
        /// not answered, so the upstream request waiting on one (and every load joined to it)
        /// goes on.
        var forwardedChallenges: [ChallengeRelay] = []
        /// The protocol instance, for the client calls (weak: the protocol holds this object).
        weak var owner: URLProtocol?
    }

    let rules: Rules
    private let executor: ClientExecutor
    private let state: Locked<State>
    #if canImport(FoundationNetworking)
    /// The delegate of the `async` call behind the load, given the body too
    /// (`rules.relaysBodiesToAsyncTaskDelegates`).
    private let asyncTaskDelegate: AsyncTaskDelegate?
    #endif

    /// Call it from `startLoading`: on Linux it looks at the owner's task, which corelibs allows
    /// only there (see `AsyncTaskDelegate.find(for:)`).
    init(owner: URLProtocol, executor: ClientExecutor, rules: Rules = .platform) {
        self.rules = rules
        self.executor = executor
        state = Locked(State(bodyDelivery: rules.streamsBodies ? .streamed : .whole, owner: owner))
        #if canImport(FoundationNetworking)
        asyncTaskDelegate = rules.relaysBodiesToAsyncTaskDelegates ? AsyncTaskDelegate.find(for: owner.task) : nil
        #endif
    }

    /// How a fetched body reaches the app, `.streamed` where the platform streams every body.
    var bodyDelivery: BodyDelivery {
        get { state.withLock { $0.bodyDelivery } }
        set { state.withLock { $0.bodyDelivery = newValue } }
    }

    /// Whether the app's session may refuse a redirect this load reports (`rules.reportsRedirects`):
    /// its delegate, or the task's own, implements the redirect method. Then the report is
    /// followed by the 3xx's response, its body and the end, which the session delivers as the
    /// task's answer when its delegate refuses and drops when it follows; otherwise by the
    /// cancellation of Apple's CustomHTTPProtocol sample. Set it before the answer comes.
    var redirectsMayBeRefused: Bool {
        get { state.withLock { $0.redirectsMayBeRefused } }
        set { state.withLock { $0.redirectsMayBeRefused = newValue } }
    }

    #if canImport(FoundationNetworking)
    /// Learns how the app's task takes bodies (Linux): a task with a delegate streams, the
    /// delegate of an `async` call gets the pieces besides the whole result, everything else
    /// takes it whole — also when the kind cannot be told (`AppTaskBehaviour`). Call it from
    /// `startLoading`, where corelibs lets the task's registry entry be read; only loads that go
    /// past the lookup need it (a hit is one piece).
    func learnBodyDelivery(from task: URLSessionTask?) {
        guard !rules.streamsBodies else { return }
        if asyncTaskDelegate != nil {
            bodyDelivery = .wholeAndRelayedAsItArrives
        } else if AppTaskBehaviour.hasDelegateOfItsOwn(task) {
            bodyDelivery = .streamed
        }
    }
    #endif

    // MARK: Deliveries

    /// The error a load that took a response as it arrived ends with when what would end it is
    /// not the rest of that response (another response, another body, a redirect): its app has
    /// seen part of a response and can only be told it did not get the rest. The error the
    /// platform's loader gives for a connection lost mid-body: corelibs for a reset one
    /// (Docs/foundation-facts.md, L28); Apple's documentation of `NSURLErrorNetworkConnectionLost`
    /// ("a client or server connection was severed in the middle of an in-progress load").
    static let interruptedResponseError = URLError(.networkConnectionLost)

    /// Hands the answer to the client and ends the load: the response (unless streamed
    /// already), the body (in one `didLoad`), the end; or a redirect report (with the 3xx, its body
    /// and the end when it may be refused, `redirectsMayBeRefused`); or the error. After a
    /// streamed head only the end of that response ends the load without an error
    /// (`interruptedResponseError`). `onCallingThread`: the caller is `startLoading` itself, where
    /// the client may be called at once (a fresh hit takes no hop).
    func deliver(_ answer: Answer, onCallingThread: Bool = false) {
        perform(ending: true, onCallingThread: onCallingThread) { to in
            if let streamed = to.streamed {
                guard case .response(let response, let body) = answer,
                      streamed.isEnded(by: response, body: body, relayedWhole: to.bodyDelivery == .wholeAndRelayedAsItArrives) else {
                    let error: Error
                    if case .failure(let failure) = answer { error = failure } else { error = Self.interruptedResponseError }
                    return to.client.urlProtocol(to.owner, didFailWithError: error)
                }
                if to.bodyDelivery == .wholeAndRelayedAsItArrives, !body.isEmpty {
                    // The call's delegate had the pieces; the call gets the whole body.
                    to.client.urlProtocol(to.owner, didLoad: body)
                }
                return to.client.urlProtocolDidFinishLoading(to.owner)
            }
            switch answer {
            case .response(let response, let body):
                to.client.urlProtocol(to.owner, didReceive: response, cacheStoragePolicy: .notAllowed)
                to.load(body)
                to.client.urlProtocolDidFinishLoading(to.owner)
            case .redirect(let response, let body, let request):
                to.client.urlProtocol(to.owner, wasRedirectedTo: request, redirectResponse: response)
                if to.redirectsMayBeRefused {
                    // The session asks its delegate on its delegate queue meanwhile. Refusing, it
                    // goes on with this load and delivers the 3xx and its body (Apple's documentation
                    // of `willPerformHTTPRedirection`); following, it stops this load and starts the
                    // next. Nothing tells a protocol of a refusal, so the 3xx cannot wait for one: it
                    // follows the report in the same client-thread turn (as OHHTTPStubs does).
                    to.client.urlProtocol(to.owner, didReceive: response, cacheStoragePolicy: .notAllowed)
                    if !body.isEmpty { to.client.urlProtocol(to.owner, didLoad: body) }
                    to.client.urlProtocolDidFinishLoading(to.owner)
                } else {
                    // Nobody can refuse: as Apple's CustomHTTPProtocol sample does, report, then
                    // end this load as cancelled; the session starts the next load.
                    to.client.urlProtocol(to.owner, didFailWithError: NSError(domain: NSCocoaErrorDomain,
                                                                              code: CocoaError.userCancelled.rawValue))
                }
            case .failure(let error):
                to.client.urlProtocol(to.owner, didFailWithError: error)
            }
        }
    }

    /// The response of a body that follows in pieces (`bodyDelivery` other than `.whole`). A
    /// load takes one: the head of another response is not delivered, and the load ends with
    /// `interruptedResponseError`.
    func deliverHead(_ response: HTTPURLResponse) {
        perform(ending: false, sendsHead: response) { to in
            guard to.streamed == nil else { return }
            to.client.urlProtocol(to.owner, didReceive: response, cacheStoragePolicy: .notAllowed)
        }
    }

    /// A piece of the body after `deliverHead`: to the client (`.streamed`), or to the `async`
    /// call's delegate only (`.wholeAndRelayedAsItArrives`, the client gets the whole at the end).
    func deliverChunk(_ data: Data) {
        perform(ending: false, sendsBody: data.count) { to in
            guard to.streamed?.isInterrupted == false else { return }
            switch to.bodyDelivery {
            case .streamed: to.load(data)
            case .wholeAndRelayedAsItArrives: to.relay(data)
            case .whole: break
            }
        }
    }

    /// Forwards a challenge raised on the way to the client, with a sender that relays the
    /// app's answer to `reply` (`rules.forwardsChallenges`); otherwise default handling.
    func forward(_ challenge: URLAuthenticationChallenge,
                 reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard rules.forwardsChallenges else { return reply(.performDefaultHandling, nil) }
        let relay = ChallengeRelay(reply)
        let relayed = HandedChallenge(URLAuthenticationChallenge(authenticationChallenge: challenge, sender: relay))
        let tracked = state.withLock { state -> Bool in
            guard !state.isStopped else { return false }
            state.forwardedChallenges.append(relay)
            return true
        }
        guard tracked, perform(ending: false, { to in to.client.urlProtocol(to.owner, didReceive: relayed.challenge) }) else {
            return relay.cancelUnanswered()
        }
    }

    /// A challenge made here and handed to the client thread.
    private struct HandedChallenge: @unchecked Sendable {
        // @unchecked: immutable once made. Xcode 16+ SDKs and corelibs declare it Sendable, the
        // iOS 16.4 SDK does not: a plain capture fails there, `nonisolated(unsafe)` warns elsewhere.
        let challenge: URLAuthenticationChallenge

        init(_ challenge: URLAuthenticationChallenge) {
            self.challenge = challenge
        }
    }

    /// `stopLoading`: from now on nothing reaches the client, and a challenge forwarded to it that
    /// the app has not answered is cancelled — the system may never pass it on once the load is
    /// stopped, and the upstream request (with every load joined to it) would wait for it.
    func stop() {
        let unanswered = state.withLock { state -> [ChallengeRelay] in
            state.isStopped = true
            defer { state.forwardedChallenges = [] }
            return state.forwardedChallenges
        }
        for relay in unanswered { relay.cancelUnanswered() }
    }

    /// Whether the load was stopped or answered.
    var isStopped: Bool {
        state.withLock { $0.isStopped }
    }

    // MARK: The one path to the client

    /// The response a load took as it arrived (`deliverHead`), and what followed it.
    private struct StreamedResponse {
        let head: HTTPURLResponse
        /// The body bytes handed on after it.
        var bodyBytes = 0
        /// The head of another response came after it: the load can only fail.
        var isInterrupted = false

        /// Whether `response`, with `body`, is the end of this response: the same status and
        /// header fields (but `Cache-Status`, which the layer writes as it learns more) and, when
        /// the whole body is handed over at the end (`relayedWhole`), the bytes relayed before.
        func isEnded(by response: HTTPURLResponse, body: Data, relayedWhole: Bool) -> Bool {
            guard !isInterrupted, response.statusCode == head.statusCode, !relayedWhole || body.count == bodyBytes else {
                return false
            }
            return response === head || Self.fields(of: response) == Self.fields(of: head)
        }

        private static func fields(of response: HTTPURLResponse) -> [String: String] {
            var fields: [String: String] = [:]
            for case let (name as String, value) in response.allHeaderFields where !name.isEqualIgnoringASCIICase("Cache-Status") {
                fields[name.lowercased()] = "\(value)"
            }
            return fields
        }
    }

    /// Who a delivery calls, claimed under the delivery lock.
    private struct Recipient {
        let client: URLProtocolClient
        let owner: URLProtocol
        /// The response that went to the client before this delivery, as it arrived.
        let streamed: StreamedResponse?
        let bodyDelivery: BodyDelivery
        let redirectsMayBeRefused: Bool
        #if canImport(FoundationNetworking)
        let asyncTaskDelegate: AsyncTaskDelegate?
        #endif

        /// Hands a piece of the body to the client (and to the delegate of an `async` call).
        func load(_ data: Data) {
            guard !data.isEmpty else { return }
            client.urlProtocol(owner, didLoad: data)
            relay(data)
        }

        /// Hands a piece of the body to the delegate of the `async` call behind the load, if any.
        func relay(_ data: Data) {
            #if canImport(FoundationNetworking)
            guard !data.isEmpty else { return }
            asyncTaskDelegate?.relay(data)
            #endif
        }
    }

    /// Runs `calls` where the client may be called, unless the load stopped; `ending` marks it
    /// stopped afterwards, `sendsHead` marks that response streamed (or, after another, the
    /// load interrupted), `sendsBody` counts the bytes that follow it. Returns false when it
    /// already knows nothing will be delivered.
    @discardableResult
    private func perform(ending: Bool, sendsHead head: HTTPURLResponse? = nil, sendsBody bytes: Int = 0, onCallingThread: Bool = false,
                         _ calls: @escaping @Sendable (Recipient) -> Void) -> Bool {
        if state.withLock({ $0.isStopped }) { return false }
        #if canImport(FoundationNetworking)
        let asyncTaskDelegate = self.asyncTaskDelegate
        #endif
        let work: @Sendable () -> Void = { [state, rules] in
            func claim(_ state: inout State) -> Recipient? {
                guard !state.isStopped, let owner = state.owner, let client = owner.client else { return nil }
                if ending, rules.endsGiveWayToCancellation, owner.task?.state == .canceling {
                    state.isStopped = true
                    return nil
                }
                state.streamed?.bodyBytes += bytes
                #if canImport(FoundationNetworking)
                let recipient = Recipient(client: client, owner: owner, streamed: state.streamed, bodyDelivery: state.bodyDelivery,
                                          redirectsMayBeRefused: state.redirectsMayBeRefused, asyncTaskDelegate: asyncTaskDelegate)
                #else
                let recipient = Recipient(client: client, owner: owner, streamed: state.streamed, bodyDelivery: state.bodyDelivery,
                                          redirectsMayBeRefused: state.redirectsMayBeRefused)
                #endif
                if ending { state.isStopped = true }
                if let head {
                    if state.streamed == nil { state.streamed = StreamedResponse(head: head) } else { state.streamed?.isInterrupted = true }
                }
                return recipient
            }
            if rules.holdsLockAcrossClientCalls {
                state.withLock { state in
                    if let recipient = claim(&state) { calls(recipient) }
                }
            } else if let recipient = state.withLock({ claim(&$0) }) {
                calls(recipient)
            }
        }
        if onCallingThread { work() } else { executor.run(work) }
        return true
    }
}

/// Runs client deliveries where the client may be called.
protocol ClientExecutor: Sendable {
    func run(_ work: @escaping @Sendable () -> Void)
}

/// Runs a delivery at once, on the thread that asks.
struct CallingThreadExecutor: ClientExecutor {
    func run(_ work: @escaping @Sendable () -> Void) {
        work()
    }
}

#if canImport(FoundationNetworking)
/// Runs deliveries on the work queue of the app's task (Linux). corelibs' client reads the
/// session's task registry on every call (`URLSession.behaviour(for:)`), a dictionary the
/// session changes on that queue whenever a task is added or removed; a call from another thread
/// races with those changes and can crash the app (seen under 8 concurrent misses). corelibs'
/// own HTTP protocol calls its client only from that queue, so this does the same; the delivery
/// lock still orders the calls against `stopLoading`. Without the queue (a corelibs release
/// that renamed it, see `TaskWorkQueue`) deliveries run on the thread that asks, as before.
///
/// A delivery asked for off that queue waits for it through the load's lane (`CorelibsCallLane`):
/// on the asking thread, without a thread hand-off, while few threads wait for corelibs' one
/// serial queue (which a running transfer keeps busy), else on a serial queue of the layer's own,
/// so that the engine's threads, the global pool's, are not all held from the app's delegate
/// queues and completion handlers meanwhile; in the order asked, either way. Never asked for on
/// that queue itself, where the wait would deadlock: a delivery from inside `startLoading` runs
/// at once (`onCallingThread`), `stopLoading` and `canInit` deliver nothing, a fetched head, the
/// pieces of its body and an end the listener takes in place (`TransferRouter.end`) are
/// delivered inside the upstream session's callbacks, which run on corelibs' one serial queue
/// already (`UpstreamCallback`), and every other delivery comes from the engine's threads.
struct TaskQueueExecutor: ClientExecutor {
    let queue: DispatchQueue?
    private let lane = CorelibsCallLane()

    init(queue: DispatchQueue?) {
        self.queue = queue
    }

    func run(_ work: @escaping @Sendable () -> Void) {
        // Inside an upstream session's callback (a fetched head, a piece of body, an end taken
        // in place) the delivery is already on corelibs' one serial queue: it runs there, in
        // order with the transfer's reads, and waiting for the app task's queue would deadlock
        // (`UpstreamCallback`; Docs/foundation-facts.md, L25).
        guard let queue, !UpstreamCallback.isRunning else { return work() }
        lane.run { queue.sync(execute: work) }
    }
}
#endif

#if !canImport(FoundationNetworking)
/// Runs deliveries on the thread that called `startLoading`, through its run loop, in the mode
/// that thread was running in (and the common modes): Apple's contract for `URLProtocolClient`
/// calls (Docs/foundation-facts.md, A2). A delivery asked for on that thread runs at once.
final class ClientThreadExecutor: ClientExecutor, @unchecked Sendable {
    // @unchecked: CFRunLoopPerformBlock and CFRunLoopWakeUp may be called from any thread.
    private let runLoop: CFRunLoop
    private let modes: CFArray

    /// Captures the calling thread's run loop; call it in `startLoading`.
    init() {
        runLoop = CFRunLoopGetCurrent()
        let current = CFRunLoopCopyCurrentMode(runLoop) ?? CFRunLoopMode.defaultMode
        let common = CFRunLoopMode.commonModes
        modes = (current == common ? [common] : [current, common]) as CFArray
    }

    func run(_ work: @escaping @Sendable () -> Void) {
        if CFRunLoopGetCurrent() === runLoop {
            work()
            return
        }
        CFRunLoopPerformBlock(runLoop, modes, work)
        CFRunLoopWakeUp(runLoop)
    }
}
#endif

/// The sender of a challenge forwarded to the client: relays the app's answer to the upstream
/// request that raised it, once (`cancelUnanswered` when the load stopped first).
private final class ChallengeRelay: NSObject, URLAuthenticationChallengeSender, Sendable {
    private let reply: Locked<(@Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)?>

    init(_ reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        self.reply = Locked(reply)
    }

    private func answer(_ disposition: URLSession.AuthChallengeDisposition, _ credential: URLCredential?) {
        reply.withLock { reply -> (@Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)? in
            defer { reply = nil }
            return reply
        }?(disposition, credential)
    }

    /// Cancels the challenge unless the app answered it already.
    func cancelUnanswered() {
        answer(.cancelAuthenticationChallenge, nil)
    }

    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {
        answer(.useCredential, credential)
    }

    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {
        answer(.useCredential, nil)
    }

    func cancel(_ challenge: URLAuthenticationChallenge) {
        answer(.cancelAuthenticationChallenge, nil)
    }

    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {
        answer(.performDefaultHandling, nil)
    }

    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {
        answer(.rejectProtectionSpace, nil)
    }
}
