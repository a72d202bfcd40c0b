import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `URLProtocol` that gives URLSession transparent, MKNetworkKit-style HTTP caching.
///
/// Install it once at launch, with ``register(_:)`` for `URLSession.shared` or with
/// ``inject(into:using:delegate:)`` for sessions the app builds; from then on every GET those sessions
/// make is answered from ``CachingURLCache`` when the ``CachingPolicy`` allows, revalidated with
/// a conditional request when it must be, and fetched otherwise. The app's completion handlers,
/// delegates and `async` calls see ordinary responses with the origin's status and headers.
///
/// What the protocol leaves to Foundation untouched: methods other than GET — except an unsafe
/// method for a URL with something stored, which the protocol sends as it is and which drops the
/// stored response once the origin accepted it (RFC 9111 §4.4) —, requests the app made conditional or partial
/// itself, `Cache-Control: no-store` requests, event streams (`Accept: text/event-stream`),
/// schemes other than http and https, and on Apple platforms download, upload, stream and
/// WebSocket tasks.
///
/// What the app's session decides stays its own: its delegate answers authentication challenges
/// and decides redirects, its cookie jar, cookie policy and credential storage apply, and so do its
/// other settings (see `SessionSettings`). On Apple platforms a delegate that pins certificates or
/// refuses redirects must be named to ``inject(into:using:delegate:)``, since a protocol never sees
/// its session's delegate (type-checked and tested on Linux with Apple's rules; not run on an
/// Apple platform). Every answer carries a `Cache-Status` header (RFC 9211) unless
/// ``CachingConfiguration/addsCacheStatus`` is off; it is the one header the layer adds.
///
/// Foundation creates and drives the instances; apps never do. (Sessions configured with
/// ``inject(into:using:delegate:)`` may get a subclass of their own that carries the configuration's
/// settings; see `SessionClasses`.)
public class CachingURLProtocol: URLProtocol {

    /// What `startLoading` sets up and `stopLoading` ends, in one lock: an instance is made for
    /// every request, hits included, and each lock is an allocation.
    private struct LoadState {
        /// Between `startLoading` and `stopLoading`: a load was started and not stopped (it may
        /// have been answered since).
        var isStarted = false
        /// The load in progress.
        var loading: LoadHandle?
        /// The way to the client.
        var delivery: ClientDelivery?
        #if canImport(FoundationNetworking)
        /// Foundation's own protocol, loading a task this one handed over (a download on Linux).
        var foundationLoad: FoundationLoad?
        /// `stopLoading` came from the task's cancellation: the cancellation ends the task, and
        /// a later `startLoading` does nothing (see `stopLoading`).
        var isCancelled = false
        #endif
    }
    private let state = Locked(LoadState())

    /// What a call of `startLoading` does.
    private enum StartRequest {
        case start
        /// The load runs (or was answered): nothing to do.
        case alreadyStarted
        /// The task was cancelled first: its cancellation ends it.
        case cancelled
        /// The task was handed to Foundation's own protocol: it decides (it resumes a transfer
        /// it suspended, and ignores the call otherwise).
        case resumeFoundation(URLProtocol)
    }

    #if canImport(FoundationNetworking)
    private struct FoundationLoad {
        let protocolInstance: URLProtocol
    }

    /// Lets Foundation's own HTTP protocol load `task` (the first of the default configuration's
    /// protocol classes that takes its request), reporting to the task as it would without the
    /// layer; when none does, the task fails with `URLError.unsupportedURL` and a
    /// `CachingError.unsupportedTask` saying so.
    private func handOverToFoundation(_ task: URLSessionTask, delivery: ClientDelivery) {
        let foundationClass = (URLSessionConfiguration.default.protocolClasses ?? [])
            .compactMap { $0 as? URLProtocol.Type }
            .first { !($0 is CachingURLProtocol.Type) && $0.canInit(with: request) }
        guard let foundationClass else {
            let reason = CachingError(.unsupportedTask, "no Foundation protocol loads \(request.url?.absoluteString ?? "this request"); "
                                      + "use a session without CachingURLProtocol for it")
            return delivery.deliver(.failure(reason.urlError(.unsupportedURL)), onCallingThread: true)
        }
        let instance = foundationClass.init(task: task, cachedResponse: nil, client: nil)
        state.withLock { $0.foundationLoad = FoundationLoad(protocolInstance: instance) }
        instance.startLoading()
    }
    #endif

    // MARK: URLProtocol

    /// The settings of the app session this class serves and the engine that caches for it
    /// (see `SessionClasses`), or the settings it served before it was unbound (after
    /// `unregister()`, or pushed out by other configurations) or nothing was installed for it.
    /// A class property so tests can stand a class of their own in for one `SessionClasses` made.
    class var binding: SessionClasses.ClassBinding {
        SessionClasses.classBinding(of: self)
    }

