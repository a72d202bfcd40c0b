import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the app behind a transfer says while it runs. The engine implements it for each
/// exchange (`ExchangeListener`); a transfer without one follows redirects, gives challenges
/// default handling and keeps the body whole. A transfer with one stops at every redirect: the
/// 3xx and its body are the response, and the engine follows it, through the cache
/// (`CacheEngine+Redirects`).
///
/// Threading: called on the upstream session's delegate queue; the `decide`/`answer` closures
/// may be called from any thread, once.
protocol UpstreamListener: Sendable {
    /// A challenge raised before any response arrived (server trust, client certificate, or HTTP
    /// authentication where the platform asks before delivering the 401). `answer` it.
    func upstreamDidReceiveChallenge(_ challenge: URLAuthenticationChallenge,
                            answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
    /// The response head arrived: what to do with its body as it arrives.
    func upstreamDidReceiveHead(_ head: ReceivedHead) -> BodyHandling
    /// A piece of the body of a response whose `BodyHandling` relays it.
    func upstreamDidReceiveBody(_ data: Data)
    /// The kept body is about to pass `BodyHandling.keepsUpTo`: true to stop keeping it (what was
    /// kept is dropped, and the rest is only relayed), false to keep all of it after all.
    func upstreamBodyPassesLimit() -> Bool
    /// Whether the transfer is still wanted, asked just before it starts: false when every load
    /// that waited for it left meanwhile.
    var isWanted: Bool { get }
    /// Whether the completion may take `response` where the transfer ends — on Linux, in the
    /// upstream session's callback on corelibs' queue, where nothing may wait for a corelibs queue
    /// or make a task (`TransferRouter.end`) — rather than on a global queue. Asked once, with
    /// the whole response.
    func upstreamMayEndInPlace(_ response: ReceivedResponse) -> Bool
}

/// What an upstream transfer does with a response's body as it arrives (the answer to
/// `UpstreamListener.upstreamDidReceiveHead`).
struct BodyHandling: Sendable, Equatable {
    /// Hand each piece to the listener as it arrives (`upstreamDidReceiveBody`).
    var relays: Bool
    /// Keep the body (for the answer and the store) only while it is at most this many bytes;
    /// nil: keep all of it; 0: keep none of it. Past the limit the listener is asked
    /// (`upstreamBodyPassesLimit`). A body not kept whole reaches the engine with
    /// `ReceivedResponse.isBodyKept` false.
    var keepsUpTo: Int?

    /// Keep the whole body, relay nothing: the answer is the whole response.
    static let keepWhole = BodyHandling(relays: false, keepsUpTo: nil)
}

/// Where the engine sends what it asks the origin: `URLSessionUpstream` in an app, a fake in the
/// engine's unit tests.
///
/// Threading: `send` may be called from any thread except inside a `URLProtocol` callback on
/// Linux (the engine always hops to its own queue first); `completion` is called once, on any
/// thread.
protocol Upstream: Sendable {
    /// Starts `request` for a load from an app session with `settings` and calls `completion`
    /// once with the whole response or the error; `listener` hears about redirects, challenges,
    /// the response head and (when the head asked for it) the body's pieces. `appSession`: the
    /// app's session whose connections the request uses, when it is known (see
    /// `URLSessionUpstream`). `wholeBody`: nobody needs the answer before it is complete (see
    /// `UpstreamClient.send`).
    func send(_ request: URLRequest, from settings: SessionSettings, appSession: AppSession?, wholeBody: Bool,
              listener: UpstreamListener?,
              completion: @escaping @Sendable (Result<ReceivedResponse, Error>) -> Void) -> UpstreamTask
    /// Lets running transfers finish, then releases what `send` made; later sends make it again.
    func shutdown()
}

/// Sends the cache's own requests to origins through a private `URLSession` made from the app
/// session's settings (`SessionSettings.upstreamConfiguration`), whose protocol classes leave the
/// caching protocol out, so the cache never intercepts its own traffic and never needs a marker
/// header (which would reach servers) or a request property (which does not survive on Linux).
///
/// Challenges never hang a transfer: one raised after the response head arrived (corelibs raises
/// a 401's challenge only then) ends the transfer with that response, which the protocol hands to
/// the app's session, and the app's session raises its own challenge to the app's delegate
/// (Docs/foundation-facts.md, L14). One raised before goes to the listener.
///
/// Threading: `send` may be called from any thread but, on Linux, corelibs' queue. On Linux the
/// task is made and resumed through a lane (`CorelibsCallLane`): on the caller's thread while
/// few callers wait for corelibs' queue, else on a serial queue of the layer's own, so that the
/// global pool's threads are not all held waiting; elsewhere on the caller's thread. Completions
/// run on Linux in the upstream callback on corelibs' queue when the listener says the response
/// may be taken there (`UpstreamListener.upstreamMayEndInPlace`), else on a global queue
/// (`TransferRouter.offWorkQueue`); on the session's delegate queue elsewhere; and on a global
/// queue for a transfer that was not started (cancelled first, or sent after `shutdown`).
final class UpstreamClient: Sendable {
    private let session: URLSession
    private let router: TransferRouter
    private let lifecycle = Locked(ClientLifecycle())
    #if canImport(FoundationNetworking)
    /// The session asks a protocol class of the app's before Foundation's own (a stub, a
    /// logger: `SessionSettings.upstreamConfiguration`), which may answer or relay its requests.
    private let consultsAppProtocols: Bool
    #endif

