import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An exchange with the origin, top to bottom: start it (or join an identical one), send the
/// planned request, let the policy judge the answer (`CachingPolicy.step`, pure: what to store,
/// what to answer, or a follow-up GET), store, and answer every load that waits.
extension CacheEngine {
    /// Sends an unsafe request as it is, on the engine's queue, shared with no other load; the
    /// store is invalidated once the origin accepted it (`ExchangePlan.unsafe`).
    func sendUnsafe(_ request: CacheRequest, from settings: SessionSettings, client: LoadClient) -> LoadHandle {
        var unshared = Load(request: request, settings: settings, client: client, started: .now())
        unshared.collapsible = false
        let load = unshared
        Self.queue.async { [self] in runExchange(.unsafe, for: load.request, from: load.settings, waiting: load) }
        return load.handle
    }

    /// Runs `plan` for `request` from an app session with `settings`, for `load` (nil: a
    /// background exchange nobody waits for — never for a session whose delegate judges server
    /// trust (no load of it could take the challenge). Its upstream requests use the connections
    /// of `load`'s app session, or of `appSession` for a background exchange (the session whose
    /// load started it: without the layer that load would have sent the request). Call it on the
    /// engine's queue (every caller is there already), where an upstream task may be created.
    func runExchange(_ plan: ExchangePlan, for request: CacheRequest, from settings: SessionSettings, waiting load: Load?,
                     through appSession: AppSession? = nil) {
        if load == nil, settings.judgesServerTrust { return }
        guard case .started(let exchange) = exchanges.enter(plan, for: request, from: settings, load: load,
                                                            collapses: configuration.collapsesRequests) else { return }
        // A GET, or a POST a rule declares cacheable (`CachingRule.cachePOST`), or an unsafe method.
        let requestMethod = request.urlRequest.httpMethod ?? "GET"
        let method: String
        switch plan {
        case .fetch, .forward, .unsafe:
            method = requestMethod
        case .revalidate(let entry, _):
            // A byte range is revalidated with a conditional range GET, whose 206 is the part; a
            // cached POST with a conditional POST (a HEAD would ask about another resource); a
            // stored redirect with a conditional GET (its body is small, and a HEAD that is
            // redirected again would need a GET after it).
            let byHead = configuration.revalidation == .head && request.byteRange == nil && requestMethod == "GET"
                && !(300...399).contains(entry.statusCode)
            method = byHead ? "HEAD" : requestMethod
        }
        let listener = ExchangeListener(engine: self, exchange: exchange, starter: load, appSession: load?.appSession ?? appSession)
        send(.planned(method: method), in: exchange, listener: listener)
    }

    /// Sends one request of `exchange`, unless every waiting load went away meanwhile (then the
    /// exchange finishes with nothing to hand out). `waitingForConnectivity`: through an upstream
    /// session that waits for connectivity (`SessionSettings.waitsForConnectivity`).
    private func send(_ sent: SentRequest, in exchange: Exchange, listener: ExchangeListener, waitingForConnectivity: Bool = false) {
        guard case .send = exchange.machine({ $0.prepareToSend() }) else { return resolve(exchange) }
        let request = upstreamRequest(for: sent, in: exchange)
        listener.expect(sent, method: request.httpMethod ?? "GET")
        // A GET or HEAD whose waiting loads do not take the body as it arrives may be collected
        // whole by Foundation (`UpstreamClient.send`).
        let wholeBody = ["GET", "HEAD"].contains(request.httpMethod ?? "GET") && exchange.waiting.allSatisfy(\.load.takesWholeBody)
        let settings = waitingForConnectivity ? exchange.id.settings.waitingForConnectivity : exchange.id.settings
        let task = upstream.send(request, from: settings, appSession: listener.appSession, wholeBody: wholeBody,
                                 listener: listener) { [self] result in
            received(result, for: sent, in: exchange, listener: listener, waited: waitingForConnectivity)
        }
        if case .cancel(let task) = exchange.machine({ $0.upstreamStarted(task) }) { task.cancel() }
    }

