import Foundation

// The age limit: records stored longer ago than `Limits.maximumEntryAge` are removed, on the
// store's clock, when the worker settles and at least `expiryInterval` has passed since the
// last sweep (or at once after `Operation.expire`).
extension DiskWorker {
    /// How often, on the store's clock, records past `limit` are looked for: a tenth of it,
    /// between a minute and an hour.
    static func expiryInterval(for limit: TimeInterval) -> TimeInterval {
        min(max(limit / 10, 60), 3_600)
    }

    /// Removes the records past the age limit when a sweep is due.
    func expireIfDue() {
        let (doomed, now) = state.withLock { state -> ([EntryDigest], Date?) in
            guard let limit = state.limits.maximumEntryAge, state.disk.isIndexReady else { return ([], nil) }
            let now = state.clock()
            if let lastExpiry, now.timeIntervalSince(lastExpiry) < Self.expiryInterval(for: limit), now >= lastExpiry {
                return ([], nil)
            }
            return (state.disk.expire(storedBefore: now.addingTimeInterval(-limit)), now)
        }
        if let now { lastExpiry = now }
        for digest in doomed {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }
        if !doomed.isEmpty { appendJournal() }
    }
}