    /// A client whose session is made from `configuration`.
    init(configuration: URLSessionConfiguration) {
        router = TransferRouter()
        #if canImport(FoundationNetworking)
        consultsAppProtocols = SessionSettings.firstFoundationProtocolIndex(in: configuration.protocolClasses ?? []) != 0
        // The delegate callbacks run where corelibs makes them, on the session's work queue (one
        // serial queue for every session): a response's head and each piece of its body reach the
        // app's client in order with the reads, as they reach a task's own delegate without the
        // layer, at the pace the reads go. Handed to a delegate queue, they would wait there: the
        // app's client may be called only on corelibs' queue, which a fast transfer keeps busy
        // to its end, so every piece read meanwhile would be held in memory
        // (Docs/foundation-facts.md, L25). The router's work there is short; challenges, and a
        // transfer's end unless its listener takes it in place, go on on another queue
        // (`TransferRouter.end`, `TransferRouter.offWorkQueue`).
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: CallbacksInPlace())
        #else
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: nil)
        #endif
    }

    /// Starts `request` and calls `completion` once with the whole response or the error.
    /// `clock` stamps the request and response dates (RFC 9111 `request_time`/`response_time`).
    ///
    /// `wholeBody`: a safe request (GET, HEAD) whose answer nobody needs before it is complete.
    /// On Linux, when the session consults a protocol class of the app's first, the task is then
    /// made with a completion handler: the cache gets from that class what a completion handler
    /// gets without the layer — of a body it hands on in pieces, only the last
    /// (Docs/foundation-facts.md, L10). Redirects still reach the session's delegate, which stops
    /// them (corelibs asks `URLSessionTask.delegate`, which falls back to it). A challenge (a 401,
    /// raised once its body is in) cannot be answered there without hanging the task
    /// (Docs/foundation-facts.md, L14), so the request is sent again as a delegate task, which
    /// ends with the 401 for the app's session to challenge. Every other task has only the
    /// session delegate, whose callbacks run in place (`CallbacksInPlace`): each piece of a body
    /// reaches the listener as it is read (a body the store keeps goes to its file as it
    /// arrives), with no thread hand-off. Elsewhere the flag changes nothing.
    func send(
        _ request: URLRequest,
        wholeBody: Bool = false,
        clock: @escaping @Sendable () -> Date,
        listener: UpstreamListener?,
        completion: @escaping @Sendable (Result<ReceivedResponse, Error>) -> Void
    ) -> UpstreamTask {
        start(request, wholeBody: wholeBody, clock: clock, listener: listener, completion: completion, as: UpstreamTask())
    }

    /// `send`, with the handle the caller cancels through: a retried request's task joins it.
    /// On Linux the task is made and resumed through a lane (`CorelibsCallLane`), on the caller's
    /// thread only while few callers wait for corelibs' queue; elsewhere at once.
    private func start(
        _ request: URLRequest,
        wholeBody: Bool,
        clock: @escaping @Sendable () -> Date,
        listener: UpstreamListener?,
        completion: @escaping @Sendable (Result<ReceivedResponse, Error>) -> Void,
        as handle: UpstreamTask
    ) -> UpstreamTask {
        let transfer = Transfer(requestDate: clock(), clock: clock, listener: listener, completion: completion)
        #if canImport(FoundationNetworking)
        let lane = CorelibsCallLane()
        lane.run { [self] in begin(request, transfer, wholeBody: wholeBody, cancelling: { lane.runLater($0) }, as: handle) }
        #else
        begin(request, transfer, wholeBody: wholeBody, cancelling: { DispatchQueue.global(qos: .utility).async(execute: $0) }, as: handle)
        #endif
        return handle
    }

    /// Makes and resumes the task of `transfer`, unless nobody wants it any more or the client
    /// was shut down (then `transfer` ends with `URLError.cancelled`, and the origin never sees
    /// it); a cancel through `handle` runs through `cancelling`, never on the caller's thread.
    private func begin(_ request: URLRequest, _ transfer: Transfer, wholeBody: Bool,
                       cancelling: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void, as handle: UpstreamTask) {
        // Making the task waits for corelibs' shared queue, which is busy when many loads start
        // and stop at once: one that nobody waits for any more is not made, or not started once
        // made, so the origin never sees it (the caller's cancel reaches a task only after it
        // started).
        let wanted = !handle.isCancelled && transfer.listener?.isWanted != false
        guard wanted, lifecycle.withLock({ $0.beginsMaking() }) else {
            return DispatchQueue.global().async { transfer.completion(.failure(URLError(.cancelled))) }
        }
        var transfer = transfer
        let task: URLSessionDataTask
        #if canImport(FoundationNetworking)
        if wholeBody, consultsAppProtocols {
            let (clock, listener, completion) = (transfer.clock, transfer.listener, transfer.completion)
            transfer.retryAsDelegateTask = { [self] in
                // Not when the caller cancelled meanwhile: then the cancellation is the answer.
                guard !handle.isCancelled else { return completion(.failure(URLError(.cancelled))) }
                _ = start(request, wholeBody: false, clock: clock, listener: listener, completion: completion, as: handle)
            }
            let identifier = Locked<Int?>(nil)
            task = session.dataTask(with: request) { [router] data, response, error in
                guard let id = identifier.withLock({ $0 }) else { return }
                router.complete(id, body: data, response: response, error: error)
            }
            identifier.withLock { $0 = task.taskIdentifier }
        } else {
            task = session.dataTask(with: request)
        }
        #else
        task = session.dataTask(with: request)
        #endif
        router.register(task, transfer: transfer)
        handle.adopt { [router, task] in router.cancel(task, through: cancelling) }
        if transfer.listener?.isWanted == false { task.cancel() } else { task.resume() }
        if lifecycle.withLock({ $0.endsMaking() }) { session.finishTasksAndInvalidate() }
    }

    /// Lets running transfers finish, then releases the session; a send after it ends with
    /// `URLError.cancelled`. A task being made meanwhile is made first.
    func shutdown() {
        if lifecycle.withLock({ $0.shutsDown() }) { session.finishTasksAndInvalidate() }
    }
}

