import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The answer to one load: a response with its whole body, or an error.
enum Answer: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is immutable after creation but not declared Sendable everywhere.
    case response(HTTPURLResponse, Data)
    case failure(Error)
}

/// Receives the one answer to a load, from any thread, at most once.
protocol AnswerReceiver: Sendable {
    func receive(_ answer: Answer, outcome: CacheEvent.Outcome)
}

/// A load in progress. `cancel()` stops it: no answer is delivered afterwards, and the upstream
/// request is cancelled when no other load shares it.
final class LoadHandle: Sendable {
    private struct State {
        var isFinished = false
        var membership: (exchange: Exchange, subscriber: Int)?
    }
    private let state = Locked(State())

    /// Marks the load finished; false when it was already finished or cancelled.
    fileprivate func finish() -> Bool {
        state.withLock { state in
            guard !state.isFinished else { return false }
            state.isFinished = true
            state.membership = nil
            return true
        }
    }

    /// Records which exchange the load waits on. A load cancelled before it got here leaves the
    /// exchange at once, so an upstream request nobody waits for is cancelled.
    fileprivate func attach(to exchange: Exchange, subscriber: Int) {
        let cancelledAlready = state.withLock { state -> Bool in
            guard !state.isFinished else { return true }
            state.membership = (exchange, subscriber)
            return false
        }
        if cancelledAlready { exchange.leave(subscriber) }
    }

    func cancel() {
        let membership = state.withLock { state -> (Exchange, Int)? in
            guard !state.isFinished else { return nil }
            state.isFinished = true
            defer { state.membership = nil }
            return state.membership
        }
        if let (exchange, subscriber) = membership {
            exchange.leave(subscriber)
        }
    }
}

/// The cache's request pipeline: looks up, asks the policy, serves, revalidates, fetches and
/// stores. One engine serves one installed ``CachingConfiguration``.
///
/// Threading: `load` may be called from any thread, including inside `URLProtocol.startLoading`
/// on the session's queue; it answers fresh memory hits on the calling thread and moves
/// everything else (disk reads, upstream requests) to its own queue.
final class CacheEngine: Sendable {
    let configuration: CachingConfiguration
    let cache: CachingURLCache
    let policy: CachingPolicy
    private let upstream = UpstreamClient()
    private let exchanges = Locked<[String: Exchange]>([:])
    private let counters = Locked(CacheStatistics())
    private let offlineMode = Locked(false)
    let queue = DispatchQueue(label: "CachingProtocol.engine", attributes: .concurrent)
    private let exchangeSerial = Locked(0)
    /// Background exchanges (stale-while-revalidate) that are still running.
    let backgroundWork = DispatchGroup()

    /// Disk entries up to this size are read on the thread that asked (the session's queue, for
    /// the protocol); larger ones are read on the engine's queue so a big file never holds up
    /// other requests.
    static let inlineDiskReadLimit = 64 << 10


    init(configuration: CachingConfiguration) {
        self.configuration = configuration
        cache = configuration.cache
        policy = configuration.policy
        cache.adoptPolicy(configuration.policy, clock: configuration.now)
    }

    func shutdown() {
        upstream.shutdown()
    }

    var statistics: CacheStatistics { counters.withLock { $0 } }

    var isOffline: Bool {
        get { offlineMode.withLock { $0 } }
        set { offlineMode.withLock { $0 = newValue } }
    }

    // MARK: Loading

    /// How a load started: answered on the spot, or running.
    enum LoadStart {
        /// A fresh hit, already counted and reported: the caller hands it to the app.
        case answered(Answer)
        /// Running on the engine's queue; `receiver` will get the answer.
        case pending(LoadHandle)
    }

