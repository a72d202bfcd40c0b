import Foundation

/// The disk tier's worker: everything that writes or deletes files — entry files, the journal,
/// the snapshot — and keeps the directory and the index in step. It owns what only it touches
/// (the directory's condition, the open journal, the snapshot and journal sizes, index changes
/// not yet journaled) and shares `DiskStore.State` with the store's readers through its lock.
///
/// Threading: every method runs on the store's serial worker queue (`DiskStore.worker`), or in
/// the store's `deinit`, when no work is queued any more (every queued block holds the store).
final class DiskWorker: @unchecked Sendable {
    // @unchecked: its mutable state is confined to the store's serial worker queue (and deinit).
    typealias Operation = DiskStore.Operation
    typealias Paths = DiskStore.Paths

    /// The directories are known to exist (cleared after a failed write, so the next one checks).
    private var directoryReady = false
    /// The directories could not be created; once they can, the index is reconciled with
    /// whatever the directory holds.
    private var directoryFailed = false
    /// The directory was deleted while the store ran. Only writing an entry recreates it;
    /// until then journal appends and snapshots are skipped (there is nothing to describe).
    private var directoryDeleted = false
    private var journal: JournalFile?
    private var snapshotSize = 0
    private var journalSize = 0
    /// The journal on disk is missing records (an append failed, it was replaced, or it held
    /// damaged bytes): the next settle writes a fresh snapshot.
    private var snapshotNeeded = false
    /// Index changes made in memory and not yet appended to the journal.
    private var pendingJournal: [DiskIndex.JournalRecord] = []

    private let configuration: DiskStore.Configuration
    private let paths: Paths
    /// What the store's readers and the worker share.
    private let state: Locked<DiskStore.State>

    /// Called once, when `open` has put the loaded index in place (or found none to load).
    private var indexLoaded: (@Sendable () -> Void)?

