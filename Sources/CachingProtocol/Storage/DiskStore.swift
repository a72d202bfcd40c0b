import Foundation

/// The disk tier: one file per record in a directory of its own, an LRU index that survives
/// restarts and crashes, and writes done off the caller's thread.
///
/// Layout of `configuration.directory` (created 0700, files 0600):
/// - `entries/<32 hex digits>`: one `EntryCodec` file per key, named by `EntryDigest`, so a file
///   name never contains any part of a URL.
/// - `index`: a `DiskIndex` snapshot; `journal`: the index changes appended since the snapshot.
/// - `.tmp-<pid>-<random>` files (at the top and in `entries/`) exist only while being written.
///
/// Writes: `store` puts the record in a staged map and returns; a serial worker encodes it,
/// writes a temporary file in `entries/` and `rename`s it over the entry, so a reader (in this
/// process or another) sees the old file or the new one, never half of one. Reads see staged
/// records at once. Repeated stores of one key before the worker gets to it are written once.
/// `remove…` calls cancel staged writes, so a removed record never comes back. `flush()` waits
/// until everything handed in so far is on disk.
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
/// bring them back.
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
    /// The tier's settings, with their defaults.
    struct Configuration: Sendable {
        /// The cache directory. Created (with its parents) if missing, owner-only (0700).
        var directory: URL
        /// The most bytes the directory's files may take once writes settle. Default: 100 MiB.
        var capacity: Int
        /// The largest share of `capacity` one entry file may take; larger records are not
        /// stored. Default: 0.25.
        var maximumEntryFraction: Double
        /// Whether to `fsync` each entry file before renaming it into place, and the directory
        /// after, and the journal and snapshot likewise. Default: false: a file in the page cache
        /// survives the process being killed, and after a power loss a torn file fails its
        /// checksum and is a miss, so the cost of a sync per write buys only keeping the last
        /// few seconds of entries through a power loss.
        var synchronizesWrites: Bool
        /// The journal size at which it is folded into a new index snapshot. Default: 1 MiB.
        /// (The journal also counts against `capacity`, so it is folded sooner in a small cache:
        /// at `capacity / 16`, but never below 4 KiB.)
        var journalCompactionThreshold: Int
        /// How long the access times of hits wait to be written when nothing else is being
        /// written; they otherwise go with the next journal append. Default: 1 second.
        var accessTimeWriteDelay: TimeInterval
        /// How long a stored record waits before the worker starts writing it (write-behind).
        /// The response a miss fetched reaches the app while its record waits, so on a machine
        /// with few cores the write does not compete with the app for the processor at that
        /// moment (measured: a 1.6 KB miss cost 1.6–3.0 × the forwarding floor with the write
        /// started at once, 1.3 × with it started 3 ms later), and a burst of misses is written
        /// in one pass. Lookups find the record in the staging area meanwhile; `flush()` and
        /// back-pressure start the write at once. A crash in that window loses the record (a
        /// miss next time). Default: 5 ms.
        var writeDelay: TimeInterval
        /// The most bytes of records waiting to be written. A `store` that finds more staged
        /// (before its own record) waits until the worker has written them, so a burst of large responses faster than
        /// the disk holds memory at this bound instead of growing without limit. Default: 8 MiB.
        var maximumStagedBytes: Int
        /// The clock for last-access times (the LRU order). Default: `systemClock`; the cache
        /// replaces it with its installation's clock (`DiskStore.clock`), and tests inject one.
        var now: @Sendable () -> Date

        init(
            directory: URL,
            capacity: Int = 100 * 1024 * 1024,
            maximumEntryFraction: Double = 0.25,
            synchronizesWrites: Bool = false,
            journalCompactionThreshold: Int = 1024 * 1024,
            accessTimeWriteDelay: TimeInterval = 1,
            writeDelay: TimeInterval = 0.005,
            maximumStagedBytes: Int = 8 * 1024 * 1024,
            now: @escaping @Sendable () -> Date = systemClock
        ) {
            self.directory = directory
            self.capacity = capacity
            self.maximumEntryFraction = maximumEntryFraction
            self.synchronizesWrites = synchronizesWrites
            self.journalCompactionThreshold = journalCompactionThreshold
            self.accessTimeWriteDelay = accessTimeWriteDelay
            self.writeDelay = writeDelay
            self.maximumStagedBytes = maximumStagedBytes
            self.now = now
        }
    }

    /// Whether the store can write.
    enum Status: Sendable, Equatable {
        /// The directory exists and the last write succeeded.
        case available
        /// The directory could not be created or the last write failed (read-only file system,
        /// the path is a file, the disk is full). Lookups still answer from readable files;
        /// the next write tries again.
        case unavailable(CachingError)
    }

    /// How the index was obtained when the store opened.
    enum IndexOrigin: Sendable, Equatable {
        /// Not known yet: the worker has not loaded the index (see `waitUntilOpen()`).
        case opening
        /// From the snapshot and journal, without reading entry files.
        case loaded
        /// The snapshot was missing or damaged; it was rebuilt from the entry files' headers.
        case rebuilt(reason: String)
        /// The directory could not be used; the store started empty.
        case unavailable
    }

    /// What went wrong and how often, beyond `statistics`.
    struct Diagnostics: Sendable, Equatable {
        var status: Status
        /// The most recent failure (a write, a corrupt file), or nil.
        var lastError: CachingError?
        /// Entry files found torn, truncated, foreign, of another version or another key, and removed.
        var corruptEntriesRemoved: Int
        /// Writes that failed (entry files, journal appends, snapshots) and were dropped.
        var writeFailures: Int
        /// Entry files opened for reading (lookups and index rebuilds): a test hook.
        var entryFileReads: Int
        var indexOrigin: IndexOrigin
        /// Journal bytes skipped as damaged when the index was loaded.
        var damagedJournalBytes: Int
        /// Records accepted by `store` and not yet written.
        var stagedCount: Int
    }

    /// A record accepted by `store` and not yet written.
    struct Staged {
        var record: CacheRecord
        var sequence: UInt64
        var lastAccess: Date
        /// `record.cost`, counted in `StagedWrites.bytes`.
        var cost: Int
    }

    /// Records handed to `store` and not yet written, with their total cost kept up to date.
    struct StagedWrites: Sequence {
        private var records: [EntryDigest: Staged] = [:]
        /// The summed `cost` of the staged records.
        private(set) var bytes = 0

        var count: Int { records.count }

        subscript(digest: EntryDigest) -> Staged? {
            get { records[digest] }
            set {
                bytes -= records[digest]?.cost ?? 0
                bytes += newValue?.cost ?? 0
                records[digest] = newValue
            }
        }

        @discardableResult
        mutating func removeValue(forKey digest: EntryDigest) -> Staged? {
            let removed = records.removeValue(forKey: digest)
            bytes -= removed?.cost ?? 0
            return removed
        }

        mutating func removeAll() {
            records.removeAll()
            bytes = 0
        }

        func makeIterator() -> Dictionary<EntryDigest, Staged>.Iterator {
            records.makeIterator()
        }
    }

    /// Work for the worker, done in the order handed in.
    enum Operation {
        /// Write the staged record of this digest, if it is still staged.
        case write(EntryDigest)
        /// Delete these entry files unless a write settled for them since (and journal it).
        case discard([EntryDigest])
        /// Delete every entry file not in the index, then write a fresh snapshot.
        case removeAll
        /// Evict down to the capacity.
        case enforceCapacity
        /// Evict down to this many bytes once, leaving the capacity as it is.
        case trim(toBytes: Int)
        /// Compare the index with the files in `entries/`; when `full`, the index was not loaded
        /// and is rebuilt from the files.
        case reconcile(full: Bool)
        /// Load the index snapshot and journal, then reconcile: the store's first operation.
        case open
    }

    /// What was removed while a reconcile was pending: files it finds that match are deleted,
    /// not adopted, and lookups that read files directly treat them as misses.
    struct Tombstones {
        var digests: Set<EntryDigest> = []
        var all = false
        var storedSince: Date?

        func covers(_ digest: EntryDigest) -> Bool {
            all || digests.contains(digest)
        }

        func covers(_ digest: EntryDigest, latestResponseDate: Date) -> Bool {
            covers(digest) || storedSince.map { latestResponseDate >= $0 } == true
        }
    }

    /// Everything readers and the worker share, under one lock, in named parts.
    struct State {
        /// What is on disk, as far as the store knows.
        struct Catalog {
            var index = DiskIndex()
            /// False until an index that could not be loaded has been rebuilt; meanwhile
            /// lookups read entry files directly.
            var indexReady = true
            /// Reconciles queued or running: they may still adopt files the index does not list.
            var pendingReconciles = 0
            /// Removals made while a reconcile is pending, so it does not adopt what was removed.
            var tombstones = Tombstones()

            var reconcilePending: Bool { pendingReconciles > 0 }
        }

        /// Records handed to `store` and not yet written.
        struct Staging {
            var records = StagedWrites()
            /// Digests with a `.write` operation queued and not yet started.
            var scheduled: Set<EntryDigest> = []
            /// Numbers the stores, so a write knows whether a newer one came after it.
            var sequence: UInt64 = 0
        }

        /// The worker's queue of operations.
        struct WorkQueue {
            var operations: [Operation] = []
            /// A run of the worker is queued or running and will see new operations.
            var isScheduled = false

            /// Queues `operation`; returns true when the caller must start the worker.
            mutating func enqueue(_ operation: Operation) -> Bool {
                operations.append(operation)
                guard !isScheduled else { return false }
                isScheduled = true
                return true
            }
        }

        /// Hits whose access times are not journaled yet.
        struct AccessTimes {
            /// Entries read since their access time was last journaled.
            var touched: Set<EntryDigest> = []
            /// A delayed journal append of access times is queued.
            var writeScheduled = false
        }

        /// How much the directory may hold.
        struct Limits {
            var capacity: Int
            var maximumEntryFraction: Double
            /// The size of the index snapshot and journal files, as the worker last saw them.
            var metadataBytes = 0

            var maximumEntryBytes: Int {
                entryCostLimit(capacity: capacity, fraction: maximumEntryFraction)
            }
        }

        /// What lookups found and what went wrong, since the store opened.
        struct Counters {
            var hits = 0
            var misses = 0
            var corruptEntriesRemoved = 0
            var writeFailures = 0
            var entryFileReads = 0
            var damagedJournalBytes = 0
        }

        /// Whether the store can write, and how its index was obtained.
        struct Health {
            var status = Status.available
            var lastError: CachingError?
            var indexOrigin = IndexOrigin.loaded
        }

        var catalog = Catalog()
        var staging = Staging()
        var work = WorkQueue()
        var accessTimes = AccessTimes()
        var limits: Limits
        var counters = Counters()
        var health = Health()
        /// The clock for last-access times: `configuration.now` until the cache hands the store
        /// its installation's clock (`clock`).
        var clock: @Sendable () -> Date
    }

    let configuration: Configuration
    let paths: Paths
    let state: Locked<State>
    /// What writes and deletes files; it runs only on `worker`.
    private let fileWorker: DiskWorker
    /// The serial queue of the worker that does every write, eviction and index update.
    let worker: DispatchQueue
    /// Entered until the worker has loaded the index (or found none to load).
    private let indexLoad = DispatchGroup()

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
        var state = State(limits: State.Limits(capacity: max(0, configuration.capacity),
                                               maximumEntryFraction: configuration.maximumEntryFraction),
                          clock: configuration.now)
        let directoryReady = Self.prepareDirectories(paths, state: &state)
        if directoryReady {
            state.catalog.indexReady = false
            state.catalog.pendingReconciles = 1
            state.health.indexOrigin = .opening
            _ = state.work.enqueue(.open)
            indexLoad.enter()
        }
        let shared = Locked(state)
        self.state = shared
        fileWorker = DiskWorker(configuration: configuration, paths: paths, state: shared, directoryReady: directoryReady,
                                indexLoaded: { [indexLoad] in indexLoad.leave() })
        if directoryReady { startWorker() }
    }

    convenience init(directory: URL, capacity: Int = 100 * 1024 * 1024) {
        self.init(configuration: Configuration(directory: directory, capacity: capacity))
    }

    deinit {
        // Every queued block holds the store, so nothing is pending here but access times
        // (which are not written into a directory that was deleted meanwhile).
        fileWorker.close()
    }

    /// Creates the cache directory and `entries/` when missing; false (and the store starts
    /// empty, in memory only until a write can create them) when they cannot be.
    private static func prepareDirectories(_ paths: Paths, state: inout State) -> Bool {
        do {
            try FileIO.createDirectories(paths.root, mode: 0o700)
            try FileIO.createDirectory(paths.entries, mode: 0o700)
            return true
        } catch {
            let failure = CachingError(.diskUnavailable, "\(error)")
            state.health.status = .unavailable(failure)
            state.health.lastError = failure
            state.health.indexOrigin = .unavailable
            return false
        }
    }

    // MARK: - StoreTier

    private enum ReadPlan {
        case found(CacheRecord)
        case indexed(generation: UInt64)
        case unindexed
        case miss
        case deferred
    }

    /// Whether a record for `key` is stored or staged; reads no file and counts nothing.
    func containsRecord(forKey key: String) -> Bool {
        state.withLock { $0.holdsRecord(forKey: key) }
    }

    /// `containsRecord(forKey:)`, or true while the index is still loading (it may be stored).
    func mayContainRecord(forKey key: String) -> Bool {
        state.withLock { !$0.catalog.indexReady || $0.holdsRecord(forKey: key) }
    }

    func record(forKey key: String, countingLookup: Bool) -> CacheRecord? {
        guard case .found(let record) = read(key, countingLookup: countingLookup, sizeLimit: nil) else { return nil }
        return record
    }

    /// What `lookup(forKey:readingUpTo:)` found.
    enum Lookup {
        /// The record, from a staged write or a file read on the calling thread.
        case found(CacheRecord)
        /// Nothing is stored for the key (counted as a miss).
        case missing
        /// The record's file is larger than the limit, or the index is still being rebuilt so
        /// its size is unknown: read it with `record(forKey:countingLookup:)` where a long read
        /// holds nobody up. Nothing was counted.
        case deferred
    }

    /// A counted lookup that reads the record's file on the calling thread only when it takes
    /// at most `limit` bytes (a staged record costs no read at all).
    func lookup(forKey key: String, readingUpTo limit: Int) -> Lookup {
        read(key, countingLookup: true, sizeLimit: limit)
    }

    private func read(_ key: String, countingLookup: Bool, sizeLimit: Int?) -> Lookup {
        let digest = EntryDigest(key: key)
        let (plan, scheduleAccessTimes) = state.withLock { state -> (ReadPlan, Bool) in
            if let staged = state.staging.records[digest], staged.record.key == key {
                if countingLookup {
                    state.staging.records[digest]?.lastAccess = state.clock()
                    state.counters.hits += 1
                }
                return (.found(staged.record), false)
            }
            if !countingLookup, let entry = state.catalog.index.entry(for: digest) {
                state.counters.entryFileReads += 1
                return (.indexed(generation: entry.generation), false)
            }
            if let sizeLimit, let entry = state.catalog.index.entry(for: digest), entry.fileSize > sizeLimit {
                return (.deferred, false)
            }
            if let entry = state.catalog.index.touch(digest, at: state.clock()) {
                state.counters.entryFileReads += 1
                state.accessTimes.touched.insert(digest)
                let schedule = !state.accessTimes.writeScheduled
                state.accessTimes.writeScheduled = true
                return (.indexed(generation: entry.generation), schedule)
            }
            if !state.catalog.indexReady, !state.catalog.tombstones.covers(digest) {
                if sizeLimit != nil { return (.deferred, false) }
                state.counters.entryFileReads += 1
                return (.unindexed, false)
            }
            if countingLookup { state.counters.misses += 1 }
            return (.miss, false)
        }
        if scheduleAccessTimes { scheduleAccessTimeWrite() }

        let generation: UInt64?
        switch plan {
        case .found(let record): return .found(record)
        case .miss: return .missing
        case .deferred: return .deferred
        case .indexed(let indexed): generation = indexed
        case .unindexed: generation = nil
        }

        let path = paths.entry(digest)
        do {
            let record = try EntryCodec.decode(try FileIO.readFile(path), expectedKey: key)
            let removed = state.withLock { state -> Bool in
                // Read before the index was rebuilt: it may be a file removed since.
                let removed = generation == nil
                    && state.catalog.tombstones.covers(digest, latestResponseDate: record.latestResponseDate)
                if countingLookup {
                    if removed { state.counters.misses += 1 } else { state.counters.hits += 1 }
                }
                return removed
            }
            return removed ? .missing : .found(record)
        } catch let error as FileError where error.isMissing {
            // Evicted by another process, or the directory was deleted: forget the entry.
            let start = state.withLock { state -> Bool in
                if countingLookup { state.counters.misses += 1 }
                guard let generation, state.catalog.index.remove(digest, ifGeneration: generation) else { return false }
                return state.work.enqueue(.discard([digest]))
            }
            if start { startWorker() }
        } catch let error as BinaryDecodingError {
            let failure = CachingError(.corruptEntry, "\(path): \(error)")
            let start = state.withLock { state -> Bool in
                if countingLookup { state.counters.misses += 1 }
                state.counters.corruptEntriesRemoved += 1
                state.health.lastError = failure
                if let generation {
                    guard state.catalog.index.remove(digest, ifGeneration: generation) else {
                        return false  // a newer write replaced the file meanwhile: keep that one
                    }
                } else {
                    state.catalog.index.remove(digest)  // read before the index was in: it may list it since
                }
                // Until the discard runs the file is still there: remembered as removed while the
                // index loads or a reconcile lists the directory, so no read and no reconcile finds
                // (and counts) it again.
                if state.catalog.reconcilePending { state.catalog.tombstones.digests.insert(digest) }
                return state.work.enqueue(.discard([digest]))
            }
            if start { startWorker() }
        } catch {
            // Unreadable for another reason (permissions, I/O error): a miss; the file stays.
            let failure = CachingError(.diskUnavailable, "\(error)")
            state.withLock { state in
                if countingLookup { state.counters.misses += 1 }
                state.health.lastError = failure
            }
        }
        return .missing
    }

    func store(_ record: CacheRecord) {
        let digest = EntryDigest(key: record.key)
        let cost = record.cost  // an estimate of the file size, close enough to refuse early
        let (start, backlogged) = state.withLock { state -> (Bool, Bool) in
            guard cost <= state.limits.maximumEntryBytes else {
                return (state.forget([digest]), false)
            }
            state.staging.sequence += 1
            state.staging.records[digest] = Staged(record: record, sequence: state.staging.sequence, lastAccess: state.clock(), cost: cost)
            // Only bytes staged before this record count: one large response alone never waits
            // for its own write (it would hold its answer back from the app for the write's length).
            let backlogged = state.staging.records.bytes - cost > configuration.maximumStagedBytes
            guard state.staging.scheduled.insert(digest).inserted else { return (false, backlogged) }  // coalesced
            return (state.work.enqueue(.write(digest)), backlogged)
        }
        if start { startWorker(after: configuration.writeDelay) }
        // Back-pressure: the caller waits for the disk rather than memory growing without bound.
        if backlogged { flush() }
    }

    func removeRecord(forKey key: String) {
        let digest = EntryDigest(key: key)
        let start = state.withLock { $0.forget([digest]) }
        if start { startWorker() }
    }

    func removeRecords(storedSince date: Date) {
        let start = state.withLock { state -> Bool in
            var digests = state.catalog.index.digests(storedSince: date)
            for (digest, staged) in state.staging.records where staged.record.latestResponseDate >= date {
                digests.append(digest)
            }
            if state.catalog.reconcilePending {
                state.catalog.tombstones.storedSince = min(state.catalog.tombstones.storedSince ?? date, date)
            }
            guard !digests.isEmpty else { return false }
            return state.forget(digests)
        }
        if start { startWorker() }
    }

    func removeAll() {
        let start = state.withLock { state -> Bool in
            state.staging.records.removeAll()
            state.staging.scheduled.removeAll()
            state.accessTimes.touched.removeAll()
            state.catalog.index.removeAll()
            if state.catalog.reconcilePending { state.catalog.tombstones.all = true }
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

    /// The key and file size of every record on disk, once the writes handed in so far have
    /// landed: one small read of each entry file's header, on the calling thread (the index
    /// holds digests, not keys). Files that vanished or do not read are left out.
    func storedKeys() -> [(key: String, bytes: Int)] {
        flush()
        let files = state.withLock { state in state.catalog.index.entries.map { ($0.key, $0.value.fileSize) } }
        return files.compactMap { digest, bytes in
            guard case .valid(let header, _) = DiskWorker.readEntryHeader(paths.entry(digest)),
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
                entryCount: state.catalog.index.count,
                byteCount: state.catalog.index.byteCount + state.limits.metadataBytes,
                capacity: state.limits.capacity,
                hits: state.counters.hits,
                misses: state.counters.misses
            )
        }
    }

    var status: Status {
        state.withLock { $0.health.status }
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
                status: state.health.status,
                lastError: state.health.lastError,
                corruptEntriesRemoved: state.counters.corruptEntriesRemoved,
                writeFailures: state.counters.writeFailures,
                entryFileReads: state.counters.entryFileReads,
                indexOrigin: state.health.indexOrigin,
                damagedJournalBytes: state.counters.damagedJournalBytes,
                stagedCount: state.staging.records.count
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
        while true {
            fileWorker.drain()
            let more = state.withLock { state -> Bool in
                if state.work.operations.isEmpty {
                    state.work.isScheduled = false
                    return false
                }
                return true
            }
            if !more { return }
        }
    }

    private func scheduleAccessTimeWrite() {
        worker.asyncAfter(deadline: .now() + configuration.accessTimeWriteDelay) { [weak self] in
            guard let self else { return }
            state.withLock { $0.accessTimes.writeScheduled = false }
            fileWorker.settle()
        }
    }
}