/// Whether an `UpstreamClient`'s session takes new tasks: corelibs traps when a task is made on
/// a session invalidated meanwhile, so the session is invalidated only once no task is being made.
private struct ClientLifecycle {
    private var isShutDown = false
    private var making = 0
    private var invalidates = false

    /// Whether a task may be made now (not after `shutsDown`); `endsMaking` follows each true.
    mutating func beginsMaking() -> Bool {
        guard !isShutDown else { return false }
        making += 1
        return true
    }

    /// A task was made: whether the session is to be invalidated now (it was shut down meanwhile).
    mutating func endsMaking() -> Bool {
        making -= 1
        return isShutDown && making == 0 && takesInvalidation()
    }

    /// Shut down: whether the session is to be invalidated now (no task is being made).
    mutating func shutsDown() -> Bool {
        isShutDown = true
        return making == 0 && takesInvalidation()
    }

    private mutating func takesInvalidation() -> Bool {
        defer { invalidates = true }
        return !invalidates
    }
}

/// A running upstream request; cancelling it ends its transfer with `URLError.cancelled`. A
/// class, so that a request sent again (`UpstreamClient.send(_:wholeBody:…)`) is cancelled
/// through the same handle.
final class UpstreamTask: Sendable {
    private struct State {
        var cancelTransfer: (@Sendable () -> Void)?
        var isCancelled = false
    }
    private let state = Locked(State())

    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// Makes `cancelTransfer` what a cancel runs (at once when the handle was cancelled already).
    func adopt(cancelTransfer: @escaping @Sendable () -> Void) {
        let cancelledAlready = state.withLock { state -> Bool in
            state.cancelTransfer = cancelTransfer
            return state.isCancelled
        }
        if cancelledAlready { cancelTransfer() }
    }

