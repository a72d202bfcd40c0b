import Foundation

/// The disk tier: one file per record in a directory of its own, an LRU index that survives
/// restarts and crashes, and writes done off the caller's thread.
///
/// Layout of `configuration.directory` (created 0700, files 0600, both with the configured Data
/// Protection class on Apple platforms):
/// - `entries/<32 hex digits>`: one `EntryCodec` file per key, named by `EntryDigest`, so a file
///   name never contains any part of a URL.
/// - `index`: a `DiskIndex` snapshot; `journal`: the index changes appended since the snapshot.
/// - `.tmp-<pid>-<random>` files (at the top and in `entries/`) exist only while being written.
///
/// Writes: `store` puts the record in a staged map and returns; a serial worker (`DiskWorker`)
/// encodes it, writes a temporary file in `entries/` and `rename`s it over the entry, so a
/// reader (in this process or another) sees the old file or the new one, never half of one.
/// Reads see staged records at once. Repeated stores of one key before the worker gets to it are
/// written once. `remove…` calls cancel staged writes, so a removed record never comes back.
/// `flush()` waits until everything handed in so far is on disk.
///
/// Capacity: once writes settle (after `flush()`), the files in the directory (entries, index
/// and journal) together take at most `capacity` bytes. Least recently used entries go first;
/// "used" means stored or read, tracked in the index (file access times are not used). A record
/// whose file would exceed `capacity * maximumEntryFraction` is not stored.
///
/// Sizes are file lengths (`st_size`), which is what the capacity is compared with; the blocks
/// a file system allocates for many small files can add up to more.
///
/// Index: opening reads the snapshot and replays the journal, never listing or reading entry
/// files, so a cache opens in time proportional to its entry count, not its bytes. Each settled
/// batch of writes and removals is appended to the journal (so the index survives a crash), with
/// the access times of hits since the last append. After every open the worker lists `entries/`
/// once: files the index lacks (a crash between a rename and its journal append, or another
/// process's writes) are adopted as least recently used after their header checks out, or deleted;
/// entries whose file is gone are dropped; abandoned temporary files are deleted. A missing or
/// damaged snapshot makes that pass a full rebuild from the files' headers; until it ends,
/// lookups read files directly. Removals made before the pass ends are remembered so it cannot
/// bring them back. What the index, the staged writes and those removals hold is one value,
/// `DiskState`, changed only through its operations.
///
/// Unreadable is not damaged: a file that cannot be read for a reason that may pass (permissions,
/// Data Protection while the device is locked, an I/O error) is a miss and is counted as
/// unavailable; it is never deleted, and an index that cannot be read is neither rebuilt nor
/// overwritten. Lookups read entry files directly meanwhile, and at most every
/// `unreadableRetryInterval` one of them has the worker try again, so everything is served again
/// once the files can be read.
///
/// Processes: two processes may share a directory. Entry files are replaced by `rename` and
/// checksummed, so each reads the other's entries whole or not at all; journal appends are single
/// `write`s of self-checksummed records. Each process keeps its own index, so one sees entries the
/// other wrote after it opened only after reopening, and capacity is enforced per process.
///
/// Threading: any method may be called from any thread. Lookups read and decode the file on
/// the calling thread and take the lock twice (to find the entry, then to count the result),
/// never across I/O. All other I/O runs on the worker.
///
/// Failures never throw and never crash: a missing, torn, truncated, foreign or other-version
/// file is a miss (and is deleted and counted); a directory that cannot be written turns `status`
/// to `.unavailable` and writes are dropped (and counted) until one succeeds again; lookups keep
/// answering from the files that can still be read.
final class DiskStore: StoreTier {
    let configuration: Configuration
    let paths: Paths
    let state: Locked<Shared>
    /// What writes and deletes files; it runs only on `worker`.
    let fileWorker: DiskWorker
    /// The serial queue of the worker that does every write, eviction and index update.
    let worker: DispatchQueue
    /// Entered until the worker has loaded the index (or found none to load).
    private let indexLoad = DispatchGroup()
    /// While there is an age limit: prompts the worker to look for records past it
    /// (`DiskStore+Expiry`).
    let expiryTimer = Locked<DispatchSourceTimer?>(nil)

