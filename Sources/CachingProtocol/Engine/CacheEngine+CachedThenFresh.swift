import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CacheEngine {
    /// The stored answer at once, then the origin's answer if it differs: MKNetworkKit's "the
    /// completion handler is called twice", as an explicit sequence. Loaded as a session with
    /// `settings` loads it: its fields, its partition (`partitioned`), its upstream session.
    func cachedThenFresh(_ urlRequest: URLRequest, from settings: SessionSettings) -> AsyncThrowingStream<CachedThenFreshResponse, Error> {
        let handle = LoadHandle()
        return AsyncThrowingStream { continuation in
            continuation.onTermination = { _ in handle.cancel() }
            Self.queue.async {
                self.startCachedThenFresh(urlRequest, from: settings, handle: handle, continuation: continuation)
            }
        }
    }

    private func startCachedThenFresh(
        _ urlRequest: URLRequest,
        from settings: SessionSettings,
        handle: LoadHandle,
        continuation: AsyncThrowingStream<CachedThenFreshResponse, Error>.Continuation
    ) {
        guard RequestDisposition(urlRequest) == .cacheable, !bypasses(urlRequest), let key = cacheKey(for: urlRequest) else {
            let reason = CachingError(.notCacheable, "cachedThenFresh needs a GET the cache may answer (no app validators, no Range, no no-store, no bypass rule)")
            return continuation.finish(throwing: reason)
        }
        let sent = settings.apply(to: urlRequest)
        let request = partitioned(CacheRequest(sent, key: key, cookieIsSessions: SessionSettings.cookieIsSessions(in: sent, madeFrom: urlRequest)),
                                  from: settings)
        let now = configuration.now()
        let stored = CachingPolicy.matchingVariant(in: store.record(forKey: key), for: request)
        if let stored, CachingPolicy.followedRedirectStatuses.contains(stored.statusCode) {
            // A stored redirect: followed through the cache like any load, and answered once,
            // with where the answer came from.
            let load = Load(request: request, settings: settings, client: FreshAnswerClient(stored: nil, continuation: continuation),
                            started: DispatchTime.now(), handle: handle)
            let (plan, now) = currentPlan(for: request, record: store.record(forKey: key))
            return carryOut(plan, for: load, now: now)
        }
        if let stored {
            let isStale = stored.timeToLive(at: now) <= 0
            if case .response(let response, let body) = storedAnswer(stored, for: request,
                                                                status: isStale ? .hit(stored, stale: true, at: now) : nil, at: now) {
                continuation.yield(CachedThenFreshResponse(response: response, data: body, source: .cache(isStale: isStale)))
            }
        }
        if isOffline || request.mode == .onlyCache {
            if stored == nil {
                continuation.finish(throwing: CachingError(.notInCache, "offline and nothing stored for \(key)"))
            } else {
                continuation.finish()
            }
            return
        }
        let plan: ExchangePlan
        if let stored, let conditions = RevalidationConditions(stored) {
            plan = .revalidate(stored, conditions)
        } else {
            plan = .fetch(fallback: stored, forward: stored == nil ? .uriMiss : .stale)
        }
        let load = Load(request: request, settings: settings, client: FreshAnswerClient(stored: stored, continuation: continuation),
                        started: DispatchTime.now(), handle: handle)
        runExchange(plan, for: load.request, from: load.settings, waiting: load)
    }
}

/// Finishes a cached-then-fresh stream with the origin's answer, yielding it only when it
/// differs from the stored one (`stored`; nil when nothing was yielded from the cache before,
/// and then any answer is yielded, from wherever it came).
private struct FreshAnswerClient: LoadClient {
    let stored: CacheEntry?
    let continuation: AsyncThrowingStream<CachedThenFreshResponse, Error>.Continuation

    func receive(_ answer: Answer, outcome: CacheEvent.Outcome) {
        switch answer {
        case .failure(let error):
            continuation.finish(throwing: error)
        case .redirect:
            // Redirects are followed for this API (`RedirectHandling.follow`): not reached.
            continuation.finish()
        case .response(let response, let body):
            if stored == nil {
                let source: CachedThenFreshResponse.Source
                switch outcome {
                case .hit, .revalidatedNotModified: source = .cache(isStale: false)
                case .staleHit, .staleAfterError: source = .cache(isStale: true)
                default: source = .origin
                }
                continuation.yield(CachedThenFreshResponse(response: response, data: body, source: source))
                return continuation.finish()
            }
            switch outcome {
            case .revalidatedNotModified, .staleAfterError, .hit, .staleHit:
                // The stored answer was current (or the origin failed and it is all there is).
                break
            default:
                if body != stored?.body || response.statusCode != stored?.statusCode {
                    continuation.yield(CachedThenFreshResponse(response: response, data: body, source: .origin))
                }
            }
            continuation.finish()
        }
    }
}