extension DiskStore.State {
    /// Whether a record for `key` is staged or in the index.
    func holdsRecord(forKey key: String) -> Bool {
        let digest = EntryDigest(key: key)
        return staging.records[digest]?.record.key == key || catalog.index.contains(digest)
    }

    /// Drops `digests` from the staged writes and the index and queues the deletion of their
    /// files. Returns true when the caller must start the worker.
    mutating func forget(_ digests: [EntryDigest]) -> Bool {
        var onDisk: [EntryDigest] = []
        for digest in digests {
            let wasStaged = staging.records.removeValue(forKey: digest) != nil
            // A later store must queue a write after this removal, not coalesce into an earlier one.
            staging.scheduled.remove(digest)
            let wasIndexed = catalog.index.remove(digest) != nil
            accessTimes.touched.remove(digest)
            if catalog.reconcilePending { catalog.tombstones.digests.insert(digest) }
            // Without a staged write or an index entry there is no file of ours to delete (unless
            // a reconcile may still find one), so an unknown key costs no disk work.
            if wasStaged || wasIndexed || catalog.reconcilePending { onDisk.append(digest) }
        }
        guard !onDisk.isEmpty else { return false }
        return work.enqueue(.discard(onDisk))
    }
}

extension DiskStore {
    /// The paths of one cache directory.
    struct Paths: Sendable {
        let root: String
        let entries: String
        let index: String
        let journal: String

        init(directory: URL) {
            var root = directory.path
            while root.count > 1, root.hasSuffix("/") { root.removeLast() }
            self.root = root
            entries = root + "/entries"
            index = root + "/index"
            journal = root + "/journal"
        }

        func entry(_ digest: EntryDigest) -> String {
            entries + "/" + digest.fileName
        }

        /// A new temporary file name in `directory`: `.tmp-<pid>-<random>`, unique across
        /// processes and store instances.
        func temporaryFile(in directory: String) -> String {
            directory + "/" + Self.temporaryPrefix + "\(FileIO.currentProcessID)-" + StableHash.hex(UInt64.random(in: .min ... .max))
        }

        static let temporaryPrefix = ".tmp-"
    }
}