    /// Opens (or creates) the cache in `configuration.directory` without reading anything on the
    /// calling thread but the directory's existence: the worker's first operation loads the
    /// index snapshot and journal (`Operation.open`), then reconciles the index with the
    /// directory. Until the index is in, lookups read entry files directly and removals are
    /// remembered as tombstones, as during any reconcile; `statistics` waits for the index.
    /// `workerTarget`, for tests, is the queue the worker runs on (suspend it to hold the worker
    /// before its first operation).
    init(configuration: Configuration, workerTarget: DispatchQueue? = nil) {
        self.configuration = configuration
        paths = Paths(directory: configuration.directory)
        worker = DispatchQueue(label: "CachingProtocol.DiskStore.worker", qos: .utility, target: workerTarget)
        var shared = Shared(limits: Limits(capacity: max(0, configuration.capacity),
                                           maximumEntryFraction: configuration.maximumEntryFraction),
                            clock: configuration.now, fileProtection: configuration.fileProtection)
        let directoryReady = Self.prepareDirectories(paths, protection: configuration.fileProtection, report: &shared.report)
        if directoryReady {
            shared.disk.beginOpening()
            shared.report.noteOpening()
            _ = shared.work.enqueue(.open)
            indexLoad.enter()
        }
        let state = Locked(shared)
        self.state = state
        fileWorker = DiskWorker(configuration: configuration, paths: paths, state: state, directoryReady: directoryReady,
                                indexLoaded: { [indexLoad] in indexLoad.leave() })
        if directoryReady { startWorker() }
    }

    convenience init(directory: URL, capacity: Int = 100 * 1024 * 1024) {
        self.init(configuration: Configuration(directory: directory, capacity: capacity))
    }

    deinit {
        expiryTimer.withLock { $0?.cancel() }
        // Every queued block holds the store, so nothing is pending here but access times
        // (which are not written into a directory that was deleted meanwhile).
        fileWorker.close()
    }

    /// Creates the cache directory and `entries/` when missing; false (and the store starts
    /// empty, in memory only until a write can create them) when they cannot be.
    private static func prepareDirectories(_ paths: Paths, protection: CachingFileProtection, report: inout Report) -> Bool {
        do {
            try FileIO.createDirectories(paths.root, mode: 0o700, protection: protection)
            try FileIO.createDirectory(paths.entries, mode: 0o700, protection: protection)
            return true
        } catch {
            report.noteDirectoryUnusable(CachingError(.diskUnavailable, "\(error)"))
            return false
        }
    }

    // MARK: - Writing and removing

    func store(_ record: CacheRecord) {
        let digest = EntryDigest(key: record.key)
        let cost = record.cost  // an estimate of the file size, close enough to refuse early
        let (start, backlogged) = state.withLock { state -> (Bool, Bool) in
            guard cost <= state.limits.maximumEntryBytes else {
                let doomed = state.disk.forget([digest])
                return (state.discard(doomed), false)
            }
            let clock = state.clock
            let needsWrite = state.disk.stage(record, cost: cost, at: clock())
            // Only bytes staged before this record count: one large response alone never waits
            // for its own write (it would hold its answer back from the app for the write's length).
            let backlogged = state.disk.stagedBytes - cost > configuration.maximumStagedBytes
            guard needsWrite else { return (false, backlogged) }  // coalesced
            return (state.work.enqueue(.write(digest)), backlogged)
        }
        if start { startWorker(after: configuration.writeDelay) }
        // Back-pressure: the caller waits for the disk rather than memory growing without bound.
        if backlogged { flush() }
    }

    func removeRecord(forKey key: String) {
        let digest = EntryDigest(key: key)
        let start = state.withLock { state -> Bool in
            let doomed = state.disk.forget([digest])
            return state.discard(doomed)
        }
        if start { startWorker() }
    }

    func removeRecords(storedSince date: Date) {
        let start = state.withLock { state -> Bool in
            let doomed = state.disk.forget(storedSince: date)
            return state.discard(doomed)
        }
        if start { startWorker() }
    }

    func removeAll() {
        let start = state.withLock { state -> Bool in
            state.disk.forgetAll()
            return state.work.enqueue(.removeAll)
        }
        if start { startWorker() }
    }

    var capacity: Int {
        get { state.withLock { $0.limits.capacity } }
        set {
            let start = state.withLock { state -> Bool in
                state.limits.capacity = max(0, newValue)
                return state.work.enqueue(.enforceCapacity)
            }
            if start { startWorker() }
        }
    }

    /// Evicts least recently used entries until the directory holds at most `bytes`, without
    /// changing `capacity`. Settles on the worker; `flush()` waits for it.
    func trim(toBytes bytes: Int) {
        enqueue(.trim(toBytes: max(0, bytes)))
    }

    /// The largest share of `capacity` one entry file may take. Applies to the next `store`.
    var maximumEntryFraction: Double {
        get { state.withLock { $0.limits.maximumEntryFraction } }
        set { state.withLock { $0.limits.maximumEntryFraction = newValue } }
    }

