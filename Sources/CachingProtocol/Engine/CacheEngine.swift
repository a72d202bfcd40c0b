import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cache's request pipeline for one installed ``CachingConfiguration``: it looks a request
/// up, lets the policy plan what to do (`CachingPolicy.plan`), and answers from the store — or
/// runs an exchange with the origin (`CacheEngine+Exchange.swift`) — counting every answer.
///
/// Threading: `lookUp` may be called from any thread, including inside `URLProtocol.startLoading`
/// on the session's queue: it answers fresh hits from memory or a small disk file on the calling
/// thread and hands everything else to `resume`, which runs on `CacheEngine.queue`.
final class CacheEngine: Sendable {
    let configuration: CachingConfiguration
    let store: any RecordStore
    let upstream: any Upstream
    let exchanges = ExchangeTable()
    /// URLs whose last response said `no-store`, left to Foundation for a while (`passesBy`).
    private let noStoreURLs = Locked(NoStoreURLs())
    /// The responses built for fresh hits, reused by the next ones (`storedAnswer(_:for:status:at:)`).
    private let hitResponses = Locked(HitResponses())
    /// The settings of the app session that loads no session makes are made for (see
    /// `sessionlessSettings`).
    private let sessionSettingsWithoutSession = Locked(SessionSettings.standard)

    /// Where loads that cannot be answered on the caller's thread run: larger disk reads and
    /// exchanges. Concurrent, shared by every engine; nothing on it blocks.
    static let queue = DispatchQueue(label: "CachingProtocol.engine", attributes: .concurrent)

    /// An engine for `configuration` over `store`, asking the origin through `upstream`.
    init(configuration: CachingConfiguration, store: any RecordStore, upstream: any Upstream) {
        self.configuration = configuration
        self.store = store
        self.upstream = upstream
    }

    /// The engine of an installation: over its cache's store, with upstream sessions that never
    /// consult the protocol classes `isCachingProtocol` picks.
    convenience init(installing configuration: CachingConfiguration, leavingOut isCachingProtocol: @escaping @Sendable (AnyClass) -> Bool) {
        self.init(configuration: configuration, store: configuration.cache.store,
                  upstream: URLSessionUpstream(clock: configuration.now, leavingOut: isCachingProtocol))
        configuration.cache.use(policy: configuration.policy, clock: configuration.now, rules: configuration.rules) { [weak self] request, key in
            self?.sessionlessRequest(request, key: key) ?? CacheRequest(request, key: key)
        }
    }

    deinit {
        // Nothing uses the installation any more: its counters start again from zero.
        configuration.identity.counters.withLock { $0 = CacheStatistics() }
    }

    /// Lets running transfers finish, then releases the upstream sessions; a later load makes
    /// new ones (an engine shared by several sessions may be unregistered from one of them).
    func shutdown() {
        upstream.shutdown()
    }

    /// The settings loads no app session makes are made as — `prefetch`, `cachedThenFresh`, and
    /// the `URLCache` API of the cache this installation uses — so that they read and fill what
    /// that session reads: those of the session configuration the configuration was injected
    /// into last (set by `SessionClasses`), or `URLSession.shared`'s when it was registered last
    /// (`Installation.install`); `URLSessionConfiguration.default`'s before either.
    var sessionlessSettings: SessionSettings {
        get { sessionSettingsWithoutSession.withLock { $0 } }
        set { sessionSettingsWithoutSession.withLock { $0 = newValue } }
    }

    /// `request`, under `key`, as the session of `sessionlessSettings` sends it and as the store
    /// keeps it for that session (`partitioned`).
    func sessionlessRequest(_ request: URLRequest, key: String) -> CacheRequest {
        let settings = sessionlessSettings
        return partitioned(CacheRequest(settings.apply(to: request), key: key), from: settings)
    }

    /// The installation's offline switch (``CachingConfiguration/isOffline``).
    var isOffline: Bool { configuration.identity.offline.withLock { $0 } }

    // MARK: Which requests it takes

    /// Whether a rule says the protocol must leave `request` to Foundation.
    func bypasses(_ request: URLRequest) -> Bool {
        guard !configuration.rules.isEmpty, case .bypass = configuration.rules.action(for: request) else { return false }
        return true
    }

