import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The disk tier's file side effects: everything that writes, deletes or scans files — entry
/// files, the journal and snapshot of the index, the pins file — doing the work the ledger queued
/// (`DiskLedger.Work`) and keeping the directory and the index in step. It owns what only it
/// touches (the directory's condition, the open journal, the sizes of the index files, index
/// changes not yet journaled) and changes the ledger, which it shares with the store's readers,
/// only through that type's operations, under the store's lock.
///
/// Threading: every method runs on the store's serial worker queue (`DiskStore.worker`), or in
/// the store's `deinit`, when no work is queued any more (every queued block holds the store).
final class DiskWorker: @unchecked Sendable {
    // @unchecked: its mutable state is confined to the store's serial worker queue (and deinit).
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

    private var directory: DirectoryCondition
    private var journal: JournalFile?
    private var snapshotSize = 0
    private var journalSize = 0
    /// The size of the pins file, counted with the index files against the capacity.
    private var pinsSize = 0
    /// The journal on disk is missing records (an append failed, it was replaced, or it held
    /// damaged bytes): the next settle writes a fresh snapshot.
    private var snapshotNeeded = false
    /// Index changes made in memory and not yet appended to the journal.
    private var pendingJournal: [DiskIndex.JournalRecord] = []
    /// Called once, when `open` has put the loaded index in place (or found none to load).
    private var indexLoaded: (@Sendable () -> Void)?

    private let configuration: DiskStore.Configuration
    private let paths: Paths
    /// What the store's readers and the worker share.
    private let ledger: Locked<DiskLedger>

    /// `directoryReady`: the store created (or found) the directory; `indexLoaded` is called
    /// once the `open` work has tried to load the index.
    init(configuration: DiskStore.Configuration, paths: Paths, ledger: Locked<DiskLedger>,
         directoryReady: Bool, indexLoaded: @escaping @Sendable () -> Void) {
        self.configuration = configuration
        self.paths = paths
        self.ledger = ledger
        directory = directoryReady ? .ready : .unchecked
        self.indexLoaded = indexLoaded
    }

    /// The Data Protection class of the files and directories created from now on (the ledger's).
    private var protection: CachingFileProtection { ledger.withLock { $0.fileProtection } }

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
    private var indexDurability: FileIO.Durability { configuration.synchronizesWrites ? .full : .none }
    /// Entry files are only a cache: a torn one fails its checksum and is a miss.
    private var entryDurability: FileIO.Durability { configuration.synchronizesWrites ? .handedToDevice : .none }

    // MARK: - The loop

