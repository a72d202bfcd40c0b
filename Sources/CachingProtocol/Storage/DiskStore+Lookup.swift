import Foundation

extension DiskStore {
    /// What `lookup(forKey:readingUpTo:)` found.
    enum Lookup {
        /// The record, from a staged write or a file read on the calling thread.
        case found(CacheRecord)
        /// Nothing is stored for the key, or its file cannot be read now (counted as a miss).
        case missing
        /// The record's file is larger than the limit, or the index is still being rebuilt so
        /// its size is unknown: read it with `record(forKey:countingLookup:)` where a long read
        /// holds nobody up. Nothing was counted.
        case deferred
    }

    /// Whether a record for `key` is stored or staged; reads no file and counts nothing.
    func containsRecord(forKey key: String) -> Bool {
        state.withLock { $0.disk.holdsRecord(forKey: key) }
    }

    /// `containsRecord(forKey:)`, or true while a file the index does not list may hold it (the
    /// index is still loading, or the file could not be read when the directory was scanned).
    func mayContainRecord(forKey key: String) -> Bool {
        state.withLock { $0.disk.mayHoldRecord(forKey: key) }
    }

    func record(forKey key: String, countingLookup: Bool) -> CacheRecord? {
        guard case .found(let record) = read(key, countingLookup: countingLookup, sizeLimit: nil) else { return nil }
        return record
    }

    /// A counted lookup that reads the record's file on the calling thread only when it takes
    /// at most `limit` bytes (a staged record costs no read at all).
    func lookup(forKey key: String, readingUpTo limit: Int) -> Lookup {
        read(key, countingLookup: true, sizeLimit: limit)
    }

    /// Plans the lookup under the lock, reads the file outside it, and records what the read
    /// found: a missing file is forgotten, a damaged one deleted, an unreadable one left alone.
    private func read(_ key: String, countingLookup: Bool, sizeLimit: Int?) -> Lookup {
        let digest = EntryDigest(key: key)
        let (plan, scheduleAccessTimes, startWorker) = state.withLock { state -> (DiskState.ReadPlan, Bool, Bool) in
            let clock = state.clock
            let (plan, schedule) = state.disk.planRead(key, counting: countingLookup, sizeLimit: sizeLimit, now: clock)
            switch plan {
            case .staged: if countingLookup { state.report.countLookup(found: true) }
            case .indexed, .unindexed: state.report.countFileReads()
            case .miss: if countingLookup { state.report.countLookup(found: false) }
            case .deferred: break
            }
            // Files that could not be read held up loading the index or a scan: try again now.
            let owed = state.disk.takeOwedWork(now: clock, interval: configuration.unreadableRetryInterval)
            return (plan, schedule, owed.map { state.work.enqueue($0) } ?? false)
        }
        if scheduleAccessTimes { scheduleAccessTimeWrite() }
        if startWorker { self.startWorker() }

        let generation: UInt64?
        switch plan {
        case .staged(let record): return .found(record)
        case .miss: return .missing
        case .deferred: return .deferred
        case .indexed(let indexed): generation = indexed
        case .unindexed: generation = nil
        }

        let path = paths.entry(digest)
        do {
            let record = try EntryCodec.decode(try configuration.reader.readFile(path, for: .entry), expectedKey: key)
            let removed = state.withLock { state -> Bool in
                // Read before the index was complete: it may be a file removed since.
                let removed = generation == nil && state.disk.wasRemoved(digest, latestResponseDate: record.latestResponseDate)
                if countingLookup { state.report.countLookup(found: !removed) }
                return removed
            }
            return removed ? .missing : .found(record)
        } catch let error as FileError where error.isMissing {
            // Evicted by another process, or the directory was deleted: forget the entry.
            let start = state.withLock { state -> Bool in
                if countingLookup { state.report.countLookup(found: false) }
                return state.disk.fileVanished(digest, generation: generation) && state.work.enqueue(.discard([digest]))
            }
            if start { self.startWorker() }
        } catch let error as BinaryDecodingError {
            let failure = CachingError(.corruptEntry, "\(path): \(error)")
            let start = state.withLock { state -> Bool in
                if countingLookup { state.report.countLookup(found: false) }
                state.report.noteCorrupt(failure)
                return state.disk.fileCorrupt(digest, generation: generation) && state.work.enqueue(.discard([digest]))
            }
            if start { self.startWorker() }
        } catch {
            // Unreadable for a reason that may pass (permissions, Data Protection while the device
            // is locked, an I/O error): a miss; the file stays, to be read again next time.
            let failure = CachingError(.fileUnreadable, "\(error)")
            state.withLock { state in
                if countingLookup { state.report.countLookup(found: false) }
                state.report.noteUnavailable(failure)
            }
        }
        return .missing
    }
}