    func cancel() {
        state.withLock { state -> (@Sendable () -> Void)? in
            state.isCancelled = true
            return state.cancelTransfer
        }?()
    }
}

#if canImport(FoundationNetworking)
/// A delegate queue that runs each callback at once, on the thread that hands it over: corelibs'
/// work queue (see `UpstreamClient.init`), and says so while it runs (`UpstreamCallback`).
private final class CallbacksInPlace: OperationQueue, @unchecked Sendable {
    // @unchecked: it keeps no state of its own; OperationQueue is declared @unchecked Sendable.
    override func addOperation(_ block: @Sendable @escaping () -> Void) {
        UpstreamCallback.run(block)
    }
}

/// Whether the current thread runs a callback of one of the cache's upstream sessions, which on
/// Linux runs on corelibs' work queue (`UpstreamClient.init`). Work there may call a client of
/// corelibs' directly (every session's queue targets that one serial queue, so it is serialised
/// with each session's task registry), and must not wait for another corelibs queue, which
/// would deadlock (`TaskQueueExecutor`).
enum UpstreamCallback {
    static var isRunning: Bool {
        pthread_getspecific(key) != nil
    }

    /// Runs `body`, saying so to `isRunning` on this thread meanwhile.
    static func run(_ body: () -> Void) {
        let outer = pthread_getspecific(key)
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
        defer { pthread_setspecific(key, outer) }
        body()
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
#endif

/// The state of one upstream transfer while it runs.
private struct Transfer {
    let requestDate: Date
    let clock: @Sendable () -> Date
    let listener: UpstreamListener?
    let completion: @Sendable (Result<ReceivedResponse, Error>) -> Void
    let startedAt = DispatchTime.now()
    var response: HTTPURLResponse?
    var body = Data()
    /// Body bytes received, kept or not.
    var bodyLength = 0
    var handling = BodyHandling.keepWhole
    /// False once the body stopped being kept (`BodyHandling.keepsUpTo`).
    var keepsBody = true
    /// Set when the task has a completion handler (Foundation collects the body and hands it
    /// over whole, `UpstreamClient.send(_:wholeBody:…)`): sends the request again as a delegate
    /// task, for a challenge.
    var retryAsDelegateTask: (@Sendable () -> Void)?
    /// A challenge came: the task is cancelled, and `retryAsDelegateTask` runs when it ends.
    var retrying = false
    /// The caller cancelled the transfer (`TransferRouter.cancel`).
    var isCancelled = false
    var answeredWithCredential = false
    var responseDate: Date?
    /// The head made when the response arrived, kept for the end: making one reads every header
    /// field out of Foundation's dictionary.
    var receivedHead: ReceivedHead?

    func head(_ response: HTTPURLResponse) -> ReceivedHead {
        if let receivedHead, receivedHead.response === response,
           receivedHead.route.answeredWithCredential == answeredWithCredential { return receivedHead }
        return ReceivedHead(response: response,
                            route: ResponseRoute(answeredWithCredential: answeredWithCredential),
                            requestDate: requestDate, responseDate: responseDate ?? clock())
    }

    /// The most room reserved ahead for a body from its declared `Content-Length`: a declared
    /// length is trusted only this far (a false one must not make a huge allocation, which
    /// fails by trapping); a larger body grows past it as it arrives.
    static let largestReservation = 64 << 20

    /// Reserves room for a body that declares `length` bytes (no more than the body may be kept
    /// to, `BodyHandling.keepsUpTo`, nor than `largestReservation`): each piece is then copied
    /// once as it is kept, not again each time the buffer grows, on the thread that reads the
    /// transfer.
    mutating func reserveRoom(forDeclaredLength length: Int64) {
        guard keepsBody, length > 0, body.isEmpty else { return }
        body.reserveCapacity(min(Int(clamping: length), handling.keepsUpTo ?? .max, Self.largestReservation))
    }

    func finished(with response: HTTPURLResponse) -> ReceivedResponse {
        ReceivedResponse(head: head(response), body: body,
                         transferSeconds: Double(DispatchTime.now().uptimeNanoseconds - startedAt.uptimeNanoseconds) / 1e9,
                         bodyLength: max(bodyLength, body.count), isBodyKept: keepsBody)
    }
}

/// The private session's delegate: collects each task's body, asks the listener, and hands the
/// whole response over.
private final class TransferRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let transfers = Locked<[Int: Transfer]>([:])
    /// Origins ("scheme://host:port") whose challenges this session answered with a credential
    /// of the app's (`CredentialUse`): the session may send it again unasked (Apple reuses a
    /// credential for a protection space it authenticated), so every later answer from them is
    /// treated as fetched with it.
    private let authenticatedOrigins = Locked<Set<String>>([])

    func register(_ task: URLSessionTask, transfer: Transfer) {
        var transfer = transfer
        if let origin = task.originalRequest?.url.flatMap(CredentialUse.origin(of:)),
           authenticatedOrigins.withLock({ $0.contains(origin) }) {
            transfer.answeredWithCredential = true
        }
        transfers.withLock { $0[task.taskIdentifier] = transfer }
    }

    /// Cancels `task`'s transfer. The transfer is marked first, under the lock its redirect
    /// question is answered under: once marked, a redirect question stays unanswered, and the
    /// cancellation ends the task (see `urlSession(_:task:willPerformHTTPRedirection:…)`).
    /// `cancel()` itself runs elsewhere, never on the caller's thread: a load is cancelled from
    /// `stopLoading` on the app session's queue, and on Linux every session's queue targets one
    /// serial queue, so cancelling (a `sync` onto the upstream session's queue) from there
    /// deadlocks. On Linux it runs later on the lane the task was made through (`CorelibsCallLane`).
    func cancel(_ task: URLSessionTask, through cancelling: (@escaping @Sendable () -> Void) -> Void) {
        transfers.withLock { $0[task.taskIdentifier]?.isCancelled = true }
        cancelling { task.cancel() }
    }

    /// A task with a completion handler ended: its whole response, or the error.
    func complete(_ taskIdentifier: Int, body: Data?, response: URLResponse?, error: Error?) {
        guard var transfer = transfers.withLock({ $0.removeValue(forKey: taskIdentifier) }) else { return }
        if transfer.retrying, let retry = transfer.retryAsDelegateTask {
            return offWorkQueue(retry)
        }
        let result: Result<ReceivedResponse, Error>
        if let error {
            result = .failure(error)
        } else if let response = response as? HTTPURLResponse {
            transfer.body = body ?? Data()
            result = .success(transfer.finished(with: response))
        } else {
            result = .failure(URLError(.badServerResponse))
        }
        end(transfer, with: result)
    }

    /// Hands `result` to the transfer's completion: on Linux in this callback when its listener
    /// says the response may be taken there (`UpstreamListener.upstreamMayEndInPlace`: the loads
    /// then get it in order with the transfer's reads, without a turn on a global thread and
    /// another wait for corelibs' queue to deliver it), else off corelibs' queue
    /// (`offWorkQueue`). Elsewhere in place, on the session's delegate queue.
    private func end(_ transfer: Transfer, with result: Result<ReceivedResponse, Error>) {
        #if canImport(FoundationNetworking)
        if case .success(let received) = result, transfer.listener?.upstreamMayEndInPlace(received) == true {
            return transfer.completion(result)
        }
        #endif
        offWorkQueue { [completion = transfer.completion] in completion(result) }
    }

    /// Runs `work` off corelibs' work queue, where the callbacks run on Linux
    /// (`UpstreamClient.init`): what follows a transfer's end unless its listener takes it in
    /// place (the engine judging, storing and answering, or a request sent again: long there,
    /// where every session waits, and making a task there deadlocks, Docs/foundation-facts.md,
    /// L3), and the answer to a challenge (corelibs may wait for the work queue in the
    /// completion handler: cancelling the task for a challenge does). Elsewhere in place, on the
    /// session's delegate queue.
    private func offWorkQueue(_ work: @escaping @Sendable () -> Void) {
        #if canImport(FoundationNetworking)
        DispatchQueue.global().async(execute: work)
        #else
        work()
        #endif
    }

    /// Answered at once, in place: a transfer with a listener stops (the 3xx and its body are the
    /// answer, and the engine follows the redirect, through the cache); one without is followed as
    /// Foundation follows for a task without a delegate, with the session's cookies for the new URL.
    ///
    /// On Linux a cancelled transfer's question is left unanswered: corelibs traps when an answer
    /// reaches a task its cancellation stopped meanwhile, and the cancellation ends the task
    /// without one (Docs/foundation-facts.md, L29). The answer is given under the transfers'
    /// lock, so `cancel` marks the transfer either before the question, or after the answer's
    /// turn was queued on the task's work queue, where it runs before the cancellation's turns.
    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let id = task.taskIdentifier
        let answer = { (hasListener: Bool) in
            completionHandler(hasListener ? nil : SessionSettings.addingCookies(of: session.configuration, to: request))
        }
        #if canImport(FoundationNetworking)
        transfers.withLock { transfers in
            guard transfers[id]?.isCancelled != true else { return }
            answer(transfers[id]?.listener != nil)
        }
        #else
        answer(transfers.withLock { $0[id]?.listener != nil })
        #endif
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
        offWorkQueue { [self] in respond(to: challenge, for: task, completionHandler: completionHandler) }
        #else
        respond(to: challenge, for: task, completionHandler: completionHandler)
        #endif
    }