    /// The origin answered (or failed): the policy says what it means; the engine stores what it
    /// says to store and answers everyone waiting, or sends the follow-up GET. `waited`: the
    /// request went through an upstream session that waits for connectivity.
    private func received(_ result: Result<ReceivedResponse, Error>, for sent: SentRequest, in exchange: Exchange,
                          listener: ExchangeListener, waited: Bool) {
        let request = exchange.request
        let now = configuration.now()
        if case .success(let received) = result { recordTransfer(received) }
        let trip = listener.record(result)
        // Whether the response carries its whole body: not when the upstream kept none of it
        // (`ExchangeListener.upstreamDidReceiveHead`), whether a file holds it or not.
        var bodyInMemory = true
        if case .success(let received) = result { bodyInMemory = received.isBodyKept }
        // The file the body went to as it arrived, when it holds all of it: the body is kept
        // there. A file that does not (the transfer failed, a write failed, the body outgrew the
        // largest entry) goes.
        var result = result
        var bodyFile = listener.takeBodyFile()
        if case .success(let received) = result, let file = bodyFile, file.appendedBytes == received.bodyLength {
            result = .success(received.keptWhole())
        } else {
            bodyFile?.discard()
            bodyFile = nil
        }
        var context = ExchangeContext(storedPart: nil, maximumEntrySize: store.maximumEntrySize, now: now, keyRules: configuration.rules)
        if case .success(let received) = result, received.head.status == 206 {
            context.storedPart = CachingPolicy.matchingVariant(in: store.peek(request.key), for: request)
        }
        switch policy(for: request).step(after: result, to: sent, of: exchange.plan, for: request, context: context) {
        case .fetchBody:
            bodyFile?.discard()
            send(.bodyAfterHead, in: exchange, listener: listener)
        case .finish(let outcome):
            if !waited, Self.waitsForConnectivity(after: result, answer: outcome.answer, from: exchange.id.settings) {
                return send(sent, in: exchange, listener: listener, waitingForConnectivity: true)
            }
            // What is stored takes the file (and discards it if it does not keep it).
            if case .store = outcome.storage {} else { bodyFile?.discard() }
            apply(outcome.storage, for: request, bodyFile: bodyFile)
            if outcome.learnsNoStore { learnNoStore(request.key, at: now) }
            let answer: Answer
            switch outcome.answer {
            case .received(let status):
                guard case .success(let received) = result else { preconditionFailure("a received answer without a response") }
                answer = .response(deliverable(received.head, status: keyed(status, for: request)), received.body)
            case .stored(let entry, let status):
                answer = storedAnswer(entry, for: request, status: status, at: now)
            case .redirect(let target, let status):
                guard case .success(let received) = result else { preconditionFailure("a redirect without a response") }
                answer = .redirect(deliverable(received.head, status: status), received.body, to: target)
            case .gatewayTimeout(let status):
                answer = request.urlRequest.url.map { gatewayTimeout(for: $0, status: keyed(status, for: request)) }
                    ?? .failure(URLError(.cannotLoadFromNetwork))
            case .failure(let error):
                answer = .failure(error)
            }
            let streamed = listener.streamed
            let provenance = Provenance(outcome: CacheEvent.Outcome(outcome.verdict), trip: trip, notStored: outcome.notStoredReason,
                                        streamed: streamed)
            // A body not kept in memory (only in its file, or nowhere once it outgrew the file)
            // reached only the loads that took its pieces; the others (they joined after the
            // head) start again, and find it stored, or fetch it.
            var withoutBody: (Exchange.Waiter) -> Bool = { _ in false }
            if !bodyInMemory, case .received = outcome.answer {
                withoutBody = { !listener.tookPiecesOnly($0.load) }
            }
            resolve(exchange, answering: answer, as: provenance,
                   privately: outcome.isPrivateToStarter || Self.isStartersCancellation(result, listener),
                   failingAfterTheHead: Self.failureAfterTheHead(result, givenTheHead: streamed.loads), restarting: withoutBody)
        }
    }