    /// Whether a GET `request` is left to Foundation because its URL's last response through the
    /// layer said `no-store` less than `NoStoreURLs.lifetime` ago: nothing of it could be stored,
    /// so the layer would only add a miss's cost (and buffer its body on Linux). Never in offline
    /// mode, where every GET must be answered from the cache or fail, nor for a request whose cache
    /// policy forbids the network (`.returnCacheDataDontLoad`: Foundation on Linux would load it).
    /// Runs in `canInit` for every GET: with no such URL learned it costs one lock and builds no key.
    func passesBy(_ request: URLRequest) -> Bool {
        guard !noStoreURLs.withLock({ $0.isEmpty }), !isOffline, request.cachePolicy != .returnCacheDataDontLoad,
              let key = cacheKey(for: request) else { return false }
        let now = configuration.now()
        return noStoreURLs.withLock { $0.contains(key, at: now) }
    }

    /// Remembers that `key`'s response said `no-store` (see `passesBy`).
    func learnNoStore(_ key: String, at now: Date) {
        noStoreURLs.withLock { $0.insert(key, at: now) }
    }

    /// Whether `request` is a POST a rule declares cacheable (`CachingRule.cachePOST`).
    func cachesPOST(_ request: URLRequest) -> Bool {
        guard !configuration.rules.isEmpty, case .cachePOST = configuration.rules.action(for: request) else { return false }
        return true
    }

    /// The GET key of `request`'s URL under the configuration's key rules; nil without a URL.
    /// With no rules this is `CacheKey.make` and nothing else.
    func cacheKey(for request: URLRequest) -> String? {
        guard let url = request.url else { return nil }
        return configuration.rules.isEmpty ? CacheKey.make(method: "GET", url: url) : configuration.rules.cacheKey(for: url)
    }

    /// `request` as the store must see it for a session with `settings`: as that session sends
    /// it and under its trust judge (`SessionSettings.partitioned`), for the user the
    /// configuration's identity says it is for (`CachingConfiguration.userIdentity`). Every
    /// lookup, prefetch and cached-then-fresh load is planned with it.
    func partitioned(_ request: CacheRequest, from settings: SessionSettings) -> CacheRequest {
        settings.partitioned(request).identified(by: configuration.userIdentity)
    }

    /// The policy that judges `request`: the first matching rule's, or the configuration's.
    func policy(for request: CacheRequest) -> CachingPolicy {
        guard !configuration.rules.isEmpty else { return configuration.policy }
        switch configuration.rules.action(for: request.urlRequest) {
        case .policy(let rulePolicy):
            return rulePolicy
        case .freshFor(let seconds):
            var fixed = configuration.policy
            fixed.fixedLifetime = seconds
            return fixed
        case .bypass, .cachePOST, .key, nil:
            return configuration.policy
        }
    }

    /// Whether the protocol takes a request for one byte range: when the policy stores partial
    /// content (`storesPartialContent`), so that the answer can be stored, or else when the store
    /// can answer it now (and Foundation sends it otherwise). Counts nothing.
    func takesRangeRequest(_ request: CacheRequest, from settings: SessionSettings) -> Bool {
        if policy(for: request).storesPartialContent { return true }
        let request = partitioned(request, from: settings)
        // Most ranges are for URLs with nothing stored: say so without reading or deciding.
        guard store.mayContainRecord(forKey: request.key) else { return false }
        if case .answerStored = currentPlan(for: request, record: store.peek(request.key)).plan { return true }
        return false
    }

    /// Whether an unsafe request for `key` goes through the cache (`ExchangePlan.unsafe`): only
    /// when something may be stored for its URL; otherwise there is nothing to invalidate and
    /// Foundation sends it untouched.
    func takesUnsafeRequest(forKey key: String) -> Bool {
        store.mayContainRecord(forKey: key)
    }

    // MARK: Loading

    /// How `lookUp` left a load.
    enum LookupResult {
        /// A fresh hit, already counted and reported: the caller hands it to the app.
        case answered(Answer)
        /// The load goes on: pass it to `resume` with the client that waits for it.
        case goesOn(PendingLoad)
    }

    /// A load the lookup could not answer, with what the policy planned for it (nil while the
    /// record is in a disk file too large to read on the caller's thread).
    struct PendingLoad: Sendable {
        let request: CacheRequest
        let settings: SessionSettings
        let plan: (plan: LoadPlan, now: Date)?
        let started: DispatchTime
    }

