import Foundation

extension DiskStore {
    /// Records whose newest response was stored longer ago than this, on `clock`, are removed,
    /// except pinned ones; nil (the default): no age limit. Setting it queues a sweep at once
    /// (after the index has loaded, when the store just opened); then the worker sweeps whenever
    /// it settles and `DiskWorker.expiryInterval` has passed, and a timer makes it settle at that
    /// interval while nothing else does.
    var maximumEntryAge: TimeInterval? {
        get { state.withLock { $0.limits.maximumEntryAge } }
        set {
            let limit = newValue.map { $0.isFinite ? max(0, $0) : .greatestFiniteMagnitude }
            state.withLock { $0.limits.maximumEntryAge = limit }
            scheduleExpiry(limit)
            enqueue(.expire)
        }
    }

    /// Starts (or stops, for nil) the timer that prompts sweeps while the store is idle.
    private func scheduleExpiry(_ limit: TimeInterval?) {
        let timer = limit.map { limit -> DispatchSourceTimer in
            let interval = DiskWorker.expiryInterval(for: limit)
            let timer = DispatchSource.makeTimerSource(queue: worker)
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(Int(interval / 10)))
            // The sweep itself runs when the worker settles after this (empty) batch.
            timer.setEventHandler { [weak self] in self?.enqueue(.enforceCapacity) }
            return timer
        }
        let previous = expiryTimer.withLock { current -> DispatchSourceTimer? in
            defer { current = timer }
            return current
        }
        previous?.cancel()
        timer?.resume()
    }
}