    /// `directoryReady`: the store created (or found) the directory; `indexLoaded` is called
    /// once the `open` operation has loaded the index.
    init(configuration: DiskStore.Configuration, paths: Paths, state: Locked<DiskStore.State>,
         directoryReady: Bool, indexLoaded: @escaping @Sendable () -> Void) {
        self.configuration = configuration
        self.paths = paths
        self.state = state
        self.directoryReady = directoryReady
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

    // MARK: - The loop

    /// Performs queued operations until none are left, settling the index after each batch.
    func drain() {
        while true {
            let operations = state.withLock { state -> [Operation] in
                let operations = state.work.operations
                state.work.operations = []
                return operations
            }
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
        }
    }

    func publishMetadataSize() {
        let size = snapshotSize + journalSize
        state.withLock { $0.limits.metadataBytes = size }
    }

    // MARK: - Writing entries

    private func write(_ digest: EntryDigest) {
        let job = state.withLock { state -> (record: CacheRecord, sequence: UInt64, limit: Int)? in
            state.staging.scheduled.remove(digest)
            guard let staged = state.staging.records[digest] else { return nil }  // removed meanwhile
            return (staged.record, staged.sequence, state.limits.maximumEntryBytes)
        }
        guard let job else { return }

        let data = EntryCodec.encode(job.record)
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

        let entry = state.withLock { state -> DiskIndex.Entry? in
            // Gone from the staged map means removed after the rename: the file must go.
            guard let current = state.staging.records[digest] else { return nil }
            if current.sequence == job.sequence { state.staging.records.removeValue(forKey: digest) }
            let entry = DiskIndex.Entry(
                fileSize: data.count,
                latestResponseDate: job.record.latestResponseDate,
                lastAccess: current.lastAccess
            )
            state.catalog.index.put(digest, entry)
            state.accessTimes.touched.remove(digest)
            if case .unavailable = state.health.status { state.health.status = .available }
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
        state.withLock { state in
            if state.staging.records[digest]?.sequence == sequence { state.staging.records.removeValue(forKey: digest) }
            state.catalog.index.remove(digest)
            state.accessTimes.touched.remove(digest)
        }
        removeEntryFile(digest)
        pendingJournal.append(.remove(digest))
    }

    /// Writes `data` to a temporary file and renames it over the entry. Returns false when the
    /// record was removed before the rename (nothing is left behind).
    private func writeEntryFile(_ digest: EntryDigest, _ data: Data) throws -> Bool {
        try prepareDirectory()
        let synchronize = configuration.synchronizesWrites
        let temporary = paths.temporaryFile(in: paths.entries)
        do {
            try FileIO.createFile(temporary, contents: data, mode: 0o600, synchronize: synchronize)
        } catch let error as FileError where error.isMissing {
            // The directory was deleted under us: everything in it is gone; recreate and retry once.
            directoryVanished()
            try prepareDirectory()
            try FileIO.createFile(temporary, contents: data, mode: 0o600, synchronize: synchronize)
        }
        guard state.withLock({ $0.staging.records[digest] != nil }) else {
            FileIO.removeQuietly(temporary)
            return false
        }
        do {
            try FileIO.replaceItem(at: paths.entry(digest), with: temporary)
        } catch {
            FileIO.removeQuietly(temporary)
            throw error
        }
        if synchronize { try? FileIO.synchronizeDirectory(paths.entries) }
        return true
    }

    private func removeEntryFile(_ digest: EntryDigest) {
        do {
            try FileIO.removeFile(paths.entry(digest))
        } catch {
            reportWriteFailure(error)
        }
    }

    private func discard(_ digests: [EntryDigest]) {
        // An entry back in the index was written again after the removal: keep that file.
        let doomed = state.withLock { state in digests.filter { !state.catalog.index.contains($0) } }
        for digest in doomed {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }
    }

    private func removeAllFiles() {
        guard !directoryDeleted, let names = try? FileIO.contentsOfDirectory(paths.entries) else {
            return  // no directory, nothing to remove
        }
        // Entries in the index were stored after `removeAll` was called.
        let keep = state.withLock { state in
            Set(names.compactMap(EntryDigest.init(fileName:)).filter { state.catalog.index.contains($0) })
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
        guard !directoryReady else { return }
        do {
            try FileIO.createDirectories(paths.root, mode: 0o700)
            try FileIO.createDirectory(paths.entries, mode: 0o700)
        } catch {
            directoryFailed = true
            throw error
        }
        directoryReady = true
        directoryDeleted = false
        if directoryFailed {
            // The directory could not be used before: learn what it holds now.
            directoryFailed = false
            snapshotNeeded = true
            state.withLock { state in
                // This worker's own loop picks it up (`drain` runs until no operation is left).
                state.catalog.pendingReconciles += 1
                state.work.operations.append(.reconcile(full: false))
            }
        }
    }

    /// The directory was deleted while the store ran: forget the files it held.
    private func directoryVanished() {
        directoryReady = false
        directoryDeleted = true
        journal?.close()
        journal = nil
        snapshotSize = 0
        journalSize = 0
        pendingJournal.removeAll()
        snapshotNeeded = true
        state.withLock { state in
            state.catalog.index.removeAll()
            state.accessTimes.touched.removeAll()
        }
    }

    private func reportWriteFailure(_ error: Error) {
        let failure: CachingError
        if let error = error as? FileError, error.meansUnwritable {
            failure = CachingError(.diskUnavailable, error.description)
        } else {
            failure = CachingError(.diskWriteFailed, "\(error)")
        }
        directoryReady = false  // check the directory again before the next write
        state.withLock { state in
            state.counters.writeFailures += 1
            state.health.status = .unavailable(failure)
            state.health.lastError = failure
        }
    }

    // MARK: - Journal and snapshot

    /// Appends the pending index changes and the access times of recent hits, in one `write`.
    func appendJournal() {
        let touches = state.withLock { state -> [DiskIndex.JournalRecord] in
            guard !state.accessTimes.touched.isEmpty else { return [] }
            var times: [(EntryDigest, Date)] = []
            times.reserveCapacity(state.accessTimes.touched.count)
            for digest in state.accessTimes.touched {
                if let entry = state.catalog.index.entry(for: digest) { times.append((digest, entry.lastAccess)) }
            }
            state.accessTimes.touched.removeAll()
            times.sort { $0.1 < $1.1 }
            return times.map { .touch($0.0, $0.1) }
        }
        let records = pendingJournal + touches
        guard !records.isEmpty else { return }
        do {
            guard let journal = try openJournal() else {
                pendingJournal.removeAll()  // the directory is gone, and what they describe
                return
            }
            try journal.append(DiskIndex.encodeJournal(records), synchronize: configuration.synchronizesWrites)
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
        let opened = try JournalFile(path: paths.journal)
        journal = opened
        journalSize = (try? opened.size()) ?? 0
        return opened
    }

    /// Whether `entries/` still exists; notes a deleted directory (without recreating it).
    private func directoryExists() -> Bool {
        guard !directoryDeleted else { return false }
        if (try? FileIO.status(paths.entries))?.isDirectory == true { return true }
        directoryVanished()
        return false
    }

    private func compactIfNeeded() {
        let capacity = state.withLock { $0.limits.capacity }
        let threshold = min(configuration.journalCompactionThreshold, max(4096, capacity / 16))
        if snapshotNeeded || journalSize >= threshold {
            writeSnapshot()
        }
    }

    /// Writes the whole index as a new snapshot (temporary file and rename), then empties the
    /// journal. A crash between the two replays journal records the snapshot already holds,
    /// which changes nothing.
    func writeSnapshot() {
        let data = state.withLock { state -> Data in
            state.accessTimes.touched.removeAll()  // their access times are in the snapshot
            return state.catalog.index.snapshotData()
        }
        // A deleted directory keeps `snapshotNeeded` until an entry write recreates it.
        guard directoryExists() else { return }
        let synchronize = configuration.synchronizesWrites
        let temporary = paths.temporaryFile(in: paths.root)
        do {
            try FileIO.createFile(temporary, contents: data, mode: 0o600, synchronize: synchronize)
            try FileIO.replaceItem(at: paths.index, with: temporary)
            if synchronize { try? FileIO.synchronizeDirectory(paths.root) }
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
    private func enforceCapacity(limit: Int = .max) {
        let removalSize = DiskIndex.JournalRecord.remove(EntryDigest(high: 0, low: 0)).encodedSize
        // Each pass journals its evictions, which may fold the journal; a few passes always suffice.
        for _ in 0..<8 {
            let pending = pendingJournal.reduce(0) { $0 + $1.encodedSize }
            let metadata = snapshotSize + journalSize + pending
            let victims = state.withLock { state -> [EntryDigest] in
                var total = state.catalog.index.byteCount + metadata
                var victims: [EntryDigest] = []
                while total > min(state.limits.capacity, limit), let victim = state.catalog.index.popLeastRecent() {
                    state.accessTimes.touched.remove(victim.digest)
                    victims.append(victim.digest)
                    total += removalSize - victim.entry.fileSize
                }
                return victims
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
        let metadata = snapshotSize + journalSize
        let removeMetadata = state.withLock { state in
            state.catalog.index.isEmpty && metadata > min(state.limits.capacity, limit)
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

    // MARK: - Opening

    /// Loads the index from the snapshot and journal — without what was removed since the store
    /// opened (the tombstones) — then reconciles it with the directory, which rebuilds it from
    /// the entry files' headers when it could not be loaded. Lookups use the loaded index as soon
    /// as it is in place; until then they read entry files directly.
    private func open() {
        var loaded: DiskIndex?
        var damagedJournalBytes = 0
        var metadataBytes = 0
        let origin: DiskStore.IndexOrigin
        do {
            let snapshot = try FileIO.readFile(paths.index)
            let journal = (try? FileIO.readFile(paths.journal)) ?? Data()
            do {
                let result = try DiskIndex.load(snapshot: snapshot, journal: journal)
                loaded = result.index
                damagedJournalBytes = result.damagedJournalBytes
                snapshotSize = snapshot.count
                journalSize = journal.count
                metadataBytes = snapshot.count + journal.count
                // A damaged journal is folded into a fresh snapshot by the reconcile below.
                snapshotNeeded = result.damagedJournalBytes > 0
                origin = .loaded
            } catch {
                origin = .rebuilt(reason: "index snapshot unreadable: \(error)")
            }
        } catch {
            origin = .rebuilt(reason: "no index snapshot (\(error))")
        }
        state.withLock { state in
            state.health.indexOrigin = origin
            state.counters.damagedJournalBytes = damagedJournalBytes
            state.limits.metadataBytes = metadataBytes
            guard var index = loaded else { return }
            let tombstones = state.catalog.tombstones
            if tombstones.all {
                index.removeAll()
            } else {
                for element in index.entries
                where tombstones.covers(element.key, latestResponseDate: element.value.latestResponseDate) {
                    index.remove(element.key)
                }
            }
            state.catalog.index = index
            state.catalog.indexReady = true
        }
        indexLoaded?()
        indexLoaded = nil
        // Also when the index loaded: files written after the last journal append before a
        // crash, or by another process, are adopted (or deleted) so they cannot hold space forever.
        reconcile(full: loaded == nil)
    }

    // MARK: - Reconciling the index with the directory

    /// Compares the index with the files in `entries/`: entries whose file is gone are dropped;
    /// files the index does not list (written just before a crash, or by another process) are
    /// adopted as least recently used after their header checks out, or deleted; abandoned
    /// temporary files and foreign files in `entries/` are deleted. When `full`, the index could
    /// not be loaded and this rebuilds it. Lists the directory but reads only unlisted files.
    private func reconcile(full: Bool) {
        defer { finishReconcile() }
        let names: [String]
        do {
            guard !directoryDeleted else { return }
            names = try FileIO.contentsOfDirectory(paths.entries)
        } catch let error as FileError where error.isMissing {
            directoryVanished()  // deleted since it opened: the next write recreates it
            return
        } catch {
            reportWriteFailure(error)
            return
        }
        var found = Set<EntryDigest>()
        found.reserveCapacity(names.count)
        var others: [String] = []
        for name in names {
            if let digest = EntryDigest(fileName: name) { found.insert(digest) } else { others.append(name) }
        }

        let (orphans, missing) = state.withLock { state -> ([EntryDigest], [EntryDigest]) in
            var missing: [EntryDigest] = []
            for element in state.catalog.index.entries where !found.contains(element.key) {
                missing.append(element.key)
            }
            for digest in missing {
                state.catalog.index.remove(digest)
                state.accessTimes.touched.remove(digest)
            }
            // Files removed since the store opened have their discard queued: not read here (a
            // corrupt one was counted when a lookup found it).
            let orphans: [EntryDigest] = found.filter { !state.catalog.index.contains($0) && !state.catalog.tombstones.covers($0) }
            return (orphans, missing)
        }
        for digest in missing { pendingJournal.append(.remove(digest)) }

        var adopted: [(digest: EntryDigest, entry: DiskIndex.Entry)] = []
        var corrupt = 0
        for digest in orphans {
            let path = paths.entry(digest)
            switch Self.readEntryHeader(path) {
            case .valid(let header, let status) where EntryDigest(key: header.key) == digest:
                adopted.append((digest, DiskIndex.Entry(
                    fileSize: status.size,
                    latestResponseDate: header.latestResponseDate,
                    lastAccess: status.modificationDate
                )))
            case .gone:
                break
            default:
                FileIO.removeQuietly(path)
                corrupt += 1
            }
        }
        // Newest first: each adoption goes in front, so the oldest file ends up evicted first.
        adopted.sort { $0.entry.lastAccess > $1.entry.lastAccess }
        let (adoptedEntries, removed) = state.withLock { state -> ([DiskIndex.JournalRecord], [EntryDigest]) in
            state.counters.entryFileReads += orphans.count
            if corrupt > 0 {
                state.counters.corruptEntriesRemoved += corrupt
                state.health.lastError = CachingError(.corruptEntry, "\(corrupt) unreadable entry file(s) in \(paths.entries)")
            }
            var records: [DiskIndex.JournalRecord] = []
            var removed: [EntryDigest] = []
            for item in adopted where !state.catalog.index.contains(item.digest) {
                // Removed by the app since the store opened: delete it rather than bring it back.
                if state.catalog.tombstones.covers(item.digest, latestResponseDate: item.entry.latestResponseDate) {
                    removed.append(item.digest)
                    continue
                }
                state.catalog.index.adopt(item.digest, item.entry)
                if let entry = state.catalog.index.entry(for: item.digest) { records.append(.put(item.digest, entry)) }
            }
            return (records, removed)
        }
        pendingJournal.append(contentsOf: adoptedEntries)
        for digest in removed {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }

        for name in others {
            let path = paths.entries + "/" + name
            if name.hasPrefix(Paths.temporaryPrefix), !isAbandonedTemporaryFile(name: name, path: path) { continue }
            FileIO.removeQuietly(path)  // not ours: `entries/` holds only entry files
        }
        for name in (try? FileIO.contentsOfDirectory(paths.root)) ?? [] where name.hasPrefix(Paths.temporaryPrefix) {
            let path = paths.root + "/" + name
            if isAbandonedTemporaryFile(name: name, path: path) { FileIO.removeQuietly(path) }
        }
        if full || !adoptedEntries.isEmpty || !missing.isEmpty {
            snapshotNeeded = true
        }
    }

    /// Marks the index complete (also when reconciling failed: it then holds what it could
    /// load). Once no reconcile is pending the index lists every file, so removals go through
    /// it alone and the tombstones can go.
    private func finishReconcile() {
        state.withLock { state in
            state.catalog.indexReady = true
            state.catalog.pendingReconciles -= 1
            if state.catalog.pendingReconciles <= 0 {
                state.catalog.pendingReconciles = 0
                state.catalog.tombstones = DiskStore.Tombstones()
            }
        }
    }

    enum HeaderReading {
        case valid(EntryCodec.Header, FileStatus)
        case corrupt
        case gone
    }

    /// The header of an entry file, read from its first bytes only.
    static func readEntryHeader(_ path: String) -> HeaderReading {
        do {
            var reading = try FileIO.readPrefix(path, length: EntryCodec.headerProbeSize)
            for _ in 0..<2 {
                var required = 0
                let header = try reading.data.withUnsafeBytes { buffer in
                    try EntryCodec.decodeHeader(buffer, fileSize: reading.fileSize, requiredPrefixLength: &required)
                }
                if let header { return .valid(header, reading.status) }
                // A key longer than the probe: read exactly the header once.
                guard required > reading.data.count, required <= reading.fileSize else { return .corrupt }
                reading = try FileIO.readPrefix(path, length: required)
            }
            return .corrupt
        } catch let error as FileError where error.isMissing {
            return .gone
        } catch {
            return .corrupt
        }
    }

    /// A temporary file whose writer is gone: its process no longer runs, or it is older than
    /// any write takes. (A crash between creating and renaming one leaves it behind.)
    private func isAbandonedTemporaryFile(name: String, path: String) -> Bool {
        let rest = name.dropFirst(Paths.temporaryPrefix.count)
        guard let pid = Int32(rest.prefix { $0.isASCII && $0.isNumber }), FileIO.processExists(pid) else {
            return true
        }
        guard let status = try? FileIO.status(path) else { return false }
        // File times are wall-clock times, so this compares with the wall clock, not `now`.
        return Date().timeIntervalSince(status.modificationDate) > Self.abandonedTemporaryFileAge
    }
}
