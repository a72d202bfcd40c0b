import Foundation

/// The disk tier's worker: everything that writes or deletes files — entry files, the journal,
/// the snapshot — and keeps the directory and the index in step. It owns what only it touches
/// (the directory's condition, the open journal, the snapshot and journal sizes, index changes
/// not yet journaled, the Data Protection class it applies) and changes `DiskState`, which it
/// shares with the store's readers, only through that type's operations, under the store's lock.
///
/// Its files: this one (the loop, entry writes and deletions, the directory), `+Index` (journal,
/// snapshot, capacity) and `+Scan` (opening, reconciling the index with the directory).
///
/// Threading: every method runs on the store's serial worker queue (`DiskStore.worker`), or in
/// the store's `deinit`, when no work is queued any more (every queued block holds the store).
final class DiskWorker: @unchecked Sendable {
    // @unchecked: its mutable state is confined to the store's serial worker queue (and deinit).
    typealias Operation = DiskStore.Operation
    typealias Paths = DiskStore.Paths

    /// What the worker knows of the cache directory.
    enum DirectoryCondition: Equatable {
        /// It exists, with `entries/`.
        case ready
        /// Check it (and create what is missing) before the next write: a write failed, or it
        /// could not be created when the store opened.
        case unchecked
        /// It could not be created: once it can, the index is reconciled with what it holds.
        case unusable
        /// It was deleted while the store ran. Only writing an entry recreates it (then the index
        /// is reconciled with what it holds, as after `unusable`); until then journal appends and
        /// snapshots are skipped (there is nothing to describe).
        case deleted
    }

    // Internal rather than private only because the worker's files (`+Index`, `+Scan`) use them.
    var directory: DirectoryCondition
    var journal: JournalFile?
    var snapshotSize = 0
    var journalSize = 0
    /// The size of the pins file, counted with the index files against the capacity.
    var pinsSize = 0
    /// When records past the age limit were last removed, on the store's clock (`DiskWorker+Expiry`).
    var lastExpiry: Date?
    /// The journal on disk is missing records (an append failed, it was replaced, or it held
    /// damaged bytes): the next settle writes a fresh snapshot.
    var snapshotNeeded = false
    /// Index changes made in memory and not yet appended to the journal.
    var pendingJournal: [DiskIndex.JournalRecord] = []
    /// The Data Protection class of the files and directories created from now on.
    var protection: CachingFileProtection

    let configuration: DiskStore.Configuration
    let paths: Paths
    /// What the store's readers and the worker share.
    let state: Locked<DiskStore.Shared>

    /// Called once, when `open` has put the loaded index in place (or found none to load).
    var indexLoaded: (@Sendable () -> Void)?

    /// `directoryReady`: the store created (or found) the directory; `indexLoaded` is called
    /// once the `open` operation has tried to load the index.
    init(configuration: DiskStore.Configuration, paths: Paths, state: Locked<DiskStore.Shared>,
         directoryReady: Bool, indexLoaded: @escaping @Sendable () -> Void) {
        self.configuration = configuration
        self.paths = paths
        self.state = state
        directory = directoryReady ? .ready : .unchecked
        protection = configuration.fileProtection
        self.indexLoaded = indexLoaded
    }

    /// Journals the access times of hits not journaled yet and closes the journal (the store is
    /// going; a directory deleted meanwhile is not recreated for them).
    func close() {
        appendJournal()
        journal?.close()
        journal = nil
    }

    /// Temporary files older than this whose process still runs are treated as abandoned.
    static let abandonedTemporaryFileAge: TimeInterval = 300

    /// How far the journal and snapshot are pushed to the device: they must survive a power loss
    /// to be worth syncing (`Configuration.synchronizesWrites`).
    var indexDurability: FileIO.Durability { configuration.synchronizesWrites ? .full : .none }
    /// Entry files are only a cache: a torn one fails its checksum and is a miss.
    var entryDurability: FileIO.Durability { configuration.synchronizesWrites ? .handedToDevice : .none }

