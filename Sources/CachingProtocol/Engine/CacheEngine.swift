import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cache's request pipeline: looks up, asks the policy, serves, and hands everything that
/// needs the origin to an exchange (`CacheEngine+Upstream.swift`). One engine serves one
/// installed ``CachingConfiguration``.
///
/// Threading: `load` may be called from any thread, including inside `URLProtocol.startLoading`
/// on the session's queue; it answers fresh hits from memory or a small disk file on the
/// calling thread and moves everything else (larger disk reads, upstream requests) to its own
/// queue.
final class CacheEngine: Sendable {
    let configuration: CachingConfiguration
    let store: any RecordStore
    let policy: CachingPolicy
    /// Which protocol classes the upstream sessions leave out (the caching protocol's).
    private let isCachingProtocol: @Sendable (AnyClass) -> Bool
    /// One upstream session per app session settings, made on first use.
    private let upstreams = Locked<[SessionSettings: UpstreamClient]>([:])
    let exchanges = Locked<[Exchange.ID: Exchange]>([:])
    private let counters = Locked(CacheStatistics())
    /// The configuration's offline switch (`CachingConfiguration.isOffline`).
    private let offlineMode: Locked<Bool>
    /// The configuration's rules, tried in order for every request.
    let rules: [CachingRule]
    let queue = DispatchQueue(label: "CachingProtocol.engine", attributes: .concurrent)
    let exchangeSerial = Locked(0)
    /// Background exchanges (stale-while-revalidate) that are still running.
    let backgroundWork = DispatchGroup()
    /// URLs whose last response said `no-store`, left to Foundation for a while (`passesBy`).
    let noStoreURLs = Locked(NoStoreURLs())

    /// An engine for `configuration` whose upstream sessions never consult the protocol classes
    /// `isCachingProtocol` picks.
    init(configuration: CachingConfiguration, leavingOut isCachingProtocol: @escaping @Sendable (AnyClass) -> Bool) {
        self.configuration = configuration
        self.isCachingProtocol = isCachingProtocol
        store = configuration.cache.store
        policy = configuration.policy
        rules = configuration.rules
        offlineMode = configuration.identity.offline
        configuration.cache.use(policy: configuration.policy, clock: configuration.now)
    }

    /// The upstream session for app sessions with `settings`.
    func upstream(for settings: SessionSettings) -> UpstreamClient {
        upstreams.withLock { upstreams in
            if let existing = upstreams[settings] { return existing }
            let made = UpstreamClient(configuration: settings.upstreamConfiguration(leavingOut: isCachingProtocol))
            upstreams[settings] = made
            return made
        }
    }

    /// Lets running transfers finish, then releases the upstream sessions; a later load makes
    /// new ones (an engine shared by several sessions may be unregistered from one of them).
    func shutdown() {
        let released = upstreams.withLock { upstreams in
            defer { upstreams = [:] }
            return Array(upstreams.values)
        }
        for upstream in released { upstream.shutdown() }
    }

    /// Whether a GET `request` is left to Foundation because its URL's last response through
    /// the layer said `no-store` less than `NoStoreURLs.lifetime` ago: nothing of it could be
    /// stored, so the layer would only add a miss's cost (and buffer its body on Linux). Never in
    /// offline mode, where every GET must be answered from the cache or fail. Runs in `canInit`
    /// for every GET: with no such URL learned it costs one lock and builds no key.
    func passesBy(_ request: URLRequest) -> Bool {
        guard !noStoreURLs.withLock({ $0.isEmpty }), !isOffline, let key = CacheKey.make(for: request) else { return false }
        let now = configuration.now()
        return noStoreURLs.withLock { $0.contains(key, at: now) }
    }

    /// Whether a rule says the protocol must leave `request` to Foundation.
    func bypasses(_ request: URLRequest) -> Bool {
        guard !rules.isEmpty, case .bypass = rules.action(for: request) else { return false }
        return true
    }

