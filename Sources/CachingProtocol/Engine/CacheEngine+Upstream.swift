import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The engine's side of an exchange: starting or joining one, sending its upstream requests,
/// judging the answers with the policy, storing what may be stored, and answering the loads.
/// The exchange itself only keeps state; every action its state machine returns is performed
/// here, outside its lock.
extension CacheEngine {
    // MARK: Starting, joining, leaving

    /// Starts the upstream work `kind` for `request` from an app session with `settings`, or
    /// joins an identical exchange already running. `load` nil starts a background exchange
    /// nobody waits for. Call it on the engine's queue (every caller is there already: one hop
    /// fewer on every miss), where an upstream task may be created.
    func startExchange(_ kind: Exchange.Kind, for request: CacheRequest, from settings: SessionSettings, joining load: Load?) {
        let collapses = configuration.collapsesRequests && load?.collapsible != false
        let key = collapses ? kind.collapseKey(for: request) : "\(exchangeSerial.withLock { $0 += 1; return $0 })"
        let id = Exchange.ID(key: key, settings: settings)
        var created: Exchange?
        let joined: (Exchange, number: Int)? = exchanges.withLock { table in
            if let existing = table[id], let load,
               case .joined(let number) = existing.join(Exchange.Waiter(load: load, collapsed: true)) {
                return (existing, number)
            }
            if load == nil, table[id] != nil { return nil }   // a background revalidation already runs
            let exchange = Exchange(id: id, kind: kind, request: request, isBackground: load == nil)
            table[id] = exchange
            created = exchange
            guard let load, case .joined(let number) = exchange.join(Exchange.Waiter(load: load, collapsed: false)) else {
                return nil
            }
            return (exchange, number)
        }
        if let (exchange, number) = joined {
            load?.handle.joined { [self] in leave(exchange, waiter: number) }
        }
        if let created {
            if created.isBackground { backgroundWork.enter() }
            run(created, listener: ExchangeListener(engine: self, exchange: created, starter: load))
        }
    }

    /// A waiting load was cancelled. When it was the last, the exchange is abandoned: it is
    /// retired (later loads start a new one) and its upstream request is cancelled.
    private func leave(_ exchange: Exchange, waiter number: Int) {
        guard case .abandon(let task) = exchange.leave(number) else { return }
        retire(exchange)
        task?.cancel()
    }

    /// Removes `exchange` from the table, so identical loads no longer join it.
    private func retire(_ exchange: Exchange) {
        exchanges.withLock { table in
            if table[exchange.id] === exchange { table[exchange.id] = nil }
        }
    }

    /// Hands `resolution` to every load that waits on `exchange` and retires it; with no
    /// resolution (nobody waits any more) it only retires it. A resolution private to the load
    /// that started the exchange (answered with its app's credential) goes to that load only;
    /// the others start again, on their own.
    private func finish(_ exchange: Exchange, with resolution: Resolution?) {
        retire(exchange)
        guard case .deliver(let waiters) = exchange.upstreamFinished() else { return }
        if exchange.isBackground { backgroundWork.leave() }
        guard let resolution else { return }
        for waiter in waiters {
            if resolution.isPrivateToStarter, waiter.collapsed {
                var retried = waiter.load
                retried.collapsible = false
                let load = retried
                queue.async { self.proceed(load, decision: self.decide(load.request, record: self.store.finishLookup(load.request.key))) }
                continue
            }
            deliver(resolution.answer, to: waiter.load, outcome: resolution.outcome, trip: resolution.trip,
                    collapsed: waiter.collapsed)
        }
    }

    // MARK: Running