    /// How this platform's client wants to be called (see `ClientDelivery.Rules`). A class
    /// property so tests can run Apple's rules on Linux through a subclass.
    class var deliveryRules: ClientDelivery.Rules {
        .platform
    }

    public override class func canInit(with request: URLRequest) -> Bool {
        guard case .bound(let settings, let engine) = binding, !engine.bypasses(request) else { return false }
        let request = settings.apply(to: request)
        let facts = RequestHeaderFacts(request)   // read once: bridging the header fields costs microseconds
        switch RequestDisposition(request, facts: facts) {
        case .cacheable:
            // Unless the URL's last response said `no-store` (`CacheEngine.passesBy`).
            return !engine.passesBy(request)
        case .range:
            // When the policy stores partial content, or a stored response answers it now;
            // otherwise Foundation sends it.
            guard let key = engine.cacheKey(for: request) else { return false }
            return engine.takesRangeRequest(CacheRequest(request, key: key, facts: facts), from: settings)
        case .passThrough:
            return false
        case .invalidate:
            // An unsafe method: taken only when something may be stored for its URL, so that the
            // stored response is dropped once the origin accepted the request (RFC 9111 §4.4,
            // `startLoading`). Otherwise there is nothing to invalidate, and Foundation sends it
            // untouched. A body only Foundation's loader can send again is left to it, and what
            // is stored is dropped before it leaves (`leavesBodyToFoundation`).
            guard let key = engine.cacheKey(for: request) else { return false }
            if engine.cachesPOST(request) { return true }
            guard engine.takesUnsafeRequest(forKey: key) else { return false }
            guard !Self.leavesBodyToFoundation(request) else {
                engine.store.removeRecord(forKey: key)
                return false
            }
            return true
        }
    }

    /// Whether an unsafe request's body must be sent by Foundation's own loader, not by the
    /// layer's upstream session: a body stream, and on Apple platforms any body (a protocol gets
    /// every body there as a stream). When the request must go again — a `401` or `407` the app
    /// answers, a retry after a network change — only that loader can ask the app for the stream
    /// again (`needNewBodyStream`), and only it reports upload progress (`didSendBodyData`): no
    /// `URLProtocolClient` call does either (Apple's CustomHTTPProtocol sample, Read Me). Left to
    /// it, the request is sent, re-sent and reported as without the layer; the stored response
    /// is dropped before it leaves rather than after the origin accepted it (a later miss, never a
    /// wrong answer).
    static func leavesBodyToFoundation(_ request: URLRequest, everyBodyIsAStream: Bool = everyBodyIsAStream) -> Bool {
        request.httpBodyStream != nil || (everyBodyIsAStream && request.httpBody != nil)
    }

    /// Whether a protocol may get a request's body as a stream although the app set `httpBody`:
    /// on Apple platforms (Docs/foundation-facts.md, A21: reasoned, not run); corelibs hands a
    /// protocol the request's `httpBody` as the app set it.
    static let everyBodyIsAStream = LoaderRules.current.bodiesMayComeAsStreams

    #if !canImport(FoundationNetworking)
    /// Data tasks only: download, upload, stream and WebSocket tasks are left to the system
    /// (their bodies go to files and streams, which a cache in front of them would buffer). So is
    /// a task whose own delegate (`URLSessionTask.delegate`, the `delegate:` of the `async` calls)
    /// implements a challenge method: it judges server trust for that task alone, and an answer
    /// fetched or stored for others would reach it from a connection it never judged.
    public override class func canInit(with task: URLSessionTask) -> Bool {
        guard task is URLSessionDataTask, !(task is URLSessionUploadTask), let request = task.currentRequest else {
            return false
        }
        if let own = task.delegate, DelegateTraits.judgesTrust(own) { return false }
        return canInit(with: request)
    }
    #endif

