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

    /// Starts the upstream work `kind` for `request`, or joins an identical exchange already
    /// running. `load` nil starts a background exchange nobody waits for.
    func startExchange(_ kind: Exchange.Kind, for request: CacheRequest, joining load: Load?) {
        let id = configuration.collapsesRequests
            ? kind.collapseKey(for: request)
            : "\(exchangeSerial.withLock { $0 += 1; return $0 })"
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
            queue.async { self.run(created) }
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
    /// resolution (nobody waits any more) it only retires it.
    private func finish(_ exchange: Exchange, with resolution: Resolution?) {
        retire(exchange)
        guard case .deliver(let waiters) = exchange.upstreamFinished() else { return }
        if exchange.isBackground { backgroundWork.leave() }
        guard let resolution else { return }
        for waiter in waiters {
            deliver(resolution.answer, to: waiter.load, outcome: resolution.outcome, trip: resolution.trip,
                    collapsed: waiter.collapsed)
        }
    }

    // MARK: Running

    /// Runs the exchange on the engine's queue: a fetch, or a revalidation (HEAD or conditional
    /// GET, per `CachingConfiguration.revalidation`).
    private func run(_ exchange: Exchange) {
        let request = exchange.request
        switch exchange.kind {
        case .fetch(let fallback, let forward):
            let trip = Trip(methods: ["GET"])
            send(upstreamRequest(for: request, method: "GET", conditions: nil), for: exchange) { [self] result in
                finish(exchange, with: resolveFetch(result, request: request, fallback: fallback, forward: forward,
                                                    trip: trip, outcome: .fetched))
            }
        case .revalidate(let entry, let conditions):
            let method = configuration.revalidation == .head ? "HEAD" : "GET"
            let trip = Trip(methods: [method])
            send(upstreamRequest(for: request, method: method, conditions: conditions), for: exchange) { [self] result in
                handleRevalidation(result, of: entry, in: exchange, trip: trip)
            }
        }
    }

    /// Judges a revalidation's answer with the policy (`revalidationOutcome`) and acts on it.
    private func handleRevalidation(_ result: Result<UpstreamResponse, Error>, of entry: CacheEntry,
                                    in exchange: Exchange, trip: Trip) {
        let request = exchange.request
        guard case .success(let upstream) = result else {
            // No answer at all: a stale fallback if the policy allows, else the error.
            return finish(exchange, with: resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                                       trip: trip, outcome: .revalidatedChanged))
        }
        let now = configuration.now()
        let outcome = policy.revalidationOutcome(
            stored: entry, request: request, method: trip.methods.last ?? "GET", status: upstream.status,
            headers: upstream.headers, requestDate: upstream.requestDate, responseDate: upstream.responseDate, now: now)
        var trip = trip
        switch outcome {
        case .notModified(let updated, let mayStore):
            trip.originStatus = upstream.status
            if mayStore {
                store.storeVariant(updated, key: request.key)
            } else {
                removeVariant(matching: request)
            }
            let status = CacheStatus(forward: .stale, forwardStatus: upstream.status, stored: true,
                                     timeToLive: CacheStatus.timeToLive(of: updated, at: now))
            finish(exchange, with: Resolution(answer: storedAnswer(updated, status: status),
                                              outcome: .revalidatedNotModified, trip: trip))
        case .changed(bodyIncluded: true):
            finish(exchange, with: resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                                trip: trip, outcome: .revalidatedChanged))
        case .serverError:
            trip.bytes += upstream.body.count
            recordTransfer(upstream)
            finish(exchange, with: staleAfterError(entry, originStatus: upstream.status, now: now, trip: trip))
        case .changed(bodyIncluded: false):
            // Changed (or the HEAD was refused, or a 304 named another representation): fetch the
            // body with an unconditional GET, which replaces the stored response.
            trip.originStatus = upstream.status
            trip.methods.append("GET")
            send(upstreamRequest(for: request, method: "GET", conditions: nil), for: exchange) { [self, trip] result in
                finish(exchange, with: resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                                    trip: trip, outcome: .revalidatedChanged))
            }
        }
    }

    /// Sends one upstream request for `exchange`, unless every waiting load went away meanwhile
    /// (then the exchange finishes with nothing to hand out).
    private func send(_ request: URLRequest, for exchange: Exchange,
                      completion: @escaping @Sendable (Result<UpstreamResponse, Error>) -> Void) {
        guard case .send = exchange.prepareToSend() else { return finish(exchange, with: nil) }
        let task = upstream.send(request, clock: configuration.now, completion: completion)
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
        outcome: CacheEvent.Outcome
    ) -> Resolution {
        let now = configuration.now()
        switch result {
        case .failure(let error):
            if let fallback, (error as? URLError)?.code != .cancelled, policy.mayServeAfterError(fallback, request: request, now: now) {
                return staleAfterError(fallback, originStatus: nil, now: now, trip: trip)
            }
            return Resolution(answer: .failure(error), outcome: .failed, trip: trip)
        case .success(let upstream):
            var trip = trip
            trip.originStatus = upstream.status
            trip.bytes += upstream.body.count
            recordTransfer(upstream)
            if upstream.status >= 500, let fallback, policy.mayServeAfterError(fallback, request: request, now: now) {
                return staleAfterError(fallback, originStatus: upstream.status, now: now, trip: trip)
            }
            let stored = store(upstream, for: request)
            var status = CacheStatus(forward: forward, forwardStatus: upstream.status, stored: stored != nil)
            if let stored {
                status.timeToLive = CacheStatus.timeToLive(of: stored, at: now)
            }
            let answer = Answer.response(deliverable(upstream.response, status: status), upstream.body)
            return Resolution(answer: answer, outcome: outcome, trip: trip)
        }
    }

    /// Stores what the origin sent when the policy allows it; otherwise drops the variant the
    /// request would have matched, so an outdated copy is never served again. Returns the entry
    /// stored.
    private func store(_ upstream: UpstreamResponse, for request: CacheRequest) -> CacheEntry? {
        let headers = upstream.headers
        let decision = policy.storageDecision(for: request, status: upstream.status, headers: headers,
                                              requestDate: upstream.requestDate, responseDate: upstream.responseDate,
                                              redirectStatuses: upstream.redirectStatuses)
        guard case .store(let lifetime, let initialAge) = decision else {
            if upstream.status < 500 { removeVariant(matching: request) }
            return nil
        }
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
        store.storeVariant(entry, key: request.key)
        return entry
    }

    /// Drops the stored variant `request` would be answered with.
    private func removeVariant(matching request: CacheRequest) {
        store.removeVariant(forKey: request.key) { CachingPolicy.variant($0, matches: request) }
    }

    private func staleAfterError(_ entry: CacheEntry, originStatus: Int?, now: Date, trip: Trip) -> Resolution {
        let status = CacheStatus(forward: .stale, forwardStatus: originStatus, stored: false,
                                 timeToLive: CacheStatus.timeToLive(of: entry, at: now), detail: "stale-if-error")
        var trip = trip
        trip.originStatus = originStatus
        return Resolution(answer: storedAnswer(entry, status: status), outcome: .staleAfterError, trip: trip)
    }

    /// The origin's response as the app sees it: untouched, plus `Cache-Status` when enabled.
    private func deliverable(_ response: HTTPURLResponse, status: CacheStatus) -> HTTPURLResponse {
        guard configuration.addsCacheStatus, let url = response.url else { return response }
        var headers = HTTPHeaders(response.allHeaderFields)
        headers.set("Cache-Status", status.headerValue)
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers.dictionary) ?? response
    }
}