    /// Whether a request that failed with `result` goes again, to wait for connectivity, rather
    /// than end with `answer`: when the app's session waits for connectivity, the origin could not
    /// be reached for want of it, and nothing stored may answer instead (a stale answer after an
    /// error comes at once). Without the layer the task would have waited; so does the load, and
    /// its app's delegate is not told (`taskIsWaitingForConnectivity` has no protocol client call).
    private static func waitsForConnectivity(after result: Result<ReceivedResponse, Error>, answer: ExchangeOutcome.AnswerSource,
                                             from settings: SessionSettings) -> Bool {
        guard settings.waitsForConnectivity, case .failure(let error) = result, isConnectivityUnavailable(error) else { return false }
        switch answer {
        case .failure, .gatewayTimeout: return true
        case .received, .stored, .redirect: return false
        }
    }

    /// The errors a request fails with at once, when its session does not wait, because no
    /// network it may use is there (Apple's documentation of `waitsForConnectivity` names
    /// `notConnectedToInternet`; the others are the cellular refusals of the same kind). A
    /// connection lost once established is not one: waiting applies only to making it.
    static func isConnectivityUnavailable(_ error: Error) -> Bool {
        guard let code = (error as? URLError)?.code else { return false }
        return [.notConnectedToInternet, .dataNotAllowed, .internationalRoamingOff, .callIsActive].contains(code)
    }

    /// The loads that took the head of the response `result` ends (`ExchangeListener`), with
    /// its error when the response failed after that head: they have seen part of that response,
    /// so they fail as they fail without the layer, with the upstream's error — never a stored
    /// copy or the cache's `504` behind that head (those go to the loads that did not take it).
    private static func failureAfterTheHead(_ result: Result<ReceivedResponse, Error>,
                                            givenTheHead loads: Set<ObjectIdentifier>) -> (loads: Set<ObjectIdentifier>, error: Error)? {
        guard case .failure(let error) = result else { return nil }
        return loads.isEmpty ? nil : (loads, error)
    }

    /// Whether `result` is the upstream request cancelled after the load that started the
    /// exchange left: a challenge forwarded to that load's app, cancelled when the load stopped
    /// (`ClientDelivery.stop`), or cancelled by that app. The loads that joined then start again
    /// on their own, each with its own challenge, as without the layer, instead of failing.
    private static func isStartersCancellation(_ result: Result<ReceivedResponse, Error>, _ listener: ExchangeListener) -> Bool {
        guard case .failure(let error) = result, (error as? URLError)?.code == .cancelled else { return false }
        return listener.starterLeft
    }

    /// Feeds the bandwidth estimate: an exponentially weighted average of transfers of 16 KB or
    /// more (smaller ones measure latency rather than bandwidth).
    private func recordTransfer(_ received: ReceivedResponse) {
        guard received.bodyLength >= 16_384, received.transferSeconds > 0 else { return }
        let sample = Double(received.bodyLength) / received.transferSeconds
        configuration.identity.counters.withLock { counters in
            counters.estimatedBandwidth = counters.estimatedBandwidth.map { $0 * 0.7 + sample * 0.3 } ?? sample
        }
    }