    /// Does the queued work until none is left, settling the index after each batch.
    func drain() {
        while true {
            let batch = ledger.withLock { $0.takeWork() }
            if batch.isEmpty { return }
            for work in batch {
                perform(work)
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

    private func perform(_ work: DiskLedger.Work) {
        switch work {
        case .write(let digest): write(digest)
        case .discard(let digests): discard(digests)
        case .removeAll: removeAllFiles()
        case .enforceCapacity: break  // `settle` does it after every batch
        case .trim(let bytes): enforceCapacity(limit: bytes)
        case .reconcile(let full): reconcile(full: full)
        case .open: open()
        case .protect(let protection): protect(protection)
        case .persistIndex: snapshotNeeded = true
        }
    }

    private func publishMetadataSize() {
        let size = snapshotSize + journalSize + pinsSize
        ledger.withLock { $0.metadataBytes = size }
    }

    // MARK: - Writing entries

    private func write(_ digest: EntryDigest) {
        // Nil when removed meanwhile.
        guard let job = ledger.withLock({ $0.beginWrite(digest) }) else { return }
        let fileSize: Int
        do {
            if let bodyFile = job.bodyFile {
                fileSize = try writeStreamedFile(digest, bodyFile, job)
            } else {
                fileSize = try writeEntryFile(digest, job)
            }
        } catch EntryWriteFailure.tooLarge {
            // Too large for this tier once encoded: not stored, and the old record goes too.
            return dropWrite(digest, sequence: job.sequence)
        } catch EntryWriteFailure.removed {
            return  // removed while written: nothing is left behind
        } catch {
            reportWriteFailure(error)
            return dropWrite(digest, sequence: job.sequence)
        }

        // What listings show of it, kept in the index.
        let summary = EntrySummary(job.record, firstBodyBytes: job.bodyFile?.appendedBytes)
        // Unstaged meanwhile means removed after the rename: the file must go.
        let entry = ledger.withLock {
            $0.markWritten(digest, sequence: job.sequence, fileSize: fileSize,
                           latestResponseDate: job.record.latestResponseDate, summary: summary)
        }
        if let entry {
            pendingJournal.append(.put(digest, entry))
        } else {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }
    }

    /// Why an entry file was not written, besides a failed system call.
    private enum EntryWriteFailure: Error {
        /// Larger than one entry may be, once encoded.
        case tooLarge
        /// The record was removed while its file was written.
        case removed
    }

    /// Encodes `job`'s record into a temporary file and renames it over the entry; returns the
    /// file's size.
    private func writeEntryFile(_ digest: EntryDigest, _ job: DiskLedger.WriteJob) throws -> Int {
        let data = EntryCodec.encodedParts(job.record)
        guard data.count <= job.limit else { throw EntryWriteFailure.tooLarge }
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
        try rename(temporary, over: digest)
        return data.count
    }

    /// Makes `bodyFile`, which holds the first variant's body of `job`'s record, a whole entry
    /// file and renames it over the entry; returns the file's size. The file is deleted unless
    /// it is renamed.
    private func writeStreamedFile(_ digest: EntryDigest, _ bodyFile: StreamedEntryFile, _ job: DiskLedger.WriteJob) throws -> Int {
        do {
            try prepareDirectory()
            let size = try bodyFile.finish(job.record, durability: entryDurability)
            guard size <= job.limit else { throw EntryWriteFailure.tooLarge }
            try rename(bodyFile.path, over: digest)
            bodyFile.keep()
            return size
        } catch {
            bodyFile.discard()
            // Its file is gone: with the directory, or alone (another process took it for abandoned).
            if let error = error as? FileError, error.isMissing { _ = directoryExists() }
            throw error
        }
    }

    /// Renames the whole file `temporary` over `digest`'s entry, unless the record was removed
    /// meanwhile (then the file is deleted and `removed` thrown).
    private func rename(_ temporary: String, over digest: EntryDigest) throws {
        guard ledger.withLock({ $0.isStaged(digest) }) else {
            FileIO.removeQuietly(temporary)
            throw EntryWriteFailure.removed
        }
        do {
            try FileIO.replaceItem(at: paths.entry(digest), with: temporary)
        } catch {
            FileIO.removeQuietly(temporary)
            throw error
        }
        try? FileIO.synchronizeDirectory(paths.entries, entryDurability)
    }

    /// A write that will not happen: unstage it (unless a newer one is staged) and delete the
    /// old file, which holds a record the caller has replaced.
    private func dropWrite(_ digest: EntryDigest, sequence: UInt64) {
        ledger.withLock { $0.dropWrite(digest, sequence: sequence) }
        removeEntryFile(digest)
        pendingJournal.append(.remove(digest))
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
        let doomed = ledger.withLock { $0.filesToDiscard(digests) }
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
        let keep = ledger.withLock { ledger in
            Set(names.compactMap(EntryDigest.init(fileName:)).filter { ledger.isIndexed($0) })
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
    private func prepareDirectory() throws {
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
            // have written there). This worker's own loop runs it (`drain` runs until no work is
            // left).
            snapshotNeeded = true
            ledger.withLock { $0.directoryRecovered() }
        }
    }

    /// The directory was deleted while the store ran: forget the files it held.
    private func directoryVanished() {
        directory = .deleted
        journal?.close()
        journal = nil
        snapshotSize = 0
        journalSize = 0
        pendingJournal.removeAll()
        snapshotNeeded = true
        ledger.withLock { $0.vanish() }
    }

    private func reportWriteFailure(_ error: Error) {
        let failure: CachingError
        if let error = error as? FileError, error.meansUnwritable {
            failure = CachingError(.diskUnavailable, error.description)
        } else {
            failure = CachingError(.diskWriteFailed, "\(error)")
        }
        if directory == .ready { directory = .unchecked }  // check the directory again before the next write
        ledger.withLock { $0.report.noteWriteFailure(failure) }
    }

    // MARK: - Data Protection

    /// Gives the directories, the index files and every entry file `protection` (every file
    /// created from now on gets the ledger's class). Where there is no Data Protection, nothing.
    private func protect(_ protection: CachingFileProtection) {
        guard CachingFileProtection.isSupported, directory != .deleted else { return }
        for path in [paths.root, paths.entries, paths.index, paths.journal] {
            protection.apply(toItemAt: path)
        }
        for name in (try? FileIO.contentsOfDirectory(paths.entries)) ?? [] where EntryDigest(fileName: name) != nil {
            protection.apply(toItemAt: paths.entries + "/" + name)
        }
    }

    // MARK: - Opening and scanning

    /// Loads the index from the snapshot and journal — without what was removed since the store
    /// opened (the tombstones) — then reconciles it with the directory, which rebuilds it from
    /// the entry files' headers when there was no usable snapshot. Lookups use the loaded index
    /// as soon as it is in place; until then they read entry files directly.
    ///
    /// A snapshot or journal that exists but cannot be read (permissions, Data Protection while
    /// the device is locked) is not damage: nothing is rebuilt, scanned or overwritten, and a
    /// later lookup queues this work again (`DiskLedger.takeOwedWork`).
    private func open() {
        let reader = configuration.reader
        var loaded: DiskIndex?
        var damagedJournalBytes = 0
        var metadataBytes = 0
        /// Why there is no index to load: it must be rebuilt, or it cannot be read now.
        var missing: (reason: String, unreadable: Bool)?
        do {
            let snapshot = try reader.readFile(paths.index, for: .index)
            let journal: Data
            do {
                journal = try reader.readFile(paths.journal, for: .index)
            } catch let error as FileError where error.isMissing {
                journal = Data()
            }
            do {
                let result = try DiskIndex.load(snapshot: snapshot, journal: journal)
                loaded = result.index
                damagedJournalBytes = result.damagedJournalBytes
                snapshotSize = snapshot.count
                journalSize = journal.count
                metadataBytes = snapshot.count + journal.count
                // A damaged journal is folded into a fresh snapshot by the reconcile below.
                snapshotNeeded = snapshotNeeded || result.damagedJournalBytes > 0
            } catch {
                missing = ("index snapshot unreadable: \(error)", false)
            }
        } catch let error as FileError where error.isMissing {
            missing = ("no index snapshot (\(error))", false)
        } catch {
            missing = ("\(error)", true)
        }
        let readable = ledger.withLock { ledger -> Bool in
            if let missing, missing.unreadable {
                ledger.report.noteUnavailable(CachingError(.fileUnreadable, "index: \(missing.reason)"))
                ledger.indexUnreadable(missing.reason)
                return false
            }
            ledger.metadataBytes = metadataBytes
            if let loaded {
                ledger.install(loaded, damagedJournalBytes: damagedJournalBytes)
            } else {
                ledger.indexMissing(missing?.reason ?? "")
            }
            return true
        }
        indexLoaded?()
        indexLoaded = nil
        // Also when the index loaded: files written after the last journal append before a
        // crash, or by another process, are adopted (or deleted) so they cannot hold space forever.
        if readable { reconcile(full: loaded == nil) }
    }

    // MARK: - Reconciling the index with the directory

    /// Compares the index with the files in `entries/`: entries whose file is gone are dropped;
    /// files the index does not list (written just before a crash, or by another process) are
    /// adopted as least recently used after their header checks out, or deleted when it does
    /// not; abandoned temporary files and foreign files in `entries/` are deleted. When `full`,
    /// the index could not be loaded and this rebuilds it. Lists the directory but reads only
    /// unlisted files.
    ///
    /// A file it cannot read (permissions, Data Protection) is neither adopted nor deleted, and
    /// a listing it cannot get changes nothing: a later lookup has the scan tried again.
    private func reconcile(full: Bool) {
        // Not while the index could not be read: adopting files now would rebuild it.
        guard ledger.withLock({ $0.scanMayRun() }) else { return }
        let names: [String]
        do {
            guard directory != .deleted else {
                ledger.withLock { $0.scanAbandoned() }
                return
            }
            names = try configuration.reader.contentsOfDirectory(paths.entries)
        } catch let error as FileError where error.isMissing {
            directoryVanished()  // deleted since it opened: the next write recreates it
            ledger.withLock { $0.scanAbandoned() }
            return
        } catch {
            let failure = CachingError(.fileUnreadable, "\(error)")
            ledger.withLock { ledger in
                ledger.report.noteUnavailable(failure)
                ledger.scanUnavailable()
            }
            return
        }
        var listed = Set<EntryDigest>()
        listed.reserveCapacity(names.count)
        var others: [String] = []
        for name in names {
            if let digest = EntryDigest(fileName: name) { listed.insert(digest) } else { others.append(name) }
        }

        let (unlisted, vanished) = ledger.withLock { $0.compare(listed: listed) }
        for digest in vanished { pendingJournal.append(.remove(digest)) }

        let reading = readHeaders(of: unlisted)
        let (adopted, removed) = ledger.withLock { ledger in
            ledger.report.countFileReads(unlisted.count)
            if reading.corrupt > 0 {
                ledger.report.noteCorrupt(CachingError(.corruptEntry, "\(reading.corrupt) unreadable entry file(s) in \(paths.entries)"),
                                         count: reading.corrupt)
            }
            if let error = reading.unreadableError {
                ledger.report.noteUnavailable(CachingError(
                    .fileUnreadable, "\(reading.unreadable.count) entry file(s) in \(paths.entries) could not be read: \(error)"),
                    count: reading.unreadable.count)
            }
            return ledger.adopt(reading.found)
        }
        pendingJournal.append(contentsOf: adopted)
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
        if full || !adopted.isEmpty || !vanished.isEmpty {
            snapshotNeeded = true
        }
        // Once no scan is pending the index lists every file, so removals go through it alone.
        ledger.withLock { $0.finishScan(unreadable: reading.unreadable) }
    }

    /// What the headers of files the index did not list said.
    private struct HeaderScan {
        /// Valid entries, newest first (each adoption goes in front of the older ones, so the
        /// oldest file ends up evicted first).
        var found: [(digest: EntryDigest, entry: DiskIndex.Entry)] = []
        /// Damaged files, deleted.
        var corrupt = 0
        /// Files that could not be read, left alone; and the last reason.
        var unreadable: Set<EntryDigest> = []
        var unreadableError: Error?
    }

    /// Reads the header of each file in `digests`: adopts what checks out, deletes what is
    /// damaged, and leaves alone what cannot be read.
    private func readHeaders(of digests: [EntryDigest]) -> HeaderScan {
        var scan = HeaderScan()
        for digest in digests {
            let path = paths.entry(digest)
            switch Self.readEntryHeader(path, reader: configuration.reader) {
            case .valid(let header, let status) where EntryDigest(key: header.key) == digest:
                scan.found.append((digest, DiskIndex.Entry(
                    fileSize: status.size,
                    latestResponseDate: header.latestResponseDate,
                    lastAccess: status.modificationDate,
                    summary: EntrySummary(key: header.key, variants: nil)  // the rest is read when listed
                )))
            case .gone:
                break
            case .unreadable(let error):
                scan.unreadable.insert(digest)
                scan.unreadableError = error
            case .valid, .corrupt:
                FileIO.removeQuietly(path)
                scan.corrupt += 1
            }
        }
        scan.found.sort { $0.entry.lastAccess > $1.entry.lastAccess }
        return scan
    }

    /// What the first bytes of an entry file said.
    enum HeaderReading {
        case valid(EntryCodec.Header, FileStatus)
        /// Damaged, or not an entry file.
        case corrupt
        case gone
        /// It could not be read for a reason that may pass (permissions, Data Protection, I/O).
        case unreadable(Error)
    }

    /// The header of an entry file, read from its first bytes only.
    static func readEntryHeader(_ path: String, reader: FileReader) -> HeaderReading {
        do {
            var reading = try reader.readPrefix(path, length: EntryCodec.headerProbeSize)
            for _ in 0..<2 {
                var required = 0
                let header = try reading.data.withUnsafeBytes { buffer in
                    try EntryCodec.decodeHeader(buffer, fileSize: reading.fileSize, requiredPrefixLength: &required)
                }
                if let header { return .valid(header, reading.status) }
                // A key longer than the probe: read exactly the header once.
                guard required > reading.data.count, required <= reading.fileSize else { return .corrupt }
                reading = try reader.readPrefix(path, length: required)
            }
            return .corrupt
        } catch let error as FileError where error.isMissing {
            return .gone
        } catch is BinaryDecodingError {
            return .corrupt
        } catch {
            return .unreadable(error)
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

    // MARK: - The index on disk

    /// Appends the pending index changes and the access times of recent hits, in one `write`.
    /// Not while the index on disk could not be read: the changes wait for it to load.
    private func appendJournal() {
        guard let touches = ledger.withLock({ $0.takeAccessTimes() }) else { return }
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

    private func compactIfNeeded() {
        let capacity = ledger.withLock { $0.capacity }
        let threshold = min(configuration.journalCompactionThreshold, max(4096, capacity / 16))
        if snapshotNeeded || journalSize >= threshold {
            writeSnapshot()
        }
    }

    /// Writes the whole index as a new snapshot (temporary file and rename), then empties the
    /// journal. A crash between the two replays journal records the snapshot already holds,
    /// which changes nothing. Not while the index on disk could not be read: this would replace
    /// it with the little this store knows.
    private func writeSnapshot() {
        guard let data = ledger.withLock({ $0.takeSnapshot() }) else { return }
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
    private func enforceCapacity(limit: Int = .max) {
        let removalSize = DiskIndex.JournalRecord.remove(EntryDigest(high: 0, low: 0)).encodedSize
        // Each pass journals its evictions, which may fold the journal; a few passes always suffice.
        for _ in 0..<8 {
            let pending = pendingJournal.reduce(0) { $0 + $1.encodedSize }
            let metadata = snapshotSize + journalSize + pinsSize + pending
            let victims = ledger.withLock { $0.evict(toFit: limit, metadataBytes: metadata, removalRecordSize: removalSize) }
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
        let removeMetadata = ledger.withLock { ledger in
            ledger.persistsIndex && ledger.index.isEmpty && metadata > min(ledger.capacity, limit)
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

    // MARK: - Pins

    /// Reads the pins file again when another process changed it, and the pins file's size for
    /// the capacity.
    private func refreshPins() {
        Pins.refresh(ledger, from: paths.pins, reader: configuration.reader)
        pinsSize = ledger.withLock { $0.pins.source?.size ?? 0 }
    }

    /// Pins `added` and unpins `removed` keys, in the pins file and in the ledger, so that a
    /// process that pins at the same moment is not lost: the new file is prepared (read, changed,
    /// written to a temporary file) without a lock, then the directory's pins lock is taken
    /// without waiting, only to check that the file is still the one read and to rename the new
    /// one into place. A lock held while an iOS app is suspended gets it killed when the
    /// directory is in an App Group container (0xdead10cc), and a lock some other process holds
    /// must not stall the caller: so it is never waited for, and never held across file writes.
    /// When the file changed meanwhile or the lock is busy, it starts again (at most
    /// `pinAttempts` times, then throws `diskWriteFailed`). Throws `pinnedBeyondCapacity`,
    /// changing nothing, when the pinned records (with the index files) would leave less than
    /// `room` bytes of the capacity (capped at what one record may take here) for everything else;
    /// throws a write failure when the file cannot be written.
    func changePins(adding added: [String], removing removed: [String], room: Int) throws {
        try prepareDirectory()
        for attempt in 1...Self.pinAttempts {
            refreshPins()
            let metadata = snapshotSize + journalSize
            let (read, keys, unchanged, pinnedBytes, capacity, room) = ledger.withLock { ledger in
                let keys = ledger.pins.keys(adding: added, removing: removed)
                return (ledger.pins.source, keys, keys == ledger.pins.keys, ledger.bytes(of: Set(keys.map(EntryDigest.init(key:)))),
                        ledger.capacity, min(max(0, room), ledger.maximumEntryBytes))
            }
            guard !unchanged else { return }
            let data = Pins.encode(keys)
            if !added.isEmpty, pinnedBytes + metadata + data.count + room > capacity {
                throw CachingError(.pinnedBeyondCapacity, "pinning \(added.count) URL(s) would keep \(pinnedBytes) bytes pinned; "
                                   + "with \(metadata + data.count) bytes of index files and room for one response of \(room) bytes "
                                   + "that is more than diskCapacity (\(capacity) bytes). Nothing was pinned")
            }
            let temporary = paths.temporaryFile(in: paths.root)
            let replaced: Bool
            do {
                try FileIO.createFile(temporary, contents: data, mode: 0o600, protection: protection, durability: indexDurability)
                replaced = try FileIO.withExclusiveLockIfFree(paths.pinsLock, protection: protection) { () throws -> Bool in
                    guard (try? FileIO.status(paths.pins)).map(FileStamp.init) == read else { return false }
                    try FileIO.replaceItem(at: paths.pins, with: temporary)
                    return true
                } ?? false
            } catch {
                FileIO.removeQuietly(temporary)
                reportWriteFailure(error)
                throw CachingError(.diskWriteFailed, "pins: \(error)")
            }
            guard replaced else {
                FileIO.removeQuietly(temporary)
                // Another process is changing the file: it holds the lock for a rename.
                if attempt < Self.pinAttempts { usleep(useconds_t(attempt * 1_000)) }
                continue
            }
            try? FileIO.synchronizeDirectory(paths.root, indexDurability)
            let stamp = (try? FileIO.status(paths.pins)).map(FileStamp.init)
            ledger.withLock { $0.pins.install(keys, from: stamp) }
            pinsSize = data.count
            return
        }
        throw CachingError(.diskWriteFailed, "pins: another process kept changing the pins file (\(Self.pinAttempts) attempts); "
                           + "nothing was changed, try again")
    }

    /// How many times `changePins` prepares the file before it gives up: about 45 ms of pauses
    /// in all, much longer than another process holds the lock (a stat and a rename).
    static let pinAttempts = 10

    // MARK: - The age limit

    /// Removes the records past the age limit when a sweep is due (`DiskLedger.expireIfDue`).
    private func expireIfDue() {
        let doomed = ledger.withLock { $0.expireIfDue() }
        for digest in doomed {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }
        if !doomed.isEmpty { appendJournal() }
    }
}