    /// Looks `request` up and plans it. Fresh hits are answered on the caller's thread, from
    /// memory or a small disk file (reading it costs less than the hop to another thread would),
    /// and returned rather than delivered: the caller hands them to the app after this function's
    /// temporaries are gone, which keeps the session queue's critical path short. A hit builds no
    /// load client and never looks at the app's task.
    func lookUp(_ request: CacheRequest, from settings: SessionSettings) -> LookupResult {
        let started = DispatchTime.now()
        let request = partitioned(request, from: settings)
        switch store.lookup(request.key) {
        case .deferred:
            return .goesOn(PendingLoad(request: request, settings: settings, plan: nil, started: started))
        case .answered(let record):
            let planned = currentPlan(for: request, record: record)
            // A stored redirect goes on: it is followed, or its app asked, with the load's client.
            if case .answerStored(let entry, let isStale) = planned.plan, !(300...399).contains(entry.statusCode) {
                let answer = storedAnswer(entry, for: request, status: isStale ? .hit(entry, stale: true, at: planned.now) : nil,
                                    at: planned.now)
                account(answer, key: request.key, as: Provenance(outcome: isStale ? .staleHit : .hit), started: started)
                return .answered(answer)
            }
            return .goesOn(PendingLoad(request: request, settings: settings, plan: planned, started: started))
        }
    }

    /// Goes on with a load `lookUp` could not answer, on the engine's queue; `client` gets the
    /// answer. The returned handle cancels it.
    func resume(_ pending: PendingLoad, client: LoadClient) -> LoadHandle {
        let load = Load(request: pending.request, settings: pending.settings, client: client, started: pending.started)
        Self.queue.async { [self] in
            let (plan, now) = pending.plan ?? currentPlan(for: load.request, record: store.finishLookup(load.request.key))
            carryOut(plan, for: load, now: now)
        }
        return load.handle
    }

    /// The policy's plan for `request` given the `record` stored under its key, now.
    func currentPlan(for request: CacheRequest, record: CacheRecord?) -> (plan: LoadPlan, now: Date) {
        let now = configuration.now()
        let policy = policy(for: request)
        let offline = isOffline
        return (policy.plan(for: request, stored: CachingPolicy.matchingVariant(in: record, for: request),
                            keyWasStored: !(record?.variants.isEmpty ?? true), now: now, offline: offline), now)
    }

    /// Carries out `plan` for `load`, on the engine's queue.
    func carryOut(_ plan: LoadPlan, for load: Load, now: Date) {
        switch plan {
        case .answerStored(let entry, let isStale):
            let status: CacheStatus? = isStale ? .hit(entry, stale: true, at: now) : nil
            deliver(storedAnswer(entry, for: load.request, status: status, at: now), to: load,
                    as: Provenance(outcome: isStale ? .staleHit : .hit))
        case .answerStaleAndRevalidate(let entry, let conditions):
            if load.settings.judgesServerTrust {
                // A revalidation nobody waits for would meet the origin's certificate with nobody
                // of the app's to judge it: this load waits for it instead, and its delegate judges.
                return runExchange(.revalidate(entry, conditions), for: load.request, from: load.settings, waiting: load)
            }
            var status = CacheStatus.hit(entry, stale: true, at: now)
            status.detail = "stale-while-revalidate"
            // Counted before the app gets its answer, so `background` covers the revalidation from
            // the moment the stale answer exists.
            exchanges.background.enter()
            Self.queue.async { [self] in
                runExchange(.revalidate(entry, conditions), for: load.request, from: load.settings, waiting: nil)
                exchanges.background.leave()
            }
            deliver(storedAnswer(entry, for: load.request, status: status, at: now), to: load, as: Provenance(outcome: .staleHit))
        case .send(let exchangePlan):
            runExchange(exchangePlan, for: load.request, from: load.settings, waiting: load)
        case .unavailable(let answersGatewayTimeout):
            guard answersGatewayTimeout, let url = load.request.urlRequest.url else {
                let reason = CachingError(.notInCache, isOffline ? "offline mode and nothing stored for \(load.request.key)"
                                                                 : "nothing usable stored for \(load.request.key)")
                return deliver(.failure(reason.urlError(.resourceUnavailable, url: load.request.urlRequest.url)), to: load,
                               as: Provenance(outcome: .notInCache))
            }
            deliver(gatewayTimeout(for: url, status: keyed(CacheStatus(forward: .uriMiss, detail: "only-if-cached"), for: load.request)),
                    to: load, as: Provenance(outcome: .notInCache))
        }
    }

    // MARK: Answers