    public override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    public override func startLoading() {
        // corelibs calls `startLoading` again whenever the app resumes a task that runs already
        // (Alamofire resumes every task it cancels, to gather metrics). Foundation's own protocol
        // ignores that call, and resumes a transfer it suspended; so does this one. Starting a
        // second load would send the request twice, and a second hand-over would leave the first
        // Foundation protocol loading for a task that its cancellation removed from the session:
        // corelibs then traps on its next piece of body ("a task that in not in the registry").
        switch state.withLock({ state -> StartRequest in
            #if canImport(FoundationNetworking)
            if state.isCancelled { return .cancelled }
            if let foundation = state.foundationLoad { return .resumeFoundation(foundation.protocolInstance) }
            #endif
            if state.isStarted { return .alreadyStarted }
            state.isStarted = true
            return .start
        }) {
        case .alreadyStarted, .cancelled:
            return
        case .resumeFoundation(let foundationProtocol):
            return foundationProtocol.startLoading()
        case .start:
            break
        }
        #if canImport(FoundationNetworking)
        let delivery = ClientDelivery(owner: self, executor: TaskQueueExecutor(queue: TaskWorkQueue.of(task)), rules: Self.deliveryRules)
        #else
        let delivery = ClientDelivery(owner: self, executor: ClientThreadExecutor(), rules: Self.deliveryRules)
        #endif
        state.withLock { $0.delivery = delivery }
        #if canImport(FoundationNetworking)
        if let task = task as? URLSessionDownloadTask {
            // corelibs finishes a download only through a property its own protocol sets
            // (Docs/foundation-facts.md, L17), and it never asks `canInit(with task:)`: the task is
            // handed to Foundation's own HTTP protocol, which loads it as without the layer.
            return handOverToFoundation(task, delivery: delivery)
        }
        #endif
        // `canInit` accepted the request: a cacheable GET, or an unsafe method for a stored URL.
        let (bound, engine): (SessionSettings, CacheEngine)
        switch Self.binding {
        case .bound(let settings, let boundEngine):
            (bound, engine) = (settings, boundEngine)
        case .unbound(let lastSettings):
            // Unbound between `canInit` and here (`unregister()`, or the class's binding was the
            // least recently used one, `SessionClasses`): loaded as without the layer.
            return loadUncached(with: lastSettings, delivery: delivery)
        }
        let request = bound.apply(to: self.request)
        guard let key = engine.cacheKey(for: request) else {
            let reason = CachingError(.unsupportedTask, "a request without a URL")
            return delivery.deliver(.failure(reason.urlError(.badURL)), onCallingThread: true)
        }
        #if canImport(FoundationNetworking)
        let settings = bound
        #else
        // No task: an `NSURLConnection`'s load, whose delegate (which may pin) nothing names.
        let settings = task == nil ? bound.withUnnamedDelegate : bound
        #endif
        let cacheRequest: CacheRequest
        if let method = request.httpMethod, method != "GET", !method.isEqualIgnoringASCIICase("GET") {
            guard let cachedPOST = Self.cacheablePOST(request, task: task, engine: engine) else {
                return sendUnsafe(request, key: key, engine: engine, settings: settings, delivery: delivery)
            }
            cacheRequest = cachedPOST
        } else {
            cacheRequest = CacheRequest(request, key: key)
        }
        switch engine.lookUp(cacheRequest, from: settings) {
        case .answered(let answer):
            delivery.deliver(answer, onCallingThread: true)
        case .goesOn(let pending):
            // The client is made only when the load goes on past the lookup: a hit never looks
            // at the app's task.
            let handle = engine.resume(pending, client: makeClient(delivery, settings: settings))
            state.withLock { $0.loading = handle }
            // Stopped while the load started: it leaves its exchange, so an upstream request
            // nobody waits for is cancelled.
            if delivery.isStopped { handle.cancel() }
        }
    }

    /// Loads the request of a class unbound since `canInit` took it, as without the layer. On
    /// Linux the task goes to Foundation's own protocol. Elsewhere — Apple's loader has no public
    /// protocol to hand a task to — it goes to the origin as it is, through an upstream session
    /// made from the settings the class last served, nothing looked up or stored
    /// (`PassThroughLoad`): the app's header fields, cookies and session rules apply, its delegate
    /// gets the challenges and redirects, and the next hop of a redirect is Foundation's. Settings
    /// forgotten meanwhile (`SessionClasses.maximumBindings` more classes were unbound since)
    /// cannot be guessed: the load fails as cancelled, with a `CachingError` saying why — as does
    /// one whose client cannot take a redirect report (Linux's, without a task: corelibs never
    /// makes such a load).
    private func loadUncached(with settings: SessionSettings?, delivery: ClientDelivery) {
        #if canImport(FoundationNetworking)
        if let task { return handOverToFoundation(task, delivery: delivery) }
        #endif
        guard let settings, delivery.rules.reportsRedirects else {
            let reason = CachingError(.notInstalled, "CachingURLProtocol was uninstalled while a request was starting, "
                                      + "and the settings of its session were forgotten")
            return delivery.deliver(.failure(reason.urlError(.cancelled)), onCallingThread: true)
        }
        let handle = PassThroughLoad.start(settings.apply(to: request), from: settings, through: Installation.passThroughUpstream,
                                           client: makeClient(delivery, settings: settings))
        state.withLock { $0.loading = handle }
        if delivery.isStopped { handle.cancel() }
    }