    /// Loads a cacheable GET (see `RequestDisposition`).
    ///
    /// Fresh hits are answered on the caller's thread, from memory or from a small disk file
    /// (reading it costs less than the hop to another thread would), and returned rather than
    /// handed to `receiver`: the caller delivers them after this function's temporaries are gone,
    /// which keeps the session queue's critical path short. Anything else moves to the engine's
    /// queue and ends at `receiver`.
    func load(_ urlRequest: URLRequest, key: String, receiver: @autoclosure () -> AnswerReceiver) -> LoadStart {
        let started = DispatchTime.now()
        let request = CacheRequest(urlRequest, key: key)
        var record = cache.memoryRecord(forKey: key)
        if record == nil, cache.diskLookupIsSmall(forKey: key, bytes: Self.inlineDiskReadLimit) {
            record = cache.record(forKey: key, memoryAlreadyCounted: true)
        }
        guard let record else {
            let handle = LoadHandle()
            let load = Load(request: request, handle: handle, receiver: receiver(), started: started)
            queue.async {
                let decision = self.decide(request, record: self.cache.record(forKey: key, memoryAlreadyCounted: true))
                self.proceed(load, decision: decision)
            }
            return .pending(handle)
        }
        let decided = decide(request, record: record)
        if case .useStored(let entry, let isStale) = decided.decision {
            let answer = storedAnswer(entry, status: .hit(entry, stale: isStale, at: decided.now))
            account(answer, key: key, outcome: isStale ? .staleHit : .hit, trip: .noNetwork, collapsed: false, started: started)
            return .answered(answer)
        }
        let handle = LoadHandle()
        let load = Load(request: request, handle: handle, receiver: receiver(), started: started)
        queue.async { self.proceed(load, decision: decided) }
        return .pending(handle)
    }

    /// A request on its way through the pipeline.
    struct Load: Sendable {
        let request: CacheRequest
        let handle: LoadHandle
        let receiver: AnswerReceiver
        let started: DispatchTime
    }

    /// The decision with what led to it.
    struct Decided: Sendable {
        let decision: CacheDecision
        /// Whether anything at all was stored under the key (for `fwd=uri-miss` vs `vary-miss`).
        let keyWasStored: Bool
        let now: Date
    }

    private func decide(_ request: CacheRequest, record: CacheRecord?) -> Decided {
        let now = configuration.now()
        let variant = CachingPolicy.matchingVariant(in: record, for: request)
        return Decided(
            decision: policy.decision(for: request, stored: variant, now: now, offline: isOffline),
            keyWasStored: !(record?.variants.isEmpty ?? true),
            now: now
        )
    }

    private func proceed(_ load: Load, decision decided: Decided) {
        let now = decided.now
        switch decided.decision {
        case .useStored(let entry, let isStale):
            let answer = storedAnswer(entry, status: .hit(entry, stale: isStale, at: now))
            deliver(answer, to: load, outcome: isStale ? .staleHit : .hit, trip: .noNetwork)
        case .useStoredAndRevalidate(let entry, let conditions):
            var status = CacheStatus.hit(entry, stale: true, at: now)
            status.detail = "stale-while-revalidate"
            // Counted before the app gets its answer, so `backgroundWork` covers the revalidation
            // from the moment the stale answer exists.
            backgroundWork.enter()
            queue.async {
                self.startExchange(.revalidate(entry, conditions), for: load.request, joining: nil)
                self.backgroundWork.leave()
            }
            deliver(storedAnswer(entry, status: status), to: load, outcome: .staleHit, trip: .noNetwork)
        case .revalidate(let entry, let conditions):
            startExchange(.revalidate(entry, conditions), for: load.request, joining: load)
        case .fetch(let fallback):
            let forward: CacheStatus.Forward
            switch load.request.mode {
            case .reload, .reloadFromOrigin: forward = .request
            default: forward = load.request.directives.noCache ? .request : (decided.keyWasStored ? .varyMiss : .uriMiss)
            }
            startExchange(.fetch(fallback: fallback, forward: forward), for: load.request, joining: load)
        case .unavailable:
            deliver(unavailableAnswer(for: load.request), to: load, outcome: .notInCache, trip: .noNetwork)
        }
    }