    // MARK: - The loop

    /// Performs queued operations until none are left, settling the index after each batch.
    func drain() {
        while true {
            let operations = state.withLock { $0.work.takeAll() }
            if operations.isEmpty { return }
            for operation in operations {
                perform(operation)
            }
            settle()
        }
    }

    /// Journals what changed, folds the journal into a snapshot when it has grown, evicts down to
    /// the capacity, and publishes the metadata size.
    func settle() {
        appendJournal()
        compactIfNeeded()
        refreshPins()  // another process may have pinned what eviction is about to choose from
        expireIfDue()
        enforceCapacity()
        publishMetadataSize()
    }

    private func perform(_ operation: Operation) {
        switch operation {
        case .write(let digest): write(digest)
        case .discard(let digests): discard(digests)
        case .removeAll: removeAllFiles()
        case .enforceCapacity: break  // `settle` does it after every batch
        case .trim(let bytes): enforceCapacity(limit: bytes)
        case .reconcile(let full): reconcile(full: full)
        case .open: open()
        case .protect(let protection): protect(protection)
        case .persistIndex: snapshotNeeded = true
        case .expire: lastExpiry = nil  // `settle`, after this batch, removes them
        }
    }

    func publishMetadataSize() {
        let size = snapshotSize + journalSize + pinsSize
        state.withLock { $0.limits.metadataBytes = size }
    }

    // MARK: - Writing entries

    private func write(_ digest: EntryDigest) {
        let job = state.withLock { state -> (record: CacheRecord, sequence: UInt64, limit: Int)? in
            guard let staged = state.disk.beginWrite(digest) else { return nil }  // removed meanwhile
            return (staged.record, staged.sequence, state.limits.maximumEntryBytes)
        }
        guard let job else { return }

        let data = EntryCodec.encodedParts(job.record)
        guard data.count <= job.limit else {
            // Too large for this tier once encoded: not stored, and the old record goes too.
            dropWrite(digest, sequence: job.sequence)
            return
        }
        do {
            guard try writeEntryFile(digest, data) else { return }  // removed while written
        } catch {
            reportWriteFailure(error)
            dropWrite(digest, sequence: job.sequence)
            return
        }

        let summary = EntrySummary(job.record)  // what listings show of it, kept in the index
        let entry = state.withLock { state -> DiskIndex.Entry? in
            // Unstaged meanwhile means removed after the rename: the file must go.
            let entry = state.disk.markWritten(digest, sequence: job.sequence, fileSize: data.count,
                                               latestResponseDate: job.record.latestResponseDate, summary: summary)
            if entry != nil { state.report.noteWriteSucceeded() }
            return entry
        }
        if let entry {
            pendingJournal.append(.put(digest, entry))
        } else {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }
    }

    /// A write that will not happen: unstage it (unless a newer one is staged) and delete the
    /// old file, which holds a record the caller has replaced.
    private func dropWrite(_ digest: EntryDigest, sequence: UInt64) {
        state.withLock { $0.disk.dropWrite(digest, sequence: sequence) }
        removeEntryFile(digest)
        pendingJournal.append(.remove(digest))
    }

    /// Writes `data` (an encoded entry's parts) to a temporary file and renames it over the entry.
    /// Returns false when the record was removed before the rename (nothing is left behind).
    private func writeEntryFile(_ digest: EntryDigest, _ data: (parts: [Data], count: Int)) throws -> Bool {
        try prepareDirectory()
        let temporary = paths.temporaryFile(in: paths.entries)
        do {
            try FileIO.createFile(temporary, parts: data.parts, mode: 0o600, protection: protection, durability: entryDurability)
        } catch let error as FileError where error.isMissing {
            // The directory was deleted under us: everything in it is gone; recreate and retry once.
            directoryVanished()
            try prepareDirectory()
            try FileIO.createFile(temporary, parts: data.parts, mode: 0o600, protection: protection, durability: entryDurability)
        }
        guard state.withLock({ $0.disk.isStaged(digest) }) else {
            FileIO.removeQuietly(temporary)
            return false
        }
        do {
            try FileIO.replaceItem(at: paths.entry(digest), with: temporary)
        } catch {
            FileIO.removeQuietly(temporary)
            throw error
        }
        try? FileIO.synchronizeDirectory(paths.entries, entryDurability)
        return true
    }