    /// `request` as a POST the cache may answer (`CachingRule.cachePOST`), keyed by its URL,
    /// body and `Content-Type`; nil for any other request. A body that comes as a stream (Apple
    /// platforms hand protocols their bodies that way) is read once here, and the same bytes go
    /// upstream. An upload task's body is the task's, not the request's: it is sent as any POST.
    private static func cacheablePOST(_ request: URLRequest, task: URLSessionTask?, engine: CacheEngine) -> CacheRequest? {
        guard !(task is URLSessionUploadTask), engine.cachesPOST(request) else { return nil }
        var request = request
        if request.httpBody == nil, let stream = request.httpBodyStream {
            request.httpBody = readAll(stream)
            request.httpBodyStream = nil
        }
        return CacheKey.make(forPOST: request).map { CacheRequest(request, key: $0) }
    }

    /// Every byte `stream` holds (an unreadable stream gives what it gave before failing).
    private static func readAll(_ stream: InputStream) -> Data {
        var data = Data()
        stream.open()
        defer { stream.close() }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            data.append(buffer, count: count)
        }
        return data
    }

    /// Sends an unsafe request through the engine, which drops what is stored for its URL once
    /// the origin accepted it.
    private func sendUnsafe(_ request: URLRequest, key: String, engine: CacheEngine, settings: SessionSettings,
                            delivery: ClientDelivery) {
        #if canImport(FoundationNetworking)
        if let task = task as? URLSessionUploadTask {
            // corelibs keeps an upload task's body in the task, not in the request a protocol is
            // given: Foundation's own protocol sends it, body and all. Whether the origin accepts
            // it cannot be seen from here, so the stored response is dropped before it leaves.
            engine.store.removeRecord(forKey: key)
            return handOverToFoundation(task, delivery: delivery)
        }
        #endif
        let handle = engine.sendUnsafe(CacheRequest(request, key: key), from: settings, client: makeClient(delivery, settings: settings))
        state.withLock { $0.loading = handle }
        if delivery.isStopped { handle.cancel() }
    }

    public override func stopLoading() {
        #if canImport(FoundationNetworking)
        // corelibs calls `stopLoading` for a suspension (the task resumes with `startLoading`) and
        // for a cancellation, whose `startLoading` may still come after it, when the task's
        // protocol was made while the task was being cancelled (Docs/foundation-facts.md, L30):
        // loading then would answer a task its cancellation ended, and corelibs traps.
        let cancelled = task.map { [.canceling, .completed].contains($0.state) } ?? false
        #endif
        let stopped = state.withLock { state -> LoadState in
            defer {
                state.loading = nil
                state.isStarted = false
                #if canImport(FoundationNetworking)
                if cancelled { state.isCancelled = true }
                #endif
            }
            return state
        }
        #if canImport(FoundationNetworking)
        if let foundation = stopped.foundationLoad { return foundation.protocolInstance.stopLoading() }
        #endif
        stopped.delivery?.stop()
        stopped.loading?.cancel()
    }

    // MARK: Delivery

    /// The client of a load that goes on past the lookup, made from the app's task and the
    /// settings of its session.
    private func makeClient(_ delivery: ClientDelivery, settings: SessionSettings) -> Client {
        #if canImport(FoundationNetworking)
        delivery.learnBodyDelivery(from: task)
        #else
        // Who may refuse a redirect this load reports: the session's delegate as the app named it
        // (`inject(into:using:delegate:)`), or the task's own.
        delivery.redirectsMayBeRefused = settings.delegate.decidesRedirects
            || task?.delegate.map { DelegateTraits.decidesRedirects($0) } == true
        #endif
        return Client(delivery: delivery, redirects: delivery.rules.reportsRedirects ? .report : AppTaskRedirects.handling(for: task))
    }

    /// What the engine hands a load's answer and its news to: the protocol's `ClientDelivery`.
    private struct Client: LoadClient {
        let delivery: ClientDelivery
        let redirects: RedirectHandling

        var streamsBody: Bool { delivery.bodyDelivery != .whole }

        var needsWholeBody: Bool { delivery.bodyDelivery != .streamed }

        func receive(_ answer: Answer, outcome: CacheEvent.Outcome) {
            delivery.deliver(answer)
        }

        func receiveHead(_ response: HTTPURLResponse) {
            delivery.deliverHead(response)
        }

        func receiveChunk(_ data: Data) {
            delivery.deliverChunk(data)
        }

        func forward(_ challenge: URLAuthenticationChallenge,
                    reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
            delivery.forward(challenge, reply: reply)
        }

        var forwardsChallenges: Bool { delivery.rules.forwardsChallenges }
    }
}