    /// The policy that judges `request`: the first matching rule's, or the configuration's.
    func policy(for request: CacheRequest) -> CachingPolicy {
        guard !rules.isEmpty else { return policy }
        switch rules.action(for: request.urlRequest) {
        case .policy(let rulePolicy):
            return rulePolicy
        case .freshFor(let seconds):
            var fixed = policy
            fixed.fixedLifetime = seconds
            return fixed
        case .bypass, nil:
            return policy
        }
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

    /// A request on its way through the pipeline.
    struct Load: Sendable {
        let request: CacheRequest
        /// The app session it comes from.
        let settings: SessionSettings
        let handle: LoadHandle
        let client: LoadClient
        let started: DispatchTime
        /// Whether it may share an upstream request with identical loads: not when its app is
        /// asked about redirects on the way (the app must be asked for each of its requests),
        /// nor when it is retried after another load's credentialed answer.
        var collapsible: Bool
    }

    /// Loads a cacheable GET (see `RequestDisposition`).
    ///
    /// Fresh hits are answered on the caller's thread, from memory or from a small disk file
    /// (reading it costs less than the hop to another thread would), and returned rather than
    /// handed to `client`: the caller delivers them after this function's temporaries are gone,
    /// which keeps the session queue's critical path short. Anything else moves to the engine's
    /// queue and ends at `client`.
    func load(_ request: CacheRequest, from settings: SessionSettings, client: @autoclosure () -> LoadClient) -> LoadStart {
        let started = DispatchTime.now()
        func pending() -> Load {
            let client = client()
            var collapsible = true
            if case .ask = client.redirects { collapsible = false }
            return Load(request: request, settings: settings, handle: LoadHandle(), client: client, started: started,
                        collapsible: collapsible)
        }
        switch store.lookup(request.key) {
        case .deferred:
            let load = pending()
            queue.async {
                self.proceed(load, decision: self.decide(request, record: self.store.finishLookup(request.key)))
            }
            return .pending(load.handle)
        case .answered(let record):
            let decided = decide(request, record: record)
            if let answer = storedAnswer(for: request, decided) {
                account(answer.answer, key: request.key, outcome: answer.outcome, trip: .noNetwork,
                        collapsed: false, started: started)
                return .answered(answer.answer)
            }
            let load = pending()
            queue.async { self.proceed(load, decision: decided) }
            return .pending(load.handle)
        }
    }

    /// Whether an unsafe request for `key` goes through the cache (`Exchange.Kind.unsafe`):
    /// only when something may be stored for its URL; otherwise there is nothing to invalidate
    /// and Foundation sends it untouched.
    func takesUnsafeRequest(forKey key: String) -> Bool {
        store.mayContainRecord(forKey: key)
    }

    /// Sends an unsafe request as it is, on the engine's queue, shared with no other load; the
    /// store is invalidated once the origin accepted it (`Exchange.Kind.unsafe`).
    func sendUnsafe(_ request: CacheRequest, from settings: SessionSettings, client: LoadClient) -> LoadHandle {
        let load = Load(request: request, settings: settings, handle: LoadHandle(), client: client, started: .now(),
                        collapsible: false)
        queue.async { self.startExchange(.unsafe, for: request, from: settings, joining: load) }
        return load.handle
    }

    /// The decision with what led to it.
    struct Decided: Sendable {
        let decision: ReuseDecision
        /// Whether anything at all was stored under the key (for `fwd=uri-miss` vs `vary-miss`).
        let keyWasStored: Bool
        let now: Date
    }

    func decide(_ request: CacheRequest, record: CacheRecord?) -> Decided {
        let now = configuration.now()
        let variant = CachingPolicy.matchingVariant(in: record, for: request)
        return Decided(
            decision: policy(for: request).decision(for: request, stored: variant, now: now, offline: isOffline),
            keyWasStored: !(record?.variants.isEmpty ?? true),
            now: now
        )
    }

    /// Whether the protocol takes a request for one byte range: when the policy stores partial
    /// content (`storesPartialContent`), so that the answer can be stored, or else when the
    /// store can answer it now (and Foundation sends it otherwise). Counts nothing.
    func takesRangeRequest(_ request: CacheRequest) -> Bool {
        if policy(for: request).storesPartialContent { return true }
        // Most ranges are for URLs with nothing stored: say so without reading or deciding.
        guard store.mayContainRecord(forKey: request.key) else { return false }
        return storedAnswer(for: request, decide(request, record: store.peek(request.key))) != nil
    }

    /// The answer from the store when `decided` allows one: the stored response, or for a byte
    /// range its part (RFC 9111 §3.4). Nil when the origin must be asked.
    private func storedAnswer(for request: CacheRequest, _ decided: Decided) -> (answer: Answer, outcome: CacheEvent.Outcome)? {
        guard case .useStored(let entry, let isStale) = decided.decision,
              let answer = storedAnswer(entry, for: request, status: .hit(entry, stale: isStale, at: decided.now), at: decided.now)
        else { return nil }
        return (answer, isStale ? .staleHit : .hit)
    }

    func proceed(_ load: Load, decision decided: Decided) {
        let now = decided.now
        if let answer = storedAnswer(for: load.request, decided) {
            return deliver(answer.answer, to: load, outcome: answer.outcome, trip: .noNetwork)
        }
        if let range = load.request.byteRange, decided.decision != .unavailable {
            return proceed(load, range: range, decision: decided)
        }
        switch decided.decision {
        case .useStored:
            break   // answered above
        case .useStoredAndRevalidate(let entry, let conditions):
            var status = CacheStatus.hit(entry, stale: true, at: now)
            status.detail = "stale-while-revalidate"
            // Counted before the app gets its answer, so `backgroundWork` covers the revalidation
            // from the moment the stale answer exists.
            backgroundWork.enter()
            queue.async {
                self.startExchange(.revalidate(entry, conditions), for: load.request, from: load.settings, joining: nil)
                self.backgroundWork.leave()
            }
            deliver(storedAnswer(entry, status: status, at: now), to: load, outcome: .staleHit, trip: .noNetwork)
        case .revalidate(let entry, let conditions):
            startExchange(.revalidate(entry, conditions), for: load.request, from: load.settings, joining: load)
        case .fetch(let fallback):
            let forward: CacheStatus.Forward
            switch load.request.mode {
            case .reload, .reloadFromOrigin: forward = .request
            default:
                if load.request.directives.noCache {
                    forward = .request
                } else if fallback != nil {
                    forward = .stale   // the matching variant is stale and has no validator to revalidate with
                } else {
                    forward = decided.keyWasStored ? .varyMiss : .uriMiss
                }
            }
            startExchange(.fetch(fallback: fallback, forward: forward), for: load.request, from: load.settings, joining: load)
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

    /// A request for one byte range the store could not answer at once.
    ///
    /// Unless the policy stores partial content, the request goes to the origin as it is and its
    /// answer is not stored: the protocol took it because a stored response answered it, and
    /// that went stale since. Otherwise a stored response that holds the range but is stale is
    /// revalidated with a conditional range GET (a 304 freshens it and the range is answered
    /// from it), and anything else is fetched with the range: a `206` answer is stored, or
    /// combined with the part stored before (`store`, `CachingPolicy.partialContentToStore`).
    private func proceed(_ load: Load, range: ByteRange, decision decided: Decided) {
        guard policy(for: load.request).storesPartialContent else {
            var forwarded = load
            forwarded.collapsible = false
            return startExchange(.forward, for: load.request, from: load.settings, joining: forwarded)
        }
        let stored: CacheEntry?
        switch decided.decision {
        case .useStored(let entry, _), .fetch(fallback: let entry?):
            stored = entry
        case .revalidate(let entry, let conditions), .useStoredAndRevalidate(let entry, let conditions):
            if CachingPolicy.servesRange(range, from: entry) != nil {
                return startExchange(.revalidate(entry, conditions), for: load.request, from: load.settings, joining: load)
            }
            stored = entry
        case .fetch(fallback: nil), .unavailable:
            stored = nil
        }
        let holdsRange = stored.flatMap { CachingPolicy.servesRange(range, from: $0) } != nil
        let forward: CacheStatus.Forward
        if [.reload, .reloadFromOrigin].contains(load.request.mode) || load.request.directives.noCache {
            forward = .request
        } else if holdsRange {
            forward = .stale   // stale, without a validator to revalidate with
        } else if stored?.statusCode == 206 {
            forward = .partial
        } else {
            forward = decided.keyWasStored ? .varyMiss : .uriMiss
        }
        startExchange(.fetch(fallback: holdsRange ? stored : nil, forward: forward), for: load.request, from: load.settings,
                      joining: load)
    }

    // MARK: Answers

    /// The stored response at `now`, with `status` as `Cache-Status` (when the configuration
    /// adds it).
    func storedAnswer(_ entry: CacheEntry, status: CacheStatus, at now: Date) -> Answer {
        BuiltResponse.answer(for: entry, cacheStatus: configuration.addsCacheStatus ? status : nil, at: now)
    }

    /// The stored response as the answer to `request`: for a request for one byte range, the
    /// part it asks for (nil when the entry does not hold it, `CachingPolicy.servesRange`);
    /// otherwise the whole response.
    func storedAnswer(_ entry: CacheEntry, for request: CacheRequest, status: CacheStatus, at now: Date) -> Answer? {
        guard let range = request.byteRange else { return storedAnswer(entry, status: status, at: now) }
        guard let part = CachingPolicy.servesRange(range, from: entry) else { return nil }
        return BuiltResponse.rangeAnswer(for: entry, range: part, cacheStatus: configuration.addsCacheStatus ? status : nil, at: now)
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
        /// Only for the load that started the exchange: its app answered a challenge with a
        /// credential on the way.
        var isPrivateToStarter = false
    }

    func deliver(_ answer: Answer, to load: Load, outcome: CacheEvent.Outcome, trip: Trip, collapsed: Bool = false) {
        guard load.handle.finish() else { return }
        account(answer, key: load.request.key, outcome: outcome, trip: trip, collapsed: collapsed, started: load.started)
        load.client.receive(answer, outcome: outcome)
    }

    /// Counts an answer and reports it to the observer. Called before the app gets the answer,
    /// so statistics read after a response always include it.
    private func account(_ answer: Answer, key: String, outcome: CacheEvent.Outcome, trip: Trip, collapsed: Bool, started: DispatchTime) {
        var delivered = 0
        if case .response(_, let body) = answer { delivered = body.count }
        counters.withLock { counters in
            counters.count(outcome)
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
    func recordTransfer(_ upstream: UpstreamResponse) {
        guard upstream.body.count >= 16_384, upstream.transferSeconds > 0 else { return }
        let sample = Double(upstream.body.count) / upstream.transferSeconds
        counters.withLock { counters in
            counters.estimatedBandwidth = counters.estimatedBandwidth.map { $0 * 0.7 + sample * 0.3 } ?? sample
        }
    }
}

/// The URLs whose last response said `no-store`, each until a time (`CacheEngine.passesBy`).
/// Bounded: at `capacity` URLs the expired ones go, and when none has expired, all of them.
struct NoStoreURLs: Sendable {
    /// How long a URL stays left to Foundation: 10 minutes, after which its next GET goes
    /// through the layer again (and is learned again if its response still says `no-store`).
    static let lifetime: TimeInterval = 600
    static let capacity = 1_024
    private var until: [String: Date] = [:]

    var isEmpty: Bool { until.isEmpty }

    func contains(_ key: String, at now: Date) -> Bool {
        guard let end = until[key] else { return false }
        return now < end
    }

    mutating func insert(_ key: String, at now: Date) {
        if until.count >= Self.capacity, until[key] == nil {
            until = until.filter { $0.value > now }
            if until.count >= Self.capacity { until = [:] }
        }
        until[key] = now.addingTimeInterval(Self.lifetime)
    }
}