    /// Runs the exchange on the engine's queue: a fetch, or a revalidation (HEAD or conditional
    /// GET, per `CachingConfiguration.revalidation`).
    private func run(_ exchange: Exchange, listener: ExchangeListener) {
        let request = exchange.request
        switch exchange.kind {
        case .fetch(let fallback, let forward):
            let trip = Trip(methods: ["GET"])
            listener.expect(method: "GET", fallback: fallback, forward: forward)
            send(upstreamRequest(for: request, method: "GET", conditions: nil), for: exchange, listener: listener) { [self] result in
                finish(exchange, with: resolveFetch(result, request: request, fallback: fallback, forward: forward,
                                                    trip: trip, outcome: .fetched, listener: listener))
            }
        case .forward:
            let trip = Trip(methods: ["GET"])
            listener.expect(method: "GET", fallback: nil, forward: .request)
            send(upstreamRequest(for: request, method: "GET", conditions: nil), for: exchange, listener: listener) { [self] result in
                finish(exchange, with: resolveForward(result, trip: trip))
            }
        case .unsafe:
            let method = request.urlRequest.httpMethod ?? "POST"
            let trip = Trip(methods: [method])
            listener.expect(method: method, fallback: nil, forward: .method)
            var upstream = request.urlRequest
            upstream.cachePolicy = .reloadIgnoringLocalCacheData
            send(upstream, for: exchange, listener: listener) { [self] result in
                finish(exchange, with: resolveUnsafe(result, request: request, trip: trip))
            }
        case .revalidate(let entry, let conditions):
            // A byte range is revalidated with a conditional range GET, whose 206 is the part.
            let method = configuration.revalidation == .head && request.byteRange == nil ? "HEAD" : "GET"
            let trip = Trip(methods: [method])
            listener.expect(method: method, fallback: entry, forward: .stale)
            send(upstreamRequest(for: request, method: method, conditions: conditions), for: exchange, listener: listener) { [self] result in
                handleRevalidation(result, of: entry, in: exchange, trip: trip, listener: listener)
            }
        }
    }