    /// The Data Protection class of the cache's files and directories (Apple platforms; no effect
    /// elsewhere). Setting it gives every existing file and directory the class on the worker,
    /// in order with the writes handed in before, and every file created after.
    var fileProtection: CachingFileProtection {
        get { state.withLock { $0.fileProtection } }
        set {
            let start = state.withLock { state -> Bool in
                state.fileProtection = newValue
                return state.work.enqueue(.protect(newValue))
            }
            if start { startWorker() }
        }
    }

    // MARK: - What it holds

    /// The key and file size of every record on disk, once the writes handed in so far have
    /// landed: from the index's summaries, reading an entry file's header only for an entry
    /// without one (an index from before summaries). Files that vanished or do not read are left out.
    func storedKeys() -> [(key: String, bytes: Int)] {
        flush()
        let files = state.withLock { state in state.disk.index.entries.map { ($0.key, $0.value.fileSize, $0.value.summary?.key) } }
        return files.compactMap { digest, bytes, key in
            if let key { return (key, bytes) }
            guard case .valid(let header, _) = DiskWorker.readEntryHeader(paths.entry(digest), reader: configuration.reader),
                  EntryDigest(key: header.key) == digest else { return nil }
            return (header.key, bytes)
        }
    }

    /// Returns once the worker has loaded the index (or found none to load).
    func waitUntilOpen() {
        indexLoad.wait()
    }

    /// Settled records and the real size of the directory's files (entries, index, journal).
    /// What the index says; waits for the index to be loaded when the store just opened.
    var statistics: StoreStatistics {
        waitUntilOpen()
        return state.withLock { state in
            StoreStatistics(
                entryCount: state.disk.index.count,
                byteCount: state.disk.index.byteCount + state.limits.metadataBytes,
                capacity: state.limits.capacity,
                hits: state.report.hits,
                misses: state.report.misses
            )
        }
    }

    var status: Status {
        state.withLock { $0.report.status }
    }

    /// The clock for last-access times from now on (the installed configuration's).
    var clock: @Sendable () -> Date {
        get { state.withLock { $0.clock } }
        set { state.withLock { $0.clock = newValue } }
    }

    /// What went wrong and how the index was obtained, now (`indexOrigin` is `.opening` until the
    /// worker has loaded the index); never waits for the worker.
    var diagnostics: Diagnostics {
        state.withLock { state in
            Diagnostics(
                status: state.report.status,
                lastError: state.report.lastError,
                corruptEntriesRemoved: state.report.corruptEntriesRemoved,
                unavailableReads: state.report.unavailableReads,
                writeFailures: state.report.writeFailures,
                entryFileReads: state.report.entryFileReads,
                indexOrigin: state.report.indexOrigin,
                damagedJournalBytes: state.report.damagedJournalBytes,
                stagedCount: state.disk.stagedCount
            )
        }
    }

    /// Blocks until every write, removal and eviction handed in before the call has settled on
    /// disk, and the access times of hits so far are journaled. For tests and shutdown; never
    /// call it from the worker.
    func flush() {
        worker.sync {
            fileWorker.drain()
            fileWorker.settle()
        }
    }

    // MARK: - Scheduling

    func enqueue(_ operation: Operation) {
        if state.withLock({ $0.work.enqueue(operation) }) { startWorker() }
    }

    /// Runs the worker until the queue is empty, at once or after `delay` seconds (a write:
    /// `Configuration.writeDelay`). `flush()` drains the queue itself meanwhile.
    func startWorker(after delay: TimeInterval = 0) {
        if delay > 0 {
            worker.asyncAfter(deadline: .now() + delay) { self.runWorker() }
        } else {
            worker.async { self.runWorker() }
        }
    }

    private func runWorker() {
        repeat {
            fileWorker.drain()
        } while !state.withLock({ $0.work.finishRun() })
    }

    func scheduleAccessTimeWrite() {
        worker.asyncAfter(deadline: .now() + configuration.accessTimeWriteDelay) { [weak self] in
            guard let self else { return }
            state.withLock { $0.disk.accessTimeWriteStarted() }
            fileWorker.settle()
        }
    }
}

extension DiskStore.Shared {
    /// Queues the deletion of `digests`' files (what `DiskState.forget` returned). Returns true
    /// when the caller must start the worker.
    mutating func discard(_ digests: [EntryDigest]) -> Bool {
        guard !digests.isEmpty else { return false }
        return work.enqueue(.discard(digests))
    }
}