    /// Carries out what the policy said to store. `bodyFile` holds the body of the response
    /// received, when it went to a file as it arrived: an entry made from that response is
    /// stored with it. On corelibs' queue (an end taken in place, `UpstreamCallback`) a store
    /// never waits for the disk tier: that queue runs every session's work of the process, and
    /// the disk tier may have fallen behind since the end was let in
    /// (`ExchangeListener.upstreamMayEndInPlace`).
    private func apply(_ storage: ExchangeOutcome.Storage, for request: CacheRequest, bodyFile: StreamedEntryFile?) {
        switch storage {
        case .none:
            break
        case .store(let entry, let memoryOnly):
            #if canImport(FoundationNetworking)
            let waitsIfBehind = !UpstreamCallback.isRunning
            #else
            let waitsIfBehind = true
            #endif
            store.storeVariant(entry, key: request.key, memoryOnly: memoryOnly, bodyFile: bodyFile, waitsIfBehind: waitsIfBehind)
        case .removeVariant:
            store.removeVariant(forKey: request.key) { CachingPolicy.variant($0, matches: request) }
        case .removeRecords(let keys):
            for key in keys { store.removeRecord(forKey: key) }
        }
    }

    /// Hands `answer` to every load that waits on `exchange` and retires it; with no answer
    /// (nobody waits any more) it only retires it. An answer that is `privately` the load's that
    /// started the exchange (its app answered a challenge with a credential on the way, or it
    /// left) goes to that load only; the others start again, on their own, as do the loads
    /// `restarting` picks (the answer lacks what they need). The loads of `failingAfterTheHead`
    /// get its error instead (`failureAfterTheHead`).
    private func resolve(_ exchange: Exchange, answering answer: Answer? = nil, as provenance: Provenance? = nil,
                        privately: Bool = false, failingAfterTheHead failure: (loads: Set<ObjectIdentifier>, error: Error)? = nil,
                        restarting: (Exchange.Waiter) -> Bool = { _ in false }) {
        guard let waiters = exchanges.close(exchange), let answer, let provenance else { return }
        for waiter in waiters {
            if let failure, failure.loads.contains(ObjectIdentifier(waiter.load.handle)) {
                // What it got of the body before the failure counts as delivered.
                let failed = Provenance(outcome: .failed, trip: provenance.trip, collapsed: waiter.collapsed, streamed: provenance.streamed)
                deliver(.failure(failure.error), to: waiter.load, as: failed)
                continue
            }
            if privately && waiter.collapsed || restarting(waiter) {
                var retried = waiter.load
                retried.collapsible = false
                let load = retried
                Self.queue.async { [self] in
                    let (plan, now) = currentPlan(for: load.request, record: store.finishLookup(load.request.key))
                    carryOut(plan, for: load, now: now)
                }
                continue
            }
            var shared = provenance
            shared.collapsed = waiter.collapsed
            deliver(answer, to: waiter.load, as: shared)
        }
    }

    /// The request `sent` of `exchange` as it goes upstream: the app's request with its headers,
    /// timeout and method, told not to use Foundation's cache, with the stored validators for a
    /// revalidation and what the app's cache policy asks of caches on the way. An unsafe request
    /// goes as it is.
    private func upstreamRequest(for sent: SentRequest, in exchange: Exchange) -> URLRequest {
        let request = exchange.request
        var upstream = request.urlRequest
        // Each setter copies the whole request on Linux: only what differs is set. The upstream
        // session has no URL cache, so a request that kept the default policy needs no other.
        if upstream.cachePolicy != .useProtocolCachePolicy, upstream.cachePolicy != .reloadIgnoringLocalCacheData {
            upstream.cachePolicy = .reloadIgnoringLocalCacheData
        }
        if case .unsafe = exchange.plan { return upstream }
        var method = "GET"   // the body after a HEAD: only GETs are revalidated with one
        if case .planned(let planned) = sent { method = planned }
        if upstream.httpMethod != method { upstream.httpMethod = method }
        if case .planned = sent {
            if case .revalidate(_, let conditions) = exchange.plan {
                if let etag = conditions.ifNoneMatch { upstream.setValue(etag, forHTTPHeaderField: "If-None-Match") }
                if let date = conditions.ifModifiedSince { upstream.setValue(date, forHTTPHeaderField: "If-Modified-Since") }
            }
        }
        if request.mode == .reloadFromOrigin {
            upstream.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            upstream.setValue("no-cache", forHTTPHeaderField: "Pragma")
        } else if request.mode == .revalidate, request.urlRequest.value(forHTTPHeaderField: "Cache-Control") == nil {
            // As a browser's reload does: caches on the way revalidate too.
            upstream.setValue("max-age=0", forHTTPHeaderField: "Cache-Control")
        }
        return upstream
    }
}