    func removeEntryFile(_ digest: EntryDigest) {
        do {
            try FileIO.removeFile(paths.entry(digest))
        } catch {
            reportWriteFailure(error)
        }
    }

    private func discard(_ digests: [EntryDigest]) {
        // An entry back in the index was written again after the removal: keep that file.
        let doomed = state.withLock { $0.disk.filesToDiscard(digests) }
        for digest in doomed {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }
    }

    private func removeAllFiles() {
        guard directory != .deleted, let names = try? FileIO.contentsOfDirectory(paths.entries) else {
            return  // no directory, nothing to remove
        }
        // Entries in the index were stored after `removeAll` was called.
        let keep = state.withLock { state in
            Set(names.compactMap(EntryDigest.init(fileName:)).filter { state.disk.isIndexed($0) })
        }
        for name in names {
            if let digest = EntryDigest(fileName: name), keep.contains(digest) { continue }
            let path = paths.entries + "/" + name
            if name.hasPrefix(Paths.temporaryPrefix), !isAbandonedTemporaryFile(name: name, path: path) { continue }
            FileIO.removeQuietly(path)
        }
        pendingJournal = [.clear] + pendingJournal.filter {
            if case .put(let digest, _) = $0 { return keep.contains(digest) }
            return false
        }
        snapshotNeeded = true
    }

    // MARK: - Directory

    /// Makes sure the cache directory and `entries/` exist (cheap once known), creating them
    /// if needed: also after the directory was deleted, so only entry writes call this then.
    func prepareDirectory() throws {
        guard directory != .ready else { return }
        do {
            try FileIO.createDirectories(paths.root, mode: 0o700, protection: protection)
            try FileIO.createDirectory(paths.entries, mode: 0o700, protection: protection)
        } catch {
            directory = .unusable
            throw error
        }
        let previous = directory
        directory = .ready
        if previous == .unusable || previous == .deleted {
            // It could not be used, or was gone: learn what it holds now (another process may
            // have written there). This worker's own loop runs it (`drain` runs until no
            // operation is left).
            snapshotNeeded = true
            state.withLock { state in
                state.disk.scanQueued()
                state.work.enqueueFromWorker(.reconcile(full: false))
            }
        }
    }

    /// The directory was deleted while the store ran: forget the files it held.
    func directoryVanished() {
        directory = .deleted
        journal?.close()
        journal = nil
        snapshotSize = 0
        journalSize = 0
        pendingJournal.removeAll()
        snapshotNeeded = true
        state.withLock { $0.disk.vanish() }
    }

    func reportWriteFailure(_ error: Error) {
        let failure: CachingError
        if let error = error as? FileError, error.meansUnwritable {
            failure = CachingError(.diskUnavailable, error.description)
        } else {
            failure = CachingError(.diskWriteFailed, "\(error)")
        }
        if directory == .ready { directory = .unchecked }  // check the directory again before the next write
        state.withLock { $0.report.noteWriteFailure(failure) }
    }

    // MARK: - Data Protection

    /// Gives the directories, the index files and every entry file `protection`, and every file
    /// created from now on. Where there is no Data Protection, only remembers it.
    private func protect(_ protection: CachingFileProtection) {
        self.protection = protection
        guard CachingFileProtection.isSupported, directory != .deleted else { return }
        for path in [paths.root, paths.entries, paths.index, paths.journal] {
            protection.apply(toItemAt: path)
        }
        for name in (try? FileIO.contentsOfDirectory(paths.entries)) ?? [] where EntryDigest(fileName: name) != nil {
            protection.apply(toItemAt: paths.entries + "/" + name)
        }
    }
}