    /// The stored response as the answer to `request` at `now`, with `status` as its
    /// `Cache-Status` when the configuration adds one (nil: a fresh hit, plain `hit`): a stored
    /// redirect as a redirect to its target (`Answer.redirect`); for a request for one byte range
    /// the entry holds, that part; otherwise the whole response.
    ///
    /// A fresh hit reuses the response built for the entry's last hit in the same second of
    /// age: building an `HTTPURLResponse` is the largest cost of a hit on Linux (it
    /// re-capitalises every header name and parses `Content-Type`), and a fresh hit's response
    /// changes only with its `Age`.
    func storedAnswer(_ entry: CacheEntry, for request: CacheRequest, status: CacheStatus?, at now: Date) -> Answer {
        let status = keyed(status, for: request)
        let age = Self.ageField(of: entry, at: now)
        if (300...399).contains(entry.statusCode),
           let target = CachingPolicy.redirectTarget(of: request.urlRequest, status: entry.statusCode, location: entry.headers["Location"]) {
            let response = response(for: entry, headers: entry.headers, status: entry.statusCode, age: age,
                                    cacheStatus: status ?? CacheStatus())
            return .redirect(response, entry.body, to: target)
        }
        if let range = request.byteRange, let part = CachingPolicy.servesRange(range, from: entry) {
            var headers = entry.headers
            headers.set("Content-Range", part.contentRange.fieldValue)
            headers.set("Content-Length", String(part.bounds.count))
            let response = response(for: entry, headers: headers, status: 206, age: age, cacheStatus: status ?? CacheStatus())
            let start = entry.body.startIndex + part.bodyOffset
            return .response(response, entry.body.subdata(in: start..<(start + part.bounds.count)))
        }
        if status == nil, let built = hitResponses.withLock({ $0.response(for: entry.revision, age: age) }) {
            return .response(built, entry.body)
        }
        let response = response(for: entry, headers: entry.headers, status: entry.statusCode, age: age,
                                cacheStatus: status ?? CacheStatus())
        if status == nil { hitResponses.withLock { $0.keep(response, for: entry.revision, age: age) } }
        return .response(response, entry.body)
    }