    private func respond(to challenge: URLAuthenticationChallenge, for task: URLSessionTask,
                        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let (transfer, finishedEarly) = transfers.withLock { transfers -> (Transfer?, Bool) in
            guard let transfer = transfers[task.taskIdentifier] else { return (nil, false) }
            guard transfer.response != nil else { return (transfer, false) }
            transfers[task.taskIdentifier] = nil
            return (transfer, true)
        }
        guard let transfer else { return completionHandler(.performDefaultHandling, nil) }
        if transfer.retryAsDelegateTask != nil {
            // A completion-handler task: cancelled, it ends, and the request goes again as a
            // delegate task (`UpstreamClient.send(_:wholeBody:…)`).
            transfers.withLock { $0[task.taskIdentifier]?.retrying = true }
            return completionHandler(.cancelAuthenticationChallenge, nil)
        }
        if finishedEarly, let response = transfer.response {
            // The 401 (or 407) and its body are here: they are the answer. Left to default
            // handling, corelibs would never complete the task (Docs/foundation-facts.md, L14).
            completionHandler(.cancelAuthenticationChallenge, nil)
            return transfer.completion(.success(transfer.finished(with: response)))
        }
        // Read here: a challenge is not Sendable.
        let method = challenge.protectionSpace.authenticationMethod
        let origin = CredentialUse.origin(of: challenge.protectionSpace)
        let answer: @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void = {
            [transfers, authenticatedOrigins] disposition, credential in
            if CredentialUse.carriesCredential(method, disposition, credential) {
                transfers.withLock { $0[task.taskIdentifier]?.answeredWithCredential = true }
                if let origin { authenticatedOrigins.withLock { _ = $0.insert(origin) } }
            }
            completionHandler(disposition, credential)
        }
        guard let listener = transfer.listener else { return answer(.performDefaultHandling, nil) }
        listener.upstreamDidReceiveChallenge(challenge, answer: answer)
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let id = dataTask.taskIdentifier
        let arrived = transfers.withLock { transfers -> Transfer? in
            guard var transfer = transfers[id] else { return nil }
            transfer.response = response as? HTTPURLResponse
            transfer.responseDate = transfer.clock()
            transfers[id] = transfer
            return transfer
        }
        guard let arrived, let response = arrived.response else { return completionHandler(.allow) }
        let head = arrived.head(response)
        transfers.withLock { $0[id]?.receivedHead = head }
        let handling = arrived.listener?.upstreamDidReceiveHead(head) ?? arrived.handling
        transfers.withLock { transfers in
            transfers[id]?.handling = handling
            if handling.keepsUpTo == 0 { transfers[id]?.keepsBody = false }
            transfers[id]?.reserveRoom(forDeclaredLength: response.expectedContentLength)
        }
        completionHandler(.allow)
    }