    /// `only-if-cached` gets the 504 RFC 9111 §5.2.1.7 prescribes; `.returnCacheDataDontLoad`
    /// and offline mode get an error, as Foundation gives for a cache miss in that mode.
    private func unavailableAnswer(for request: CacheRequest) -> Answer {
        if request.directives.onlyIfCached, request.mode == .normal, !isOffline, let url = request.urlRequest.url {
            var headers = ["Content-Length": "0"]
            if configuration.addsCacheStatus {
                headers["Cache-Status"] = CacheStatus(forward: .uriMiss, detail: "only-if-cached").headerValue
            }
            let response = HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: headers)!
            return .response(response, Data())
        }
        let reason = CachingError(.notInCache, isOffline ? "offline mode and nothing stored for \(request.key)"
                                                         : "nothing usable stored for \(request.key)")
        var info: [String: Any] = [NSUnderlyingErrorKey: reason, NSLocalizedDescriptionKey: reason.description]
        if let url = request.urlRequest.url { info[NSURLErrorFailingURLErrorKey] = url }
        return .failure(URLError(.resourceUnavailable, userInfo: info))
    }

    // MARK: Exchanges

    /// Starts the upstream work `kind` for `request`, or joins an identical exchange already
    /// running. `load` nil starts a background exchange nobody waits for.
    func startExchange(_ kind: Exchange.Kind, for request: CacheRequest, joining load: Load?) {
        let id = configuration.collapsesRequests
            ? kind.collapseKey(for: request)
            : "\(exchangeSerial.withLock { $0 += 1; return $0 })"
        var created: Exchange?
        let subscriber: (Exchange, Int)? = exchanges.withLock { table in
            if let existing = table[id], let load, let number = existing.join(load, collapsed: true) {
                return (existing, number)
            }
            if load == nil, table[id] != nil { return nil }   // a background revalidation already runs
            let exchange = Exchange(id: id, kind: kind, request: request, engine: self, isBackground: load == nil)
            table[id] = exchange
            created = exchange
            guard let load else { return nil }
            return exchange.join(load, collapsed: false).map { (exchange, $0) }
        }
        if let (exchange, number) = subscriber {
            load?.handle.attach(to: exchange, subscriber: number)
        }
        if let created {
            queue.async { created.run() }
        }
    }

    fileprivate func exchangeDidEnd(_ exchange: Exchange) {
        exchanges.withLock { table in
            if table[exchange.id] === exchange { table[exchange.id] = nil }
        }
    }

    /// Cancels an upstream task from the engine's queue. Never directly: `stopLoading` runs on
    /// the app session's queue, and on Linux every session's queue targets one serial queue, so
    /// cancelling (a `sync` onto the upstream session's queue) from there deadlocks.
    fileprivate func cancelUpstream(_ task: UpstreamTask) {
        queue.async { task.cancel() }
    }

    /// Sends `request` upstream on the engine's queue and calls back with the whole response.
    fileprivate func send(_ request: URLRequest, completion: @escaping @Sendable (Result<UpstreamResponse, Error>) -> Void) -> UpstreamTask {
        upstream.send(request, clock: configuration.now, completion: completion)
    }

    // MARK: Results

    /// The upstream request for `request`: the app's request with its headers, timeout and
    /// method, told not to use Foundation's cache, with `conditions` added.
    fileprivate func upstreamRequest(for request: CacheRequest, method: String, conditions: RevalidationConditions?) -> URLRequest {
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

    /// Handles a full response (or failure) from the origin for a fetch: stores it when the
    /// policy allows, replaces or drops what was stored, and falls back to a stale entry when the
    /// origin failed and the policy allows it.
    fileprivate func resolveFetch(
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
            if let fallback, !Self.isCancellation(error), policy.mayServeAfterError(fallback, request: request, now: now) {
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
                status.timeToLive = Int(stored.timeToLive(at: now).rounded(.down))
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
        // A temporary redirect may point elsewhere next time: the final response is not stored
        // under the original URL then.
        let temporaryRedirect = upstream.redirectStatuses.contains { $0 == 302 || $0 == 303 || $0 == 307 }
        let decision = temporaryRedirect
            ? .doNotStore(reason: "temporary redirect")
            : policy.storageDecision(for: request, status: upstream.status, headers: headers,
                                     requestDate: upstream.requestDate, responseDate: upstream.responseDate)
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
        cache.storeVariant(entry, key: request.key)
        return entry
    }

    private func removeVariant(matching request: CacheRequest) {
        guard var record = cache.record(forKey: request.key, counting: false),
              let variant = CachingPolicy.matchingVariant(in: record, for: request) else { return }
        record.variants.removeAll { $0 == variant }
        if record.variants.isEmpty {
            cache.removeRecord(forKey: request.key)
        } else {
            cache.store(record)
        }
    }

    /// Updates `entry` with a 304 (or a matching HEAD 200) per RFC 9111 §4.3.4: its headers
    /// replace the stored ones (except those describing the body or the connection), its dates
    /// become the entry's dates, and freshness is computed again. Stores the result, or drops the
    /// entry when the new headers forbid storing; returns what to serve either way.
    fileprivate func freshen(_ entry: CacheEntry, with upstream: UpstreamResponse, request: CacheRequest) -> CacheEntry {
        var headers = entry.headers
        for field in upstream.headers.fields where !Self.headersNotUpdatedBy304.contains(where: field.name.isEqualIgnoringASCIICase) {
            headers.set(field.name, field.value)
        }
        var updated = entry
        updated.memo = EntryMemo()
        updated.headers = headers
        updated.requestDate = upstream.requestDate
        updated.responseDate = upstream.responseDate
        switch policy.storageDecision(for: request, status: entry.statusCode, headers: headers,
                                      requestDate: upstream.requestDate, responseDate: upstream.responseDate) {
        case .store(let lifetime, let initialAge):
            updated.freshnessLifetime = lifetime
            updated.initialAge = initialAge
            cache.storeVariant(updated, key: request.key)
        case .doNotStore:
            updated.freshnessLifetime = 0
            updated.initialAge = CachingPolicy.correctedInitialAge(
                headers: headers, date: headers["Date"].flatMap(HTTPDate.parse),
                requestDate: upstream.requestDate, responseDate: upstream.responseDate)
            removeVariant(matching: request)
        }
        return updated
    }

    /// Fields a 304 or HEAD response must not overwrite: they describe its own (empty) body or
    /// its connection, not the stored representation.
    private static let headersNotUpdatedBy304 = ["Content-Length", "Content-Encoding", "Transfer-Encoding", "Content-Range",
                                                 "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade"]

    /// Whether a HEAD response describes the stored representation (RFC 9111 §4.3.5): the same
    /// strong ETag, or without ETags the same Last-Modified, and no different Content-Length.
    fileprivate static func headResponse(_ head: HTTPHeaders, describes entry: CacheEntry) -> Bool {
        if let length = head["Content-Length"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
           entry.headers["Content-Encoding"] == nil, length != entry.body.count {
            return false
        }
        if let etag = head["ETag"], let storedTag = entry.headers["ETag"] {
            return !etag.hasPrefix("W/") && etag == storedTag
        }
        if head["ETag"] == nil, entry.headers["ETag"] == nil,
           let modified = head["Last-Modified"], let storedModified = entry.headers["Last-Modified"] {
            return modified == storedModified
        }
        return false
    }

    /// Whether a 304 names a different representation than the one stored (its ETag differs),
    /// in which case the stored body must not be served (RFC 9111 §4.3.4).
    fileprivate static func notModified(_ headers: HTTPHeaders, contradicts entry: CacheEntry) -> Bool {
        guard let etag = headers["ETag"], let storedTag = entry.headers["ETag"] else { return false }
        return weakTag(etag) != weakTag(storedTag)
    }

    private static func weakTag(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }

    private static func isCancellation(_ error: Error) -> Bool {
        (error as? URLError)?.code == .cancelled
    }

    fileprivate func staleAfterError(_ entry: CacheEntry, originStatus: Int?, now: Date, trip: Trip) -> Resolution {
        let status = CacheStatus(forward: .stale, forwardStatus: originStatus, stored: false,
                                 timeToLive: Int(entry.timeToLive(at: now).rounded(.down)), detail: "stale-if-error")
        var trip = trip
        trip.originStatus = originStatus
        return Resolution(answer: storedAnswer(entry, status: status), outcome: .staleAfterError, trip: trip)
    }

    // MARK: Answers

    /// The stored response as the app sees it: the stored status and headers (the origin's, as
    /// the contract promises: no synthesised `Age`), plus `Cache-Status`.
    ///
    /// Building an `HTTPURLResponse` is the largest cost of a hit on Linux (it re-capitalises
    /// every header name and parses Content-Type: about 16 µs for a handful of fields), so the
    /// response built from an entry is kept with the entry and reused while the `Cache-Status`
    /// is the same: a fresh hit's is always `hit`, so an entry builds it once.
    func storedAnswer(_ entry: CacheEntry, status: CacheStatus) -> Answer {
        let status = configuration.addsCacheStatus ? status : nil
        if let built = entry.memo.answer.withLock({ $0 }) as? BuiltResponse, built.describes(entry, cacheStatus: status) {
            return .response(built.response, entry.body)
        }
        var headers = entry.headers
        if let status {
            headers.set("Cache-Status", status.headerValue)
        }
        let url = URL(string: entry.responseURL) ?? URL(string: "about:blank")!
        let response = HTTPURLResponse(url: url, statusCode: entry.statusCode, httpVersion: "HTTP/1.1",
                                       headerFields: headers.dictionary)!
        let built = BuiltResponse(entry: entry, cacheStatus: status, response: response)
        entry.memo.answer.withLock { $0 = built }
        return .response(response, entry.body)
    }

    /// The origin's response as the app sees it: untouched, plus `Cache-Status` when enabled.
    private func deliverable(_ response: HTTPURLResponse, status: CacheStatus) -> HTTPURLResponse {
        guard configuration.addsCacheStatus, let url = response.url else { return response }
        var headers = HTTPHeaders(response.allHeaderFields)
        headers.set("Cache-Status", status.headerValue)
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers.dictionary) ?? response
    }

    /// What went over the wire for one request, for its event.
    struct Trip: Sendable {
        var methods: [String] = []
        var originStatus: Int?
        var bytes = 0

        static let noNetwork = Trip()
    }

    /// What an exchange hands to every load that waited on it.
    struct Resolution: Sendable {
        let answer: Answer
        let outcome: CacheEvent.Outcome
        let trip: Trip
    }

    fileprivate func deliver(_ answer: Answer, to load: Load, outcome: CacheEvent.Outcome, trip: Trip, collapsed: Bool = false) {
        guard load.handle.finish() else { return }
        account(answer, key: load.request.key, outcome: outcome, trip: trip, collapsed: collapsed, started: load.started)
        load.receiver.receive(answer, outcome: outcome)
    }

    /// Counts an answer and reports it to the observer. Called before the app gets the answer,
    /// so statistics read after a response always include it.
    private func account(_ answer: Answer, key: String, outcome: CacheEvent.Outcome, trip: Trip, collapsed: Bool, started: DispatchTime) {
        var delivered = 0
        if case .response(_, let body) = answer { delivered = body.count }
        counters.withLock { counters in
            switch outcome {
            case .hit: counters.hits += 1
            case .staleHit: counters.staleHits += 1
            case .revalidatedNotModified: counters.revalidations += 1
            case .revalidatedChanged: counters.changed += 1
            case .fetched: counters.misses += 1
            case .staleAfterError: counters.staleServedAfterError += 1
            case .notInCache, .failed: counters.failures += 1
            }
            if collapsed { counters.collapsed += 1 }
            counters.upstreamBytes += collapsed ? 0 : trip.bytes
            counters.deliveredBytes += delivered
        }
        guard let observer = configuration.observer else { return }
        observer(CacheEvent(
            key: key,
            outcome: outcome,
            originStatus: trip.originStatus,
            upstreamMethods: trip.methods,
            upstreamBytes: trip.bytes,
            deliveredBytes: delivered,
            collapsed: collapsed,
            duration: Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        ))
    }

    /// Feeds the bandwidth estimate: an exponentially weighted average of transfers of 16 KB or
    /// more (smaller ones measure latency rather than bandwidth).
    private func recordTransfer(_ upstream: UpstreamResponse) {
        guard upstream.body.count >= 16_384, upstream.transferSeconds > 0 else { return }
        let sample = Double(upstream.body.count) / upstream.transferSeconds
        counters.withLock { counters in
            counters.estimatedBandwidth = counters.estimatedBandwidth.map { $0 * 0.7 + sample * 0.3 } ?? sample
        }
    }
}

/// A response built for a stored entry, with what it was built from. A class, so that taking it
/// out of the entry's slot on every hit is one retain rather than a copy of every field.
final class BuiltResponse: @unchecked Sendable {
    // @unchecked: every property is a constant; HTTPURLResponse is immutable after creation but
    // not declared Sendable everywhere.
    let responseDate: Date
    let initialAge: TimeInterval
    let freshnessLifetime: TimeInterval
    let statusCode: Int
    let varyFields: [CacheEntry.VaryField]
    let credentialFingerprint: UInt64?
    let cacheStatus: CacheStatus?
    let response: HTTPURLResponse

    init(entry: CacheEntry, cacheStatus: CacheStatus?, response: HTTPURLResponse) {
        responseDate = entry.responseDate
        initialAge = entry.initialAge
        freshnessLifetime = entry.freshnessLifetime
        statusCode = entry.statusCode
        varyFields = entry.varyFields
        credentialFingerprint = entry.credentialFingerprint
        self.cacheStatus = cacheStatus
        self.response = response
    }

    /// Whether `response` is what would be built for `entry` now. A freshened copy of an entry
    /// shares its slot but has a new `responseDate`, so a built response never outlives what it
    /// was built from.
    func describes(_ entry: CacheEntry, cacheStatus: CacheStatus?) -> Bool {
        self.cacheStatus == cacheStatus && responseDate == entry.responseDate
            && initialAge == entry.initialAge && freshnessLifetime == entry.freshnessLifetime
            && statusCode == entry.statusCode && credentialFingerprint == entry.credentialFingerprint
            && varyFields == entry.varyFields
    }
}

/// One upstream operation (a fetch, or a revalidation with its follow-up GET) and the loads
/// waiting for it. Identical concurrent loads share one exchange, so the origin sees one request.
final class Exchange: Sendable {
    enum Kind: Sendable {
        case fetch(fallback: CacheEntry?, forward: CacheStatus.Forward)
        case revalidate(CacheEntry, RevalidationConditions)

        /// Loads with equal keys may share an exchange: same operation, same URL, same
        /// credentials and the same request headers (so the same variant would be selected).
        func collapseKey(for request: CacheRequest) -> String {
            let headers = (request.urlRequest.allHTTPHeaderFields ?? [:])
                .map { "\($0.key.lowercased()):\($0.value)" }.sorted().joined(separator: "\n")
            let operation: String
            switch self {
            case .fetch: operation = "fetch"
            case .revalidate(_, let conditions): operation = "revalidate \(conditions.ifNoneMatch ?? "") \(conditions.ifModifiedSince ?? "")"
            }
            return "\(operation)\n\(request.key)\n\(request.mode)\n\(StableHash.hash(headers))"
        }
    }

    private struct State {
        var loads: [Int: (load: CacheEngine.Load, collapsed: Bool)] = [:]
        var nextNumber = 0
        var isFinished = false
        var isAbandoned = false
        var task: UpstreamTask?
    }

    let id: String
    let kind: Kind
    private let request: CacheRequest
    private let engine: CacheEngine
    /// Started by the engine with nobody waiting (stale-while-revalidate); counted in
    /// `engine.backgroundWork` until it finishes.
    private let isBackground: Bool
    private let state = Locked(State())

    init(id: String, kind: Kind, request: CacheRequest, engine: CacheEngine, isBackground: Bool) {
        self.id = id
        self.kind = kind
        self.request = request
        self.engine = engine
        self.isBackground = isBackground
        if isBackground { engine.backgroundWork.enter() }
    }

    /// Adds a waiting load; nil when the exchange already finished or was abandoned.
    func join(_ load: CacheEngine.Load, collapsed: Bool) -> Int? {
        state.withLock { state in
            guard !state.isFinished, !state.isAbandoned else { return nil }
            state.nextNumber += 1
            state.loads[state.nextNumber] = (load, collapsed)
            return state.nextNumber
        }
    }

    /// Removes a waiting load. When it was the last, the exchange is abandoned: its upstream
    /// request is cancelled and later loads start a new one.
    func leave(_ number: Int) {
        let (abandoned, task) = state.withLock { state -> (Bool, UpstreamTask?) in
            state.loads[number] = nil
            guard state.loads.isEmpty, !state.isFinished else { return (false, nil) }
            state.isAbandoned = true
            return (true, state.task)
        }
        guard abandoned else { return }
        engine.exchangeDidEnd(self)
        if let task { engine.cancelUpstream(task) }
    }

    /// Runs the exchange on the engine's queue.
    func run() {
        switch kind {
        case .fetch(let fallback, let forward):
            let trip = CacheEngine.Trip(methods: ["GET"])
            send(engine.upstreamRequest(for: request, method: "GET", conditions: nil)) { [self] result in
                finish(engine.resolveFetch(result, request: request, fallback: fallback, forward: forward,
                                           trip: trip, outcome: .fetched))
            }
        case .revalidate(let entry, let conditions):
            let method = engine.configuration.revalidation == .head ? "HEAD" : "GET"
            let trip = CacheEngine.Trip(methods: [method])
            send(engine.upstreamRequest(for: request, method: method, conditions: conditions)) { [self] result in
                handleRevalidation(result, entry: entry, trip: trip)
            }
        }
    }

    private func handleRevalidation(_ result: Result<UpstreamResponse, Error>, entry: CacheEntry, trip: CacheEngine.Trip) {
        guard case .success(let upstream) = result else {
            // No answer at all: a stale fallback if the policy allows, else the error.
            return finish(engine.resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                              trip: trip, outcome: .revalidatedChanged))
        }
        let isHead = trip.methods.last == "HEAD"
        let headers = upstream.headers
        let confirmed = (upstream.status == 304 && !CacheEngine.notModified(headers, contradicts: entry))
            || (isHead && upstream.status == 200 && CacheEngine.headResponse(headers, describes: entry))
        var trip = trip
        if confirmed {
            trip.originStatus = upstream.status
            let now = engine.configuration.now()
            let updated = engine.freshen(entry, with: upstream, request: request)
            let status = CacheStatus(forward: .stale, forwardStatus: upstream.status, stored: true,
                                     timeToLive: Int(updated.timeToLive(at: now).rounded(.down)))
            return finish(CacheEngine.Resolution(answer: engine.storedAnswer(updated, status: status),
                                                 outcome: .revalidatedNotModified, trip: trip))
        }
        if !isHead, upstream.status != 304 {
            // A conditional GET that was not confirmed carries the new response itself.
            return finish(engine.resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                              trip: trip, outcome: .revalidatedChanged))
        }
        trip.originStatus = upstream.status
        let now = engine.configuration.now()
        if upstream.status >= 500, engine.policy.mayServeAfterError(entry, request: request, now: now) {
            return finish(engine.staleAfterError(entry, originStatus: upstream.status, now: now, trip: trip))
        }
        // Changed (or the HEAD was refused, or a 304 named another representation): fetch the
        // body with an unconditional GET, which replaces the stored response.
        trip.methods.append("GET")
        send(engine.upstreamRequest(for: request, method: "GET", conditions: nil)) { [self, trip] result in
            finish(engine.resolveFetch(result, request: request, fallback: entry, forward: .stale,
                                       trip: trip, outcome: .revalidatedChanged))
        }
    }

    /// Sends one upstream request unless every waiting load went away meanwhile.
    private func send(_ request: URLRequest, completion: @escaping @Sendable (Result<UpstreamResponse, Error>) -> Void) {
        let proceed = state.withLock { !$0.isAbandoned }
        guard proceed else { return finish(nil) }
        let task = engine.send(request, completion: completion)
        let abandoned = state.withLock { state -> Bool in
            state.task = task
            return state.isAbandoned
        }
        if abandoned { engine.cancelUpstream(task) }
    }

    /// Hands the resolution to every waiting load and retires the exchange.
    private func finish(_ resolution: CacheEngine.Resolution?) {
        engine.exchangeDidEnd(self)
        let loads = state.withLock { state -> [(load: CacheEngine.Load, collapsed: Bool)]? in
            guard !state.isFinished else { return nil }
            state.isFinished = true
            state.task = nil
            defer { state.loads = [:] }
            return state.loads.sorted { $0.key < $1.key }.map(\.value)
        }
        guard let loads else { return }
        if isBackground { engine.backgroundWork.leave() }
        guard let resolution else { return }
        for (load, collapsed) in loads {
            engine.deliver(resolution.answer, to: load, outcome: resolution.outcome, trip: resolution.trip, collapsed: collapsed)
        }
    }
}