/// What the loads of one exchange say while its upstream request runs: the load that started it
/// answers challenges (a background exchange gives them default handling), and every waiting
/// load that takes bodies as they arrive gets the response head and its body's pieces. A body
/// that may be stored and is larger than what memory collects goes to its entry file as it
/// arrives (`RecordStore.streamedEntryFile`). It also keeps the exchange's `Trip`. (Redirects
/// are not its business: the upstream session stops at each one, and the engine follows it for
/// each load, `CacheEngine+Redirects`.)
///
/// A server-trust challenge for a session whose delegate judges trust is never given default
/// handling: it goes to the starting load's client, or, when that client cannot pass it to the
/// app (or nobody waits), it is cancelled, so nothing from that connection is stored or served.
final class ExchangeListener: UpstreamListener {
    private let engine: CacheEngine
    private let exchange: Exchange
    private let starter: Load?
    /// The app session whose connections the exchange's requests use (`URLSessionUpstream`).
    let appSession: AppSession?

    private struct State {
        /// The request being sent, so a response head can be judged.
        var sent = SentRequest.planned(method: "GET")
        var trip = CacheEngine.Trip()
        /// The loads that got the head of the response to the request sent last, and so get
        /// the body's pieces.
        var streamingTo: [Load] = []
        /// Those of them that need nothing more than the pieces (`Load.needsWholeBody` false),
        /// by their handles.
        var takingPiecesOnly: Set<ObjectIdentifier> = []
        /// The file the body of the response goes to as it arrives, while it may be stored, the
        /// most bytes it may take (`RecordStore.maximumEntrySize`), and whether the body is kept
        /// whole in memory as well (`StreamedEntryFile.append(_:bodyIsKept:)`).
        var bodyFile: StreamedEntryFile?
        var bodyFileLimit = 0
        var bodyIsKept = false
        /// The body bytes relayed to them.
        var relayedBytes = 0
    }
    private let state = Locked(State())

    init(engine: CacheEngine, exchange: Exchange, starter: Load?, appSession: AppSession?) {
        self.engine = engine
        self.exchange = exchange
        self.starter = starter
        self.appSession = appSession
    }

    /// Whether the load that started the exchange left (it was cancelled) before the answer.
    var starterLeft: Bool { starter?.handle.isFinished ?? false }


    /// Says which request of the exchange is sent next, with `method`.
    func expect(_ sent: SentRequest, method: String) {
        let previousFile = state.withLock { state -> StreamedEntryFile? in
            state.sent = sent
            state.trip.methods.append(method)
            state.streamingTo = []
            state.takingPiecesOnly = []
            state.relayedBytes = 0
            defer { state.bodyFile = nil }
            return state.bodyFile
        }
        previousFile?.discard()
    }

    /// The loads (by their handles) that got the head of the response to the request sent last,
    /// and how many body bytes they got.
    var streamed: CacheEngine.Streamed {
        state.withLock { CacheEngine.Streamed(loads: Set($0.streamingTo.map { ObjectIdentifier($0.handle) }), bytes: $0.relayedBytes) }
    }

    /// Counts the answer to the request sent last; returns the exchange's trip so far.
    func record(_ result: Result<ReceivedResponse, Error>) -> CacheEngine.Trip {
        state.withLock { state in
            switch result {
            case .success(let received):
                state.trip.originStatus = received.head.status
                state.trip.bytes += received.bodyLength
            case .failure:
                state.trip.originStatus = nil
            }
            return state.trip
        }
    }

