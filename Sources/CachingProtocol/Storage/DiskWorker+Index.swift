import Foundation

// The index on disk (journal and snapshot) and the capacity.
extension DiskWorker {
    // MARK: - Journal and snapshot

    /// Appends the pending index changes and the access times of recent hits, in one `write`.
    /// Not while the index on disk could not be read: the changes wait for it to load.
    func appendJournal() {
        let touches = state.withLock { state -> [DiskIndex.JournalRecord]? in
            state.disk.persistsIndex ? state.disk.takeAccessTimes() : nil
        }
        guard let touches else { return }
        let records = pendingJournal + touches
        guard !records.isEmpty else { return }
        do {
            guard let journal = try openJournal() else {
                pendingJournal.removeAll()  // the directory is gone, and what they describe
                return
            }
            try journal.append(DiskIndex.encodeJournal(records), durability: indexDurability)
            pendingJournal.removeAll()
            journalSize = (try? journal.size()) ?? journalSize
        } catch {
            reportWriteFailure(error)
            // The records are not on disk; the next snapshot carries them instead.
            pendingJournal.removeAll()
            snapshotNeeded = true
            if let size = try? journal?.size() { journalSize = size }
        }
    }

    /// The open journal, reopened when the file was deleted or replaced behind our back; nil
    /// when the whole directory was deleted (a journal append must not recreate it).
    private func openJournal() throws -> JournalFile? {
        if let journal, journal.isCurrent { return journal }
        if journal != nil {
            // Replaced or deleted: what it held is lost, so the next snapshot must restate it all.
            journal?.close()
            journal = nil
            snapshotNeeded = true
        }
        guard directoryExists() else { return nil }
        let opened = try JournalFile(path: paths.journal, protection: protection)
        journal = opened
        journalSize = (try? opened.size()) ?? 0
        return opened
    }

    /// Whether `entries/` still exists; notes a deleted directory (without recreating it).
    private func directoryExists() -> Bool {
        guard directory != .deleted else { return false }
        if (try? FileIO.status(paths.entries))?.isDirectory == true { return true }
        directoryVanished()
        return false
    }

    func compactIfNeeded() {
        let capacity = state.withLock { $0.limits.capacity }
        let threshold = min(configuration.journalCompactionThreshold, max(4096, capacity / 16))
        if snapshotNeeded || journalSize >= threshold {
            writeSnapshot()
        }
    }

    /// Writes the whole index as a new snapshot (temporary file and rename), then empties the
    /// journal. A crash between the two replays journal records the snapshot already holds,
    /// which changes nothing. Not while the index on disk could not be read: this would replace
    /// it with the little this store knows.
    func writeSnapshot() {
        let data = state.withLock { state -> Data? in
            state.disk.persistsIndex ? state.disk.takeSnapshot() : nil
        }
        guard let data else { return }
        // A deleted directory keeps `snapshotNeeded` until an entry write recreates it.
        guard directoryExists() else { return }
        let temporary = paths.temporaryFile(in: paths.root)
        do {
            try FileIO.createFile(temporary, contents: data, mode: 0o600, protection: protection, durability: indexDurability)
            try FileIO.replaceItem(at: paths.index, with: temporary)
            try? FileIO.synchronizeDirectory(paths.root, indexDurability)
            snapshotSize = data.count
            pendingJournal.removeAll()
            try openJournal()?.truncate()
            journalSize = 0
            snapshotNeeded = false
        } catch {
            FileIO.removeQuietly(temporary)
            reportWriteFailure(error)
            snapshotNeeded = true
        }
    }

    // MARK: - Capacity

    /// Evicts least recently used entries until entries, snapshot and journal fit the capacity
    /// (or `limit`, when smaller).
    func enforceCapacity(limit: Int = .max) {
        let removalSize = DiskIndex.JournalRecord.remove(EntryDigest(high: 0, low: 0)).encodedSize
        // Each pass journals its evictions, which may fold the journal; a few passes always suffice.
        for _ in 0..<8 {
            let pending = pendingJournal.reduce(0) { $0 + $1.encodedSize }
            let metadata = snapshotSize + journalSize + pinsSize + pending
            let victims = state.withLock { state in
                state.disk.evict(toFit: min(state.limits.capacity, limit), metadataBytes: metadata, removalRecordSize: removalSize)
            }
            if victims.isEmpty { break }
            for digest in victims {
                removeEntryFile(digest)
                pendingJournal.append(.remove(digest))
            }
            appendJournal()
            compactIfNeeded()
        }
        // With no entries left, an index and journal that alone exceed a tiny capacity describe
        // nothing: remove them (the next open rebuilds an empty index from an empty directory).
        // Not an index that could not be read: this store does not know what it lists.
        let metadata = snapshotSize + journalSize
        let removeMetadata = state.withLock { state in
            state.disk.persistsIndex && state.disk.index.isEmpty && metadata > min(state.limits.capacity, limit)
        }
        if removeMetadata {
            journal?.close()
            journal = nil
            pendingJournal.removeAll()
            FileIO.removeQuietly(paths.journal)
            FileIO.removeQuietly(paths.index)
            snapshotSize = 0
            journalSize = 0
            snapshotNeeded = false
        }
    }
}
