import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CacheEngine {
    /// What one prefetched URL came to.
    enum PrefetchOutcome: Sendable {
        case fetched, alreadyFresh, bypassed, failed
    }

    /// Prefetches `urls` as a session with `settings` would request them, at most
    /// `maximumConcurrent` at once; stops sending when the calling task is cancelled (the rest
    /// count as failed).
    func prefetch(_ urls: [URL], from settings: SessionSettings, maximumConcurrent: Int) async -> PrefetchSummary {
        var summary = PrefetchSummary()
        func count(_ outcome: PrefetchOutcome) {
            switch outcome {
            case .fetched: summary.fetched += 1
            case .alreadyFresh: summary.alreadyFresh += 1
            case .bypassed: summary.bypassed += 1
            case .failed: summary.failed += 1
            }
        }
        await withTaskGroup(of: PrefetchOutcome.self) { group in
            var pending = urls.makeIterator()
            var running = 0
            while running < max(1, maximumConcurrent), let url = pending.next() {
                group.addTask { await self.prefetch(url, from: settings) }
                running += 1
            }
            while let outcome = await group.next() {
                count(outcome)
                guard !Task.isCancelled, let url = pending.next() else { continue }
                group.addTask { await self.prefetch(url, from: settings) }
            }
            // Cancelled: what was never sent counts as failed.
            while pending.next() != nil { count(.failed) }
        }
        return summary
    }

    /// Loads `url` into the store through the same path as an app's load of a session with
    /// `settings` — its request fields, partition (`partitioned`: user, trust judge, the fields
    /// the loader adds), rules, policy, the exchange table (it joins an identical load that runs,
    /// and app loads join it), storage — and delivers its body to nobody: what it stores is what
    /// that session's loads read. Cancelling the calling task cancels the load (its upstream
    /// request, unless another load waits on it) and answers `.failed`.
    func prefetch(_ url: URL, from settings: SessionSettings) async -> PrefetchOutcome {
        let appRequest = URLRequest(url: url)
        let urlRequest = settings.apply(to: appRequest)
        guard !bypasses(urlRequest), RequestDisposition(urlRequest) == .cacheable, !passesBy(urlRequest),
              let key = cacheKey(for: urlRequest) else { return .bypassed }
        let request = partitioned(CacheRequest(urlRequest, key: key,
                                               cookieIsSessions: SessionSettings.cookieIsSessions(in: urlRequest, madeFrom: appRequest)),
                                  from: settings)
        let client = PrefetchClient()
        let load = Load(request: request, settings: settings, client: client, started: .now())
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PrefetchOutcome, Never>) in
                client.whenFinished { continuation.resume(returning: $0) }
                Self.queue.async { [self] in
                    guard !client.isFinished else { return }   // cancelled before it started
                    let (plan, now) = currentPlan(for: load.request, record: store.finishLookup(key))
                    switch plan {
                    case .answerStored(_, isStale: false):
                        client.finish(.alreadyFresh)
                    case .send(let exchangePlan):
                        runExchange(exchangePlan, for: load.request, from: load.settings, waiting: load)
                    case .answerStaleAndRevalidate(let entry, let conditions):
                        // A prefetch waits for the revalidation an app's load would leave running.
                        runExchange(.revalidate(entry, conditions), for: load.request, from: load.settings, waiting: load)
                    case .answerStored, .unavailable:
                        carryOut(plan, for: load, now: now)
                    }
                }
            }
        } onCancel: {
            load.handle.cancel()
            client.finish(.failed)
        }
    }
}

/// A prefetch's load: it takes no body as it arrives, follows redirects, and turns the answer
/// into a `PrefetchOutcome`, once (a cancelled load is finished `.failed` by its canceller).
private final class PrefetchClient: LoadClient, Sendable {
    private struct State {
        var outcome: CacheEngine.PrefetchOutcome?
        var finished: (@Sendable (CacheEngine.PrefetchOutcome) -> Void)?
    }
    private let state = Locked(State())

    var isFinished: Bool { state.withLock { $0.outcome != nil } }

    /// Calls `finished` with the outcome once there is one (at once when there is).
    func whenFinished(_ finished: @escaping @Sendable (CacheEngine.PrefetchOutcome) -> Void) {
        let outcome = state.withLock { state -> CacheEngine.PrefetchOutcome? in
            if state.outcome == nil { state.finished = finished }
            return state.outcome
        }
        if let outcome { finished(outcome) }
    }

    /// The first outcome wins; later ones change nothing.
    func finish(_ outcome: CacheEngine.PrefetchOutcome) {
        state.withLock { state -> (@Sendable (CacheEngine.PrefetchOutcome) -> Void)? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.finished = nil }
            return state.finished
        }?(outcome)
    }

    func receive(_ answer: Answer, outcome: CacheEvent.Outcome) {
        if case .response(let response, _) = answer, response.statusCode >= 400 {
            return finish(.failed)   // the origin answered, with an error: nothing worth keeping
        }
        switch outcome {
        case .fetched, .revalidatedChanged, .revalidatedNotModified: finish(.fetched)
        case .hit: finish(.alreadyFresh)
        case .staleHit, .staleAfterError, .notInCache, .failed: finish(.failed)
        }
    }
}