    /// Judges a revalidation's answer with the policy (`revalidationOutcome`) and acts on it.
    private func handleRevalidation(_ result: Result<UpstreamResponse, Error>, of entry: CacheEntry,
                                    in exchange: Exchange, trip: Trip, listener: ExchangeListener) {
        let request = exchange.request
        guard case .success(let upstream) = result, listener.reportedRedirectTarget == nil else {
            // No answer at all (a stale fallback if the policy allows, else the error), or a
            // redirect the app's session follows itself.
            return finish(exchange, with: resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                                       trip: trip, outcome: .revalidatedChanged, listener: listener))
        }
        let now = configuration.now()
        let outcome = policy(for: request).revalidationOutcome(
            stored: entry, request: request, method: trip.methods.last ?? "GET", status: upstream.status,
            headers: upstream.headers, requestDate: upstream.requestDate, responseDate: upstream.responseDate, now: now)
        var trip = trip
        switch outcome {
        case .notModified(let updated, let mayStore):
            trip.originStatus = upstream.status
            if mayStore {
                store.storeVariant(updated, key: request.key, memoryOnly: CachingPolicy.isKeptInMemoryOnly(updated.headers))
            } else {
                removeVariant(matching: request)
            }
            let status = CacheStatus(forward: .stale, forwardStatus: upstream.status, stored: true,
                                     timeToLive: CacheStatus.timeToLive(of: updated, at: now))
            // A range was revalidated only when the entry holds it (`proceed(_:range:decision:)`).
            let answer = storedAnswer(updated, for: request, status: status, at: now) ?? storedAnswer(updated, status: status, at: now)
            finish(exchange, with: Resolution(answer: answer, outcome: .revalidatedNotModified, trip: trip))
        case .changed(bodyIncluded: true):
            finish(exchange, with: resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                                trip: trip, outcome: .revalidatedChanged, listener: listener))
        case .serverError:
            trip.bytes += upstream.body.count
            recordTransfer(upstream)
            finish(exchange, with: staleAfterError(entry, for: request, originStatus: upstream.status, now: now, trip: trip))
        case .changed(bodyIncluded: false):
            // Changed (or the HEAD was refused, or a 304 named another representation): fetch the
            // body with an unconditional GET, which replaces the stored response.
            trip.originStatus = upstream.status
            trip.methods.append("GET")
            listener.expect(method: "GET", fallback: entry, forward: .stale)
            send(upstreamRequest(for: request, method: "GET", conditions: nil), for: exchange, listener: listener) { [self, trip] result in
                finish(exchange, with: resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                                    trip: trip, outcome: .revalidatedChanged, listener: listener))
            }
        }
    }

    /// Sends one upstream request for `exchange`, unless every waiting load went away meanwhile
    /// (then the exchange finishes with nothing to hand out).
    private func send(_ request: URLRequest, for exchange: Exchange, listener: ExchangeListener,
                      completion: @escaping @Sendable (Result<UpstreamResponse, Error>) -> Void) {
        guard case .send = exchange.prepareToSend() else { return finish(exchange, with: nil) }
        // A GET or HEAD whose waiting loads neither take the body as it arrives nor ask the app
        // about redirects may be collected by Foundation (`UpstreamClient.send(_:wholeBody:…)`).
        let method = request.httpMethod ?? "GET"
        let wholeBody = (method == "GET" || method == "HEAD") && exchange.waiting.allSatisfy { waiting in
            let client = waiting.waiter.load.client
            guard !client.streamsBody, case .follow = client.redirects else { return false }
            return true
        }
        let task = upstream(for: exchange.id.settings).send(request, wholeBody: wholeBody, clock: configuration.now,
                                                             listener: listener, completion: completion)
        if case .cancel(let task) = exchange.upstreamStarted(task) { task.cancel() }
    }

    /// The upstream request for `request`: the app's request with its headers, timeout and
    /// method, told not to use Foundation's cache, with `conditions` added.
    private func upstreamRequest(for request: CacheRequest, method: String, conditions: RevalidationConditions?) -> URLRequest {
        var upstream = request.urlRequest
        upstream.httpMethod = method
        upstream.cachePolicy = .reloadIgnoringLocalCacheData
        if request.mode == .reloadFromOrigin {
            upstream.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            upstream.setValue("no-cache", forHTTPHeaderField: "Pragma")
        } else if request.mode == .revalidate, request.urlRequest.value(forHTTPHeaderField: "Cache-Control") == nil {
            // As a browser's reload does: caches on the way revalidate too.
            upstream.setValue("max-age=0", forHTTPHeaderField: "Cache-Control")
        }
        if let conditions {
            if let etag = conditions.ifNoneMatch { upstream.setValue(etag, forHTTPHeaderField: "If-None-Match") }
            if let date = conditions.ifModifiedSince { upstream.setValue(date, forHTTPHeaderField: "If-Modified-Since") }
        }
        return upstream
    }

    // MARK: Resolving

    /// Handles a full response (or failure) from the origin for a fetch: stores it when the
    /// policy allows, replaces or drops what was stored, and falls back to a stale entry when the
    /// origin failed and the policy allows it.
    private func resolveFetch(
        _ result: Result<UpstreamResponse, Error>,
        request: CacheRequest,
        fallback: CacheEntry?,
        forward: CacheStatus.Forward,
        trip: Trip,
        outcome: CacheEvent.Outcome,
        listener: ExchangeListener
    ) -> Resolution {
        let now = configuration.now()
        if case .success(let upstream) = result, let target = listener.reportedRedirectTarget {
            // The app's session asks its delegate and loads the target itself.
            var trip = trip
            trip.originStatus = upstream.status
            trip.bytes += upstream.body.count
            return Resolution(answer: .redirect(upstream.response, to: target), outcome: outcome, trip: trip)
        }
        switch result {
        case .failure(let error):
            if let fallback, (error as? URLError)?.code != .cancelled {
                if policy(for: request).mayServeAfterError(fallback, request: request, now: now, disconnected: true) {
                    return staleAfterError(fallback, for: request, originStatus: nil, now: now, trip: trip)
                }
                if policy(for: request).answersGatewayTimeoutWhenUnvalidated(fallback), let url = request.urlRequest.url {
                    return Resolution(answer: gatewayTimeout(for: url, forward: forward), outcome: .failed, trip: trip)
                }
            }
            return Resolution(answer: .failure(error), outcome: .failed, trip: trip)
        case .success(let upstream):
            var trip = trip
            trip.originStatus = upstream.status
            trip.bytes += upstream.body.count
            recordTransfer(upstream)
            if upstream.status >= 500, let fallback, policy(for: request).mayServeAfterError(fallback, request: request, now: now) {
                return staleAfterError(fallback, for: request, originStatus: upstream.status, now: now, trip: trip)
            }
            let decision = store(upstream, for: request,
                                 decision: storageDecision(for: upstream.head, request: request, bodyBytes: upstream.body.count))
            if case .doNotStore = decision, request.byteRange == nil, upstream.status < 500,
               CachingPolicy.responseDirectives(upstream.headers).noStore {
                // Nothing of this URL can be stored: its next GETs are Foundation's for a while.
                noStoreURLs.withLock { $0.insert(request.key, at: now) }
            }
            let status = cacheStatus(forFetched: upstream.head, decision: decision, forward: forward, now: now)
            let answer = Answer.response(deliverable(upstream.head, status: status), upstream.body)
            return Resolution(answer: answer, outcome: outcome, trip: trip,
                              isPrivateToStarter: upstream.head.answeredWithCredential)
        }
    }

    /// The origin's answer to a forwarded request, handed on as it is and never stored.
    private func resolveForward(_ result: Result<UpstreamResponse, Error>, trip: Trip,
                                forward: CacheStatus.Forward = .request) -> Resolution {
        switch result {
        case .failure(let error):
            return Resolution(answer: .failure(error), outcome: .failed, trip: trip)
        case .success(let upstream):
            var trip = trip
            trip.originStatus = upstream.status
            trip.bytes += upstream.body.count
            let status = CacheStatus(forward: forward, forwardStatus: upstream.status)
            return Resolution(answer: .response(deliverable(upstream.head, status: status), upstream.body),
                              outcome: .fetched, trip: trip)
        }
    }

    /// The answer to an unsafe request, handed on and never stored. A non-error status (below
    /// 400) means the origin accepted it: what is stored for its URL is dropped, and for the
    /// `Location` and `Content-Location` of the answer when they are on the same origin (RFC
    /// 9111 §4.4). An error status or no answer at all leaves the store as it was.
    private func resolveUnsafe(_ result: Result<UpstreamResponse, Error>, request: CacheRequest, trip: Trip) -> Resolution {
        guard case .success(let upstream) = result else {
            return resolveForward(result, trip: trip, forward: .method)
        }
        if upstream.status < 400, let target = request.urlRequest.url {
            store.removeRecord(forKey: request.key)
            for name in ["Location", "Content-Location"] {
                guard let value = upstream.response.value(forHTTPHeaderField: name),
                      let url = URL(string: value, relativeTo: target)?.absoluteURL,
                      Self.isSameOrigin(url, target) else { continue }
                store.removeRecord(forKey: CacheKey.make(method: "GET", url: url))
            }
        }
        return resolveForward(result, trip: trip, forward: .method)
    }

    /// Whether two URLs share scheme, host and port (RFC 6454 origins).
    private static func isSameOrigin(_ url: URL, _ other: URL) -> Bool {
        func parts(_ url: URL) -> (String, String, Int?) {
            let scheme = url.scheme?.lowercased() ?? ""
            let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
            return (scheme, url.host?.lowercased() ?? "", url.port ?? defaultPort)
        }
        return parts(url) == parts(other)
    }

    /// Whether and how long the response `head` is stored for `request`: the policy's decision,
    /// unless the response is larger than the store's `maximumEntrySize` — by its body when it
    /// is in (`bodyBytes`), else by its `Content-Length` — and then it is delivered, not stored.
    func storageDecision(for head: UpstreamHead, request: CacheRequest, bodyBytes: Int? = nil) -> StorageDecision {
        let limit = store.maximumEntrySize
        if let bytes = bodyBytes ?? head.response.expectedContentLength.nonNegative, bytes > limit {
            return .doNotStore(reason: "\(bytes) bytes, more than the largest stored response (maximumEntrySize, \(limit) bytes)")
        }
        return policy(for: request).storageDecision(for: request, status: head.status, headers: head.headers,
                                                    requestDate: head.requestDate, responseDate: head.responseDate,
                                                    route: head.route)
    }

    /// The `Cache-Status` of a response fetched from the origin (RFC 9211): why it was
    /// forwarded, the origin's status, and whether it was stored and for how long.
    func cacheStatus(forFetched head: UpstreamHead, decision: StorageDecision, forward: CacheStatus.Forward,
                     now: Date) -> CacheStatus {
        var status = CacheStatus(forward: forward, forwardStatus: head.status)
        if case .store(let lifetime, let initialAge) = decision {
            status.stored = true
            let age = initialAge + max(0, now.timeIntervalSince(head.responseDate))
            status.timeToLive = Int((lifetime - age).rounded(.down))
        }
        return status
    }

    /// Stores what the origin sent when `decision` allows it; otherwise drops the variant the
    /// request would have matched, so an outdated copy is never served again. A `206` (which the
    /// policy lets through only for a request for one byte range) is combined with the part
    /// stored before where they describe the same representation
    /// (`CachingPolicy.partialContentToStore`).
    /// Returns the decision as carried out (a part that is not stored: `doNotStore`).
    private func store(_ upstream: UpstreamResponse, for request: CacheRequest, decision: StorageDecision) -> StorageDecision {
        guard case .store(let lifetime, let initialAge) = decision else {
            if upstream.status < 500 { removeVariant(matching: request) }
            return decision
        }
        let headers = CachingPolicy.storableHeaders(upstream.headers)
        let entry = CacheEntry(
            responseURL: upstream.response.url?.absoluteString ?? request.urlRequest.url?.absoluteString ?? "",
            statusCode: upstream.status,
            headers: headers,
            body: upstream.body,
            requestDate: upstream.requestDate,
            responseDate: upstream.responseDate,
            initialAge: initialAge,
            freshnessLifetime: lifetime,
            varyFields: CachingPolicy.varyFields(for: headers, request: request),
            credentialFingerprint: request.credentialFingerprint,
            userInfo: nil
        )
        guard entry.statusCode == 206 else {
            store.storeVariant(entry, key: request.key, memoryOnly: CachingPolicy.isKeptInMemoryOnly(headers))
            return decision
        }
        let stored = CachingPolicy.matchingVariant(in: store.peek(request.key), for: request)
        guard let part = CachingPolicy.partialContentToStore(entry, over: stored) else {
            return .doNotStore(reason: "a part that cannot be stored or adds nothing to what is stored")
        }
        store.storeVariant(part, key: request.key, memoryOnly: CachingPolicy.isKeptInMemoryOnly(headers))
        return decision
    }

    /// Drops the stored variant `request` would be answered with.
    private func removeVariant(matching request: CacheRequest) {
        store.removeVariant(forKey: request.key) { CachingPolicy.variant($0, matches: request) }
    }

    /// `entry`, stale, as the answer to `request` when the origin failed (a fallback holds the
    /// range a range request asks for, `proceed(_:range:decision:)`).
    private func staleAfterError(_ entry: CacheEntry, for request: CacheRequest, originStatus: Int?, now: Date, trip: Trip) -> Resolution {
        let status = CacheStatus(forward: .stale, forwardStatus: originStatus, stored: false,
                                 timeToLive: CacheStatus.timeToLive(of: entry, at: now), detail: "stale-if-error")
        var trip = trip
        trip.originStatus = originStatus
        let answer = storedAnswer(entry, for: request, status: status, at: now) ?? storedAnswer(entry, status: status, at: now)
        return Resolution(answer: answer, outcome: .staleAfterError, trip: trip)
    }

    /// The `504 Gateway Timeout` a cache generates when it cannot validate a response it may not
    /// serve unvalidated (RFC 9111 §5.2.2.2).
    private func gatewayTimeout(for url: URL, forward: CacheStatus.Forward) -> Answer {
        var headers = ["Content-Length": "0"]
        if configuration.addsCacheStatus {
            headers["Cache-Status"] = CacheStatus(forward: forward, detail: "origin-unreachable").headerValue
        }
        return .response(HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: headers)!, Data())
    }

    /// The origin's response as the app sees it: untouched, plus `Cache-Status` when enabled.
    func deliverable(_ head: UpstreamHead, status: CacheStatus) -> HTTPURLResponse {
        let response = head.response
        guard configuration.addsCacheStatus, let url = response.url else { return response }
        var headers = head.headers
        headers.set("Cache-Status", status.headerValue)
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers.dictionary) ?? response
    }
}