    /// The file the body of the response received last went to, when it still may hold all of
    /// it; the caller stores or discards it.
    func takeBodyFile() -> StreamedEntryFile? {
        state.withLock { state in
            defer { state.bodyFile = nil }
            return state.bodyFile
        }
    }

    /// True when the engine may judge `response`, store it and answer every load where the
    /// transfer ends (on Linux in the upstream session's callback, on corelibs' queue): its body
    /// is the answer as it is (`CachingPolicy.streamedStatus`: not a `304`, a redirect, a HEAD's,
    /// an error a stored response replaces, an unsafe request's), kept whole in memory and in no
    /// file, not a part to combine with a stored one; storing it reads no file and the disk tier
    /// is not behind (`RecordStore.storesWithoutWaiting`; should it fall behind meanwhile, the
    /// store made there does not wait for it, `apply`); and no observer is set (the app's code,
    /// which may wait for a session). Nothing of that end then sends a request or waits for
    /// corelibs' queue.
    func upstreamMayEndInPlace(_ response: ReceivedResponse) -> Bool {
        let request = exchange.request
        guard response.isBodyKept, response.head.status != 206, engine.configuration.observer == nil,
              engine.store.storesWithoutWaiting(forKey: request.key) else { return false }
        let (sent, hasFile) = state.withLock { ($0.sent, $0.bodyFile != nil) }
        guard !hasFile else { return false }
        let context = ExchangeContext(storedPart: nil, maximumEntrySize: engine.store.maximumEntrySize, now: engine.configuration.now())
        return engine.policy(for: request).streamedStatus(of: response.head, to: sent, of: exchange.plan, for: request,
                                                          context: context) != nil
    }

    /// Whether `load` got the body's pieces as they arrived and needs nothing more.
    func tookPiecesOnly(_ load: Load) -> Bool {
        state.withLock { $0.takingPiecesOnly.contains(ObjectIdentifier(load.handle)) }
    }

    func upstreamDidReceiveChallenge(_ challenge: URLAuthenticationChallenge,
                                     answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let judgedByTheApp = exchange.id.settings.judgesServerTrust
            && challenge.protectionSpace.authenticationMethod == serverTrustAuthenticationMethod
        guard let starter, !judgedByTheApp || starter.client.forwardsChallenges else {
            return answer(judgedByTheApp ? .cancelAuthenticationChallenge : .performDefaultHandling, nil)
        }
        starter.client.forward(challenge, reply: answer)
    }