    /// Keeps the piece while the body may still be stored or someone needs it whole, and relays
    /// it when the listener asked: memory stays bounded by `maximumEntrySize` for a body only
    /// handed on (a stream, a large download to a delegate), as it is without the layer.
    /// Pieces come one at a time, in order (on Linux on corelibs' work queue, `UpstreamClient.init`).
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let id = dataTask.taskIdentifier
        let (listener, relays, passesLimit) = transfers.withLock { transfers -> (UpstreamListener?, Bool, Bool) in
            // Changed in place: a copy of the transfer would copy its body at the next append.
            guard let keeps = transfers[id]?.keepsBody, let kept = transfers[id]?.body.count,
                  let handling = transfers[id]?.handling else { return (nil, false, false) }
            transfers[id]?.bodyLength += data.count
            let passes = keeps && handling.keepsUpTo.map { kept + data.count > $0 } == true
            if keeps, !passes { transfers[id]?.body.append(data) }
            return (transfers[id]?.listener, handling.relays, passes)
        }
        if passesLimit {
            let stops = listener?.upstreamBodyPassesLimit() ?? false
            transfers.withLock { transfers in
                if stops {
                    transfers[id]?.keepsBody = false
                    transfers[id]?.body = Data()
                } else {
                    transfers[id]?.handling.keepsUpTo = nil
                    transfers[id]?.body.append(data)
                }
            }
        }
        if relays { listener?.upstreamDidReceiveBody(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let result: Result<ReceivedResponse, Error>
        if let error {
            result = .failure(error)
        } else if let response = transfer.response ?? (task.response as? HTTPURLResponse) {
            result = .success(transfer.finished(with: response))
        } else {
            result = .failure(URLError(.badServerResponse))
        }
        end(transfer, with: result)
    }
}

/// Which answers to a challenge put a credential of the app's on the upstream request, so that
/// the response belongs to that credential (`ResponseRoute.answeredWithCredential`: never stored,
/// never handed to loads that joined).
enum CredentialUse {
    /// HTTP authentication and client certificates answered with a credential, or with default
    /// handling, which takes one from the credential storage the upstream session shares with the
    /// app's session (`SessionSettings.upstreamConfiguration`). Accepting a server's certificate
    /// (server trust) says nothing about who asks, and a cancelled or rejected challenge sends
    /// nothing.
    static func carriesCredential(_ authenticationMethod: String, _ disposition: URLSession.AuthChallengeDisposition,
                                  _ credential: URLCredential?) -> Bool {
        guard authenticationMethod != serverTrustAuthenticationMethod else { return false }
        switch disposition {
        case .useCredential: return credential != nil
        case .performDefaultHandling: return true
        default: return false
        }
    }

    /// "scheme://host:port" of a protection space (nil for a proxy's: it is not an origin).
    static func origin(of space: URLProtectionSpace) -> String? {
        guard !space.isProxy(), let scheme = space.protocol else { return nil }
        return "\(scheme.lowercased())://\(space.host.lowercased()):\(space.port)"
    }

    /// "scheme://host:port" of a URL, with the scheme's default port.
    static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }
}

/// `NSURLAuthenticationMethodServerTrust`, which swift-corelibs-foundation declares unavailable
/// (with this value): it raises no server-trust challenge, libcurl checks certificates against the
/// system's CA bundle itself.
#if canImport(FoundationNetworking)
let serverTrustAuthenticationMethod = "NSURLAuthenticationMethodServerTrust"
#else
let serverTrustAuthenticationMethod = NSURLAuthenticationMethodServerTrust
#endif