/// What the loads of one exchange say while its upstream request runs: the load that started it
/// decides redirects and answers challenges (a background exchange follows redirects and gives
/// challenges default handling), and every waiting load that takes bodies as they arrive gets
/// the response head and its body's pieces.
final class ExchangeListener: UpstreamListener {
    private let engine: CacheEngine
    private let exchange: Exchange
    private let starter: CacheEngine.Load?

    private struct State {
        /// What the request being sent is, so a response head can be judged.
        var method = "GET"
        var fallback: CacheEntry?
        var forward = CacheStatus.Forward.uriMiss
        /// A redirect reported to the app rather than followed (`RedirectHandling.report`).
        var reportedRedirectTarget: URLRequest?
        /// The loads that got the response head, and so get the body's pieces.
        var streamingTo: [LoadClient] = []
    }
    private let state = Locked(State())

    init(engine: CacheEngine, exchange: Exchange, starter: CacheEngine.Load?) {
        self.engine = engine
        self.exchange = exchange
        self.starter = starter
    }

    /// Says what the next request of the exchange is: its method, what an error may fall back
    /// to, and why it goes to the origin.
    func expect(method: String, fallback: CacheEntry?, forward: CacheStatus.Forward) {
        state.withLock { state in
            state.method = method
            state.fallback = fallback
            state.forward = forward
            state.streamingTo = []
        }
    }