    /// Hands the head to the loads that take the body as it arrives, opens the body's file when
    /// it may be stored and is larger than what memory collects, and says how much of the body
    /// to keep in memory: all of it while a load needs it whole (a completion handler, an
    /// `async` call, a load that joins later) and no file keeps it; up to `maximumEntrySize`
    /// while it may be stored and no file keeps it; none when the head rules storing out
    /// (`no-store`, an event stream, a `Content-Length` over the limit, a status or `Vary` the
    /// policy does not store, an answer only forwarded) or when only loads that take the pieces
    /// wait and a file keeps it. Once the body is kept nowhere, the exchange takes no more loads:
    /// one coming later sends its own request.
    func upstreamDidReceiveHead(_ head: ReceivedHead) -> BodyHandling {
        var waiters = exchange.waiting.filter(\.load.streamsBody)
        if head.route.answeredWithCredential { waiters = waiters.filter { !$0.collapsed } }
        let declared = head.response.expectedContentLength
        let largeBody = engine.store.writesAsItArrives(bodyOfLength: declared >= 0 ? Int(clamping: declared) : nil)
        guard !waiters.isEmpty || largeBody else { return .keepWhole }
        let sent = state.withLock { $0.sent }
        let request = exchange.request
        let context = ExchangeContext(storedPart: nil, maximumEntrySize: engine.store.maximumEntrySize, now: engine.configuration.now())
        let status = engine.policy(for: request).streamedStatus(of: head, to: sent, of: exchange.plan, for: request, context: context)
        // What may be stored says so in its `Cache-Status` (an answer only forwarded never is).
        let mayBeStored = status?.stored == true
        // A part is combined with what is stored; a response that sets a cookie stays in memory.
        var bodyFile: StreamedEntryFile?
        // The body is kept whole while a load needs it whole (below): its pieces then need not
        // hold the transfer back for the disk.
        let keepsWholeBody = waiters.isEmpty || waiters.contains(where: \.load.needsWholeBody)
        if largeBody, mayBeStored, head.status != 206, !CachingPolicy.isKeptInMemoryOnly(head.headers) {
            bodyFile = engine.store.streamedEntryFile(forKey: request.key)
            state.withLock { state in
                state.bodyFile = bodyFile
                state.bodyFileLimit = context.maximumEntrySize
                state.bodyIsKept = keepsWholeBody
            }
        }
        guard !waiters.isEmpty, let status else {
            // The body is the answer, whole (written to its file as well when there is one).
            return BodyHandling(relays: bodyFile != nil, keepsUpTo: nil)
        }
        let response = engine.deliverable(head, status: engine.keyed(status, for: request))
        state.withLock { state in
            state.streamingTo = waiters.map(\.load)
            state.takingPiecesOnly = Set(waiters.filter { !$0.load.needsWholeBody }.map { ObjectIdentifier($0.load.handle) })
        }
        for waiter in waiters {
            let marked = waiter.load.followedStoredRedirect ? engine.markedAsReachedThroughStoredRedirect(response) : response
            waiter.load.client.receiveHead(marked)
        }
        if bodyFile != nil {
            return BodyHandling(relays: true, keepsUpTo: keepsWholeBody ? nil : 0)
        }
        if mayBeStored {
            return BodyHandling(relays: true, keepsUpTo: context.maximumEntrySize)
        }
        return BodyHandling(relays: true, keepsUpTo: stopsKeepingBody() ? 0 : nil)
    }

    func upstreamDidReceiveBody(_ data: Data) {
        let (loads, file, limit, bodyIsKept) = state.withLock { state in
            state.relayedBytes += data.count
            return (state.streamingTo, state.bodyFile, state.bodyFileLimit, state.bodyIsKept)
        }
        for load in loads { load.client.receiveChunk(data) }
        guard let file else { return }
        guard file.appendedBytes + data.count <= limit else {
            // Larger than what may be stored: the file goes, and the exchange takes no more loads
            // when the body is kept nowhere else.
            state.withLock { $0.bodyFile = nil }
            file.discard()
            _ = stopsKeepingBody()
            return
        }
        file.append(data, bodyIsKept: bodyIsKept)
    }

    /// The body grew past `maximumEntrySize`: it will not be stored.
    func upstreamBodyPassesLimit() -> Bool {
        stopsKeepingBody()
    }

    /// Whether the body may stop being kept: when every load waiting takes only its pieces. Then
    /// the exchange is closed to loads that would join it, which could not get the body whole.
    private func stopsKeepingBody() -> Bool {
        let takingPiecesOnly = state.withLock { $0.takingPiecesOnly }
        return exchange.machine { machine in
            machine.closeToJoiners(ifEvery: { takingPiecesOnly.contains(ObjectIdentifier($0.load.handle)) })
        }
    }

    var isWanted: Bool { exchange.machine({ $0.isRunning }) }
}

extension CacheEvent.Outcome {
    /// The event outcome of an exchange that ended with `verdict`: the same name.
    fileprivate init(_ verdict: ExchangeOutcome.Verdict) {
        switch verdict {
        case .fetched: self = .fetched
        case .revalidatedChanged: self = .revalidatedChanged
        case .revalidatedNotModified: self = .revalidatedNotModified
        case .staleAfterError: self = .staleAfterError
        case .failed: self = .failed
        }
    }
}