    /// `entry`'s response with `headers`, `status`, an `Age` field (RFC 9111 §5.1, §4.2.3:
    /// generated when the origin sent none, and grown by the time the entry spent in the cache)
    /// and `cacheStatus` when the configuration adds it.
    private func response(for entry: CacheEntry, headers: HTTPHeaders, status: Int, age: Int, cacheStatus: CacheStatus) -> HTTPURLResponse {
        var headers = headers
        headers.set("Age", String(age))
        if configuration.addsCacheStatus { headers.set("Cache-Status", cacheStatus.headerValue) }
        let url = URL(string: entry.responseURL) ?? URL(string: "about:blank")!
        return HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers.dictionary)!
    }

    /// The origin's response as the app sees it: untouched, plus `Cache-Status` when enabled.
    func deliverable(_ head: ReceivedHead, status: CacheStatus) -> HTTPURLResponse {
        let response = head.response
        guard configuration.addsCacheStatus, let url = response.url else { return response }
        var headers = head.headers
        headers.set("Cache-Status", status.headerValue)
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers.dictionary) ?? response
    }

    /// The `504 Gateway Timeout` a cache generates when it may not answer (`only-if-cached`,
    /// RFC 9111 §5.2.1.7) or cannot validate a response it may not serve unvalidated (§5.2.2.2).
    func gatewayTimeout(for url: URL, status: CacheStatus) -> Answer {
        var headers = ["Content-Length": "0"]
        if configuration.addsCacheStatus { headers["Cache-Status"] = status.headerValue }
        return .response(HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: headers)!, Data())
    }

    /// `status` with the key of `request` when a key rule made it differ from the URL's own key.
    func keyed(_ status: CacheStatus, for request: CacheRequest) -> CacheStatus {
        guard let key = differingKey(of: request) else { return status }
        var keyed = status
        keyed.key = key
        return keyed
    }

    /// `keyed` for an answer whose status may be nil (a fresh hit, plain `hit`): still nil unless
    /// the key differs, so fresh hits keep reusing the response built for them.
    func keyed(_ status: CacheStatus?, for request: CacheRequest) -> CacheStatus? {
        guard let key = differingKey(of: request) else { return status }
        var keyed = status ?? CacheStatus()
        keyed.key = key
        return keyed
    }

    private func differingKey(of request: CacheRequest) -> String? {
        guard !configuration.rules.isEmpty, configuration.rules.changesKeys, let url = request.urlRequest.url,
              request.key != CacheKey.make(method: "GET", url: url) else { return nil }
        return request.key
    }

    /// `entry`'s age at `now` in whole seconds, as the `Age` field states it.
    static func ageField(of entry: CacheEntry, at now: Date) -> Int {
        let age = entry.age(at: now)
        guard age.isFinite, age > 0 else { return 0 }
        return age >= Double(CacheControl.maximumDeltaSeconds) ? CacheControl.maximumDeltaSeconds : Int(age)
    }

    // MARK: Delivering and counting

    /// What went over the wire for one request, for its event.
    struct Trip: Sendable {
        var methods: [String] = []
        var originStatus: Int?
        var bytes = 0
    }

    /// How an answer came about, as the counters and the observer's event report it: what the
    /// cache did, what went over the wire for it (none from the store), whether the load shared
    /// another's upstream request, and why a fetched response was not stored.
    struct Provenance: Sendable {
        var outcome: CacheEvent.Outcome
        var trip = Trip()
        var collapsed = false
        var notStored: NotStoredReason?
        /// The loads that took the response's body as it arrived, and how many bytes they got:
        /// what they were handed, which the answer's body (only what was kept) may not show.
        var streamed = Streamed()
    }

    /// The loads an exchange's response was streamed to (`ExchangeListener`), by their handles,
    /// and the body bytes each of them got.
    struct Streamed: Sendable {
        var loads: Set<ObjectIdentifier> = []
        var bytes = 0

        /// The body bytes `load` got as they arrived.
        func bytes(to load: Load) -> Int {
            loads.contains(ObjectIdentifier(load.handle)) ? bytes : 0
        }
    }

    /// Hands `answer` to `load`'s client and counts it as `provenance` says — unless it is a
    /// redirect the engine follows for this load (every client but one that reports redirects to
    /// its app): then the load goes on to the target (`followRedirect`).
    func deliver(_ answer: Answer, to load: Load, as provenance: Provenance) {
        var answer = answer
        if case .redirect(let response, let body, let target) = answer {
            guard load.redirects.isReport else {
                return followRedirect(response, body, to: target, for: load, as: provenance)
            }
            // Reported to Apple's loader, which makes each hop's request anew: the app's delegate
            // sees, and the next load starts from, the request that loader would make.
            answer = .redirect(response, body, to: load.settings.redirected(target, from: load.request, perHop: true))
        }
        guard load.handle.claimAnswer() else { return }
        if load.followedStoredRedirect, case .response(let response, let body) = answer {
            answer = .response(markedAsReachedThroughStoredRedirect(response), body)
        }
        account(answer, key: load.request.key, as: provenance, started: load.started, streamedBytes: provenance.streamed.bytes(to: load))
        load.client.receive(answer, outcome: provenance.outcome)
    }

    /// Counts an answer and reports it to the observer. Called before the app gets the answer,
    /// so statistics read after a response always include it. The bytes delivered are the
    /// answer's body, or the `streamedBytes` the app got as they arrived (a body only relayed is
    /// not in the answer).
    func account(_ answer: Answer, key: String, as provenance: Provenance, started: DispatchTime, streamedBytes: Int = 0) {
        let (outcome, trip, collapsed) = (provenance.outcome, provenance.trip, provenance.collapsed)
        var delivered = streamedBytes
        if case .response(_, let body) = answer { delivered = max(delivered, body.count) }
        configuration.identity.counters.withLock { counters in
            switch outcome {
            case .hit: counters.hits += 1
            case .staleHit: counters.staleHits += 1
            case .revalidatedNotModified: counters.revalidatedNotModified += 1
            case .revalidatedChanged: counters.revalidatedChanged += 1
            case .fetched: counters.fetched += 1
            case .staleAfterError: counters.staleAfterError += 1
            case .notInCache: counters.notInCache += 1
            case .failed: counters.failed += 1
            }
            if collapsed { counters.collapsed += 1 }
            counters.upstreamBytes += collapsed ? 0 : trip.bytes
            counters.deliveredBytes += delivered
        }
        guard let observer = configuration.observer else { return }
        observer(CacheEvent(
            key: key, outcome: outcome, originStatus: trip.originStatus, upstreamMethods: trip.methods,
            upstreamBytes: trip.bytes, deliveredBytes: delivered, collapsed: collapsed,
            duration: Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9,
            notStoredReason: provenance.notStored
        ))
    }

}

/// The response built for each entry's last fresh hit, by the entry's revision, with the `Age`
/// it carries. Bounded: past `capacity` entries it starts again.
private struct HitResponses {
    static let capacity = 1_024
    private var built: [EntryRevision: (age: Int, response: HTTPURLResponse)] = [:]

    func response(for revision: EntryRevision, age: Int) -> HTTPURLResponse? {
        guard let kept = built[revision], kept.age == age else { return nil }
        return kept.response
    }

    mutating func keep(_ response: HTTPURLResponse, for revision: EntryRevision, age: Int) {
        if built.count >= Self.capacity, built[revision] == nil { built.removeAll(keepingCapacity: true) }
        built[revision] = (age, response)
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