    /// Where the app's session goes instead, when a redirect was reported rather than followed.
    var reportedRedirectTarget: URLRequest? { state.withLock { $0.reportedRedirectTarget } }

    func upstreamWillRedirect(_ response: HTTPURLResponse, to request: URLRequest,
                              decide: @escaping @Sendable (RedirectDecision) -> Void) {
        switch starter?.client.redirects ?? .follow {
        case .follow:
            decide(.follow)
        case .ask(let ask):
            ask(response, request) { given in decide(given.map(RedirectDecision.followAsGiven) ?? .stop) }
        case .report:
            state.withLock { $0.reportedRedirectTarget = request }
            decide(.stop)
        }
    }

    func upstreamDidReceive(_ challenge: URLAuthenticationChallenge,
                            answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard let starter else { return answer(.performDefaultHandling, nil) }
        starter.client.answer(challenge, reply: answer)
    }

    func upstreamDidReceive(_ head: UpstreamHead) -> Bool {
        let (method, fallback, forward, reported) = state.withLock { ($0.method, $0.fallback, $0.forward, $0.reportedRedirectTarget) }
        let request = exchange.request
        let now = engine.configuration.now()
        // Only a body that becomes the answer as it is: not a HEAD's, a 304's (the answer is the
        // stored body), a redirect's the app follows itself, nor an error's a stale copy replaces.
        guard method == "GET", head.status != 304, reported == nil else { return false }
        if head.status >= 500, let fallback, engine.policy(for: request).mayServeAfterError(fallback, request: request, now: now) {
            return false
        }
        var clients = exchange.waiting.map(\.waiter).filter { $0.load.client.streamsBody }
        if head.answeredWithCredential { clients = clients.filter { !$0.collapsed } }
        guard !clients.isEmpty else { return false }
        let status = engine.cacheStatus(forFetched: head, decision: engine.storageDecision(for: head, request: request),
                                        forward: forward, now: now)
        let response = engine.deliverable(head, status: status)
        state.withLock { $0.streamingTo = clients.map(\.load.client) }
        for waiter in clients { waiter.load.client.receiveHead(response) }
        return true
    }

    func upstreamDidReceive(_ data: Data) {
        for client in state.withLock({ $0.streamingTo }) { client.receiveChunk(data) }
    }
}

private extension Int64 {
    /// The value as an `Int` when it is not negative (`expectedContentLength` is -1 when unknown).
    var nonNegative: Int? { self >= 0 ? Int(clamping: self) : nil }
}
