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
/// bring them back. Everything the store knows — the index, the staged writes, those removals,
/// the pins, the limits and what went wrong — is one value, `DiskLedger`, changed only through
/// its operations; `DiskWorker` does the file side effects.
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
final class DiskStore: Sendable {
    let configuration: Configuration
    let paths: Paths
    /// Everything the store knows, shared by its readers and its worker under one lock.
    private let ledger: Locked<DiskLedger>
    /// What writes, deletes and scans files; it runs only on `worker`.
    private let fileWorker: DiskWorker
    /// The serial queue of the worker that does every write, eviction and index update.
    let worker: DispatchQueue
    /// Entered until the worker has loaded the index (or found none to load).
    private let indexLoad = DispatchGroup()
    /// While there is an age limit: prompts the worker to look for records past it.
    private let expiryTimer = Locked<DispatchSourceTimer?>(nil)

    /// Opens (or creates) the cache in `configuration.directory` without reading anything on the
    /// calling thread but the directory's existence: the worker's first work loads the index
    /// snapshot and journal (`DiskLedger.Work.open`), then reconciles the index with the
    /// directory. Until the index is in, lookups read entry files directly and removals are
    /// remembered as tombstones, as during any reconcile; `statistics` waits for the index.
    /// `workerTarget`, for tests, is the queue the worker runs on (suspend it to hold the worker
    /// before its first work).
    init(configuration: Configuration, workerTarget: DispatchQueue? = nil) {
        self.configuration = configuration
        paths = Paths(directory: configuration.directory)
        worker = DispatchQueue(label: "CachingProtocol.DiskStore.worker", qos: .utility, target: workerTarget)
        var ledger = DiskLedger(capacity: max(0, configuration.capacity), maximumEntryFraction: configuration.maximumEntryFraction,
                                clock: configuration.now, fileProtection: configuration.fileProtection)
        let directoryReady: Bool
        do {
            try FileIO.createDirectories(paths.root, mode: 0o700, protection: configuration.fileProtection)
            try FileIO.createDirectory(paths.entries, mode: 0o700, protection: configuration.fileProtection)
            directoryReady = true
            ledger.beginOpening()
            indexLoad.enter()
        } catch {
            // The store starts empty, in memory only until a write can create the directory.
            directoryReady = false
            ledger.directoryUnusable(CachingError(.diskUnavailable, "\(error)"))
        }
        let start = ledger.takeWorkerStart()
        self.ledger = Locked(ledger)
        fileWorker = DiskWorker(configuration: configuration, paths: paths, ledger: self.ledger, directoryReady: directoryReady,
                                indexLoaded: { [indexLoad] in indexLoad.leave() })
        if let start { startWorker(start) }
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

    /// Changes the ledger under its lock, then starts the worker when the change queued the
    /// first work since it last ran: the one way the store's callers change what it knows.
    @discardableResult
    private func update<Result>(_ change: (inout DiskLedger) -> Result) -> Result {
        let (result, start) = ledger.withLock { ledger in
            let result = change(&ledger)
            return (result, ledger.takeWorkerStart())
        }
        if let start { startWorker(start) }
        return result
    }

    /// Reads the ledger under its lock.
    private func read<Result>(_ body: (DiskLedger) -> Result) -> Result {
        ledger.withLock { body($0) }
    }

    // MARK: - Writing and removing

    /// Stages `record` for the worker to write (lookups see it at once). A record whose file
    /// would exceed what one entry may take is not stored, and what was stored for its key goes.
    /// When more than `Configuration.maximumStagedBytes` were staged before it, waits for the
    /// worker to write them (back-pressure: the caller waits for the disk rather than memory
    /// growing without bound).
    ///
    /// With `bodyFile` (`store(_:bodyFile:)`), the first variant's body is in that streamed file
    /// already (`record` may hold it too, or not): the worker makes the file whole and renames
    /// it into place instead of encoding the record, and lookups meanwhile read that body from it.
    func store(_ record: CacheRecord) {
        store(record, bodyFile: nil)
    }

    /// `store(_:)` of a record whose first variant's body is in `bodyFile` (when not nil). With
    /// `waitsIfBehind` false it never waits: past the bound the record is staged all the same, for
    /// a caller that must not wait for the worker (an end of a transfer taken on corelibs' queue,
    /// whose records are small: bodies kept in memory, `TieredStore.largestCollectedBody`).
    func store(_ record: CacheRecord, bodyFile: StreamedEntryFile?, waitsIfBehind: Bool = true) {
        // An estimate of the file size, close enough to refuse early.
        let held = record.cost
        var cost = held
        if let bodyFile, let first = record.variants.first { cost += bodyFile.appendedBytes - first.body.count }
        let backlogged = update { ledger in
            ledger.stage(record, cost: cost, at: ledger.clock(), bodyFile: bodyFile)
            // Only bytes staged before this record count: one large response alone never waits
            // for its own write (it would hold its answer back from the app for the write's length).
            return ledger.stagedBytes - held > configuration.maximumStagedBytes
        }
        if backlogged, waitsIfBehind { flush() }
    }

    /// Whether more than `Configuration.maximumStagedBytes` wait to be written: a `store` now
    /// would wait for the worker.
    var isBacklogged: Bool {
        read { $0.stagedBytes > configuration.maximumStagedBytes }
    }

    /// A new temporary file in `entries/` to write the body of a response for `key` into as it
    /// arrives (`StreamedEntryFile`), with the class of Data Protection the store's files get.
    /// The file is created on its own queue; one that cannot be (the directory is gone or cannot
    /// be written) fails its writes, and nothing is stored from it.
    func streamedEntryFile(forKey key: String) -> StreamedEntryFile {
        StreamedEntryFile(key: key, path: paths.temporaryFile(in: paths.entries), protection: read(\.fileProtection))
    }

    func removeRecord(forKey key: String) {
        update { $0.forget([EntryDigest(key: key)]) }
    }

    func removeRecords(storedSince date: Date) {
        update { $0.forget(storedSince: date) }
    }

    func removeAll() {
        update { $0.forgetAll() }
    }

    /// The most bytes the directory's files may take once writes settle; setting a smaller value
    /// evicts on the worker (`flush()` waits for it).
    var capacity: Int {
        get { read(\.capacity) }
        set {
            update { ledger in
                ledger.capacity = max(0, newValue)
                ledger.enqueue(.enforceCapacity)
            }
        }
    }

    /// Evicts least recently used entries until the directory holds at most `bytes`, without
    /// changing `capacity`. Settles on the worker; `flush()` waits for it.
    func trim(toBytes bytes: Int) {
        update { $0.enqueue(.trim(toBytes: max(0, bytes))) }
    }

    /// The largest share of `capacity` one entry file may take. Applies to the next `store`.
    var maximumEntryFraction: Double {
        get { read(\.maximumEntryFraction) }
        set { update { $0.maximumEntryFraction = newValue } }
    }

    /// The Data Protection class of the cache's files and directories (Apple platforms; no effect
    /// elsewhere). Setting it gives every existing file and directory the class on the worker,
    /// in order with the writes handed in before, and every file created after.
    var fileProtection: CachingFileProtection {
        get { read(\.fileProtection) }
        set { update { $0.protect(newValue) } }
    }

    /// Has the worker write a fresh index snapshot (and empty the journal) at its next settle, so
    /// that keys the app removed leave every file.
    func persistIndex() {
        update { $0.enqueue(.persistIndex) }
    }

    // MARK: - What it holds

    /// The key and file size of every record on disk, once the writes handed in so far have
    /// landed: from the index's summaries, reading an entry file's header only for an entry
    /// without one (an index from before summaries). Files that vanished or do not read are left out.
    func storedKeys() -> [(key: String, bytes: Int)] {
        flush()
        let files = read { ledger in ledger.index.entries.map { ($0.key, $0.value.fileSize, $0.value.summary?.key) } }
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

    /// Settled records and the real size of the directory's files (entries, index, journal,
    /// pins). What the index says; waits for the index to be loaded when the store just opened.
    var statistics: StoreStatistics {
        waitUntilOpen()
        return read(\.statistics)
    }

    /// The clock for last-access times and the age limit from now on (the installed configuration's).
    var clock: @Sendable () -> Date {
        get { read(\.clock) }
        set { update { $0.clock = newValue } }
    }

    /// What went wrong and how the index was obtained, now (`indexOrigin` is `.opening` until the
    /// worker has loaded the index); never waits for the worker.
    var diagnostics: DiskLedger.Diagnostics {
        read(\.diagnostics)
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

    // MARK: - The worker

    /// Runs the worker until no work is left, at once or after `Configuration.writeDelay` (for a
    /// write). `flush()` drains the queue itself meanwhile.
    private func startWorker(_ start: DiskLedger.WorkerStart) {
        switch start {
        case .now: worker.async { self.runWorker() }
        case .afterWriteDelay: worker.asyncAfter(deadline: .now() + configuration.writeDelay) { self.runWorker() }
        }
    }

    private func runWorker() {
        repeat {
            fileWorker.drain()
        } while !ledger.withLock({ $0.finishRun() })
    }

    /// Journals the access times of hits after `Configuration.accessTimeWriteDelay`, unless a
    /// batch of writes journals them first.
    private func scheduleAccessTimeWrite() {
        worker.asyncAfter(deadline: .now() + configuration.accessTimeWriteDelay) { [weak self] in
            guard let self else { return }
            ledger.withLock { $0.accessTimeWriteStarted() }
            fileWorker.settle()
        }
    }

    // MARK: - Lookups

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
        read { $0.holdsRecord(forKey: key) }
    }

    /// `containsRecord(forKey:)`, or true while a file the index does not list may hold it (the
    /// index is still loading, or the file could not be read when the directory was scanned).
    func mayContainRecord(forKey key: String) -> Bool {
        read { $0.mayHoldRecord(forKey: key) }
    }

    /// The record stored under `key`, or nil, its file read on the calling thread. When
    /// `countingLookup`, counts a hit or a miss and marks the record recently used; the cache's
    /// own read-modify-write passes false, so statistics count what callers asked for.
    func record(forKey key: String, countingLookup: Bool = true) -> CacheRecord? {
        guard case .found(let record) = lookUp(key, countingLookup: countingLookup, sizeLimit: nil) else { return nil }
        return record
    }

    /// A counted lookup that reads the record's file on the calling thread only when it takes
    /// at most `limit` bytes (a staged record costs no read at all).
    func lookup(forKey key: String, readingUpTo limit: Int) -> Lookup {
        lookUp(key, countingLookup: true, sizeLimit: limit)
    }

    /// Plans the lookup under the lock, reads the file outside it, and records what the read
    /// found: a missing file is forgotten, a damaged one deleted, an unreadable one left alone.
    private func lookUp(_ key: String, countingLookup: Bool, sizeLimit: Int?) -> Lookup {
        let digest = EntryDigest(key: key)
        let (plan, scheduleAccessTimes) = update { ledger in
            let clock = ledger.clock
            // Files that could not be read held up loading the index or a scan: try again now.
            if let owed = ledger.takeOwedWork(now: clock, interval: configuration.unreadableRetryInterval) {
                ledger.enqueue(owed)
            }
            return ledger.planRead(key, counting: countingLookup, sizeLimit: sizeLimit, now: clock)
        }
        if scheduleAccessTimes { scheduleAccessTimeWrite() }

        let generation: UInt64?
        switch plan {
        case .staged(let record): return .found(record)
        case .stagedInFile(let record, let bodyFile): return readStaged(record, bodyFile: bodyFile, counting: countingLookup)
        case .miss: return .missing
        case .deferred: return .deferred
        case .indexed(let indexed): generation = indexed
        case .unindexed: generation = nil
        }

        let path = paths.entry(digest)
        do {
            let record = try EntryCodec.decode(try configuration.reader.readFile(path, for: .entry), expectedKey: key)
            let served = update { ledger in
                // Read before the index was complete: it may be a file removed since.
                ledger.fileRead(digest, generation: generation, latestResponseDate: record.latestResponseDate,
                                counting: countingLookup)
            }
            return served ? .found(record) : .missing
        } catch let error as FileError where error.isMissing {
            // Evicted by another process, or the directory was deleted: forget the entry.
            update { ledger in
                if countingLookup { ledger.report.countLookup(found: false) }
                ledger.fileVanished(digest, generation: generation)
            }
        } catch let error as BinaryDecodingError {
            let failure = CachingError(.corruptEntry, "\(path): \(error)")
            update { ledger in
                if countingLookup { ledger.report.countLookup(found: false) }
                ledger.report.noteCorrupt(failure)
                ledger.fileCorrupt(digest, generation: generation)
            }
        } catch {
            // Unreadable for a reason that may pass (permissions, Data Protection while the device
            // is locked, an I/O error): a miss; the file stays, to be read again next time.
            let failure = CachingError(.fileUnreadable, "\(error)")
            update { ledger in
                if countingLookup { ledger.report.countLookup(found: false) }
                ledger.report.noteUnavailable(failure)
            }
        }
        return .missing
    }

    /// A staged record whose first variant's body is in `bodyFile`, with the body read from it.
    private func readStaged(_ record: CacheRecord, bodyFile: StreamedEntryFile, counting: Bool) -> Lookup {
        var whole = record
        do {
            whole.variants[0].body = try bodyFile.readBody()
        } catch {
            update { $0.stagedBodyRead(found: false, counting: counting) }
            return .missing
        }
        update { $0.stagedBodyRead(found: true, counting: counting) }
        return .found(whole)
    }

    // MARK: - Listing

    /// One record as a listing shows it.
    struct Listed: Sendable {
        /// Its summary, with its variants known.
        let summary: EntrySummary
        /// The size of its file; for a record not written yet, its estimated cost.
        let fileBytes: Int
    }

    /// Every record on disk or staged, from the index's summaries: no entry file is read, except
    /// once those whose index entry has no complete summary (a file adopted by a scan, which
    /// reads headers only, or an index from before summaries). Those are read here, on the
    /// calling thread, and their summaries kept in the index (and in its next snapshot), so the
    /// next listing reads nothing. Waits for the index to load, and for a rebuild to end.
    func listing() -> [Listed] {
        waitUntilOpen()
        if !read(\.isIndexReady) { flush() }
        let (staged, indexed) = read { ledger in
            (ledger.stagedSummaries, ledger.index.entries.map { (digest: $0.key, entry: $0.value) })
        }
        var listed: [Listed] = []
        listed.reserveCapacity(indexed.count + staged.count)
        var stagedDigests = Set<EntryDigest>()
        for (summary, cost) in staged {
            stagedDigests.insert(EntryDigest(key: summary.key))
            listed.append(Listed(summary: summary, fileBytes: cost))
        }
        var described: [(digest: EntryDigest, summary: EntrySummary, generation: UInt64)] = []
        var reads = 0
        for item in indexed where !stagedDigests.contains(item.digest) {
            if let summary = item.entry.summary, summary.isComplete {
                listed.append(Listed(summary: summary, fileBytes: item.entry.fileSize))
                continue
            }
            reads += 1
            if let record = try? EntryCodec.decode(configuration.reader.readFile(paths.entry(item.digest), for: .entry),
                                                          expectedKey: item.entry.summary?.key),
                      EntryDigest(key: record.key) == item.digest {
                // A file that cannot be read now is left out; a lookup deals with it as usual.
                let summary = EntrySummary(record)
                described.append((item.digest, summary, item.entry.generation))
                listed.append(Listed(summary: summary, fileBytes: item.entry.fileSize))
            }
        }
        guard reads > 0 else { return listed }
        update { $0.filesDescribed(described, reads: reads) }
        return listed
    }

    // MARK: - Pins

    /// Pins `keys` (their records are kept from eviction and the age limit), in the directory's
    /// pins file, once the writes handed in before have landed (so their sizes are known). All
    /// or nothing: throws `CachingError.pinnedBeyondCapacity` when the pinned records would leave
    /// less than `room` bytes of the capacity for the rest, or a write failure. Runs on the
    /// worker; returns once the file is written.
    func pin(_ keys: [String], leavingRoom room: Int) throws {
        try changePins(adding: keys, removing: [], room: room)
    }

    /// Unpins `keys`; they are evicted like any other record from now on.
    func unpin(_ keys: [String]) throws {
        try changePins(adding: [], removing: keys, room: 0)
    }

    private func changePins(adding added: [String], removing removed: [String], room: Int) throws {
        do {
            try worker.sync {
                fileWorker.drain()
                try fileWorker.changePins(adding: added, removing: removed, room: room)
                fileWorker.settle()
            }
        } catch let error as CachingError {
            throw error
        } catch {
            throw CachingError(.diskUnavailable, "pins: \(error)")
        }
    }

    /// Whether `key` is pinned, as the pins file said when last read (no file is read here).
    func isPinned(_ key: String) -> Bool {
        read { $0.pins.contains(EntryDigest(key: key)) }
    }

    /// The digests pinned now, after reading the pins file again if another process changed it
    /// (on the calling thread).
    func currentPins() -> Pins {
        Pins.refresh(ledger, from: paths.pins, reader: configuration.reader)
        return read(\.pins)
    }

    // MARK: - The age limit

    /// Records whose newest response was stored longer ago than this, on `clock`, are removed,
    /// except pinned ones; nil (the default): no age limit. Setting it queues a sweep at once
    /// (after the index has loaded, when the store just opened); then the worker sweeps whenever
    /// it settles and `DiskLedger.expiryInterval` has passed, and a timer makes it settle at that
    /// interval while nothing else does.
    var maximumEntryAge: TimeInterval? {
        get { read(\.maximumEntryAge) }
        set {
            let limit = update { ledger in
                ledger.limitAge(to: newValue)
                return ledger.maximumEntryAge
            }
            scheduleExpiry(limit)
        }
    }

    /// Starts (or stops, for nil) the timer that prompts sweeps while the store is idle.
    private func scheduleExpiry(_ limit: TimeInterval?) {
        let timer = limit.map { limit -> DispatchSourceTimer in
            let interval = DiskLedger.expiryInterval(for: limit)
            let timer = DispatchSource.makeTimerSource(queue: worker)
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(Int(interval / 10)))
            // The sweep itself runs when the worker settles after this (empty) batch.
            timer.setEventHandler { [weak self] in self?.update { $0.enqueue(.enforceCapacity) } }
            return timer
        }
        let previous = expiryTimer.withLock { current -> DispatchSourceTimer? in
            defer { current = timer }
            return current
        }
        previous?.cancel()
        timer?.resume()
    }

    // MARK: - Inspection

    /// What a cache directory holds, read without opening a store on it and without writing,
    /// creating or deleting anything (`Demo inspect`): the index and journal as they are, every
    /// entry file the index does not list or does not summarise (read whole), and the pins file.
    /// Index entries whose file is gone are left out, so are files that do not decode. Throws
    /// when the directory has no `entries/` to list.
    static func inspect(directory: URL, reader: FileReader = FileReader()) throws -> (listed: [Listed], pins: Pins) {
        let paths = Paths(directory: directory)
        let names = try reader.contentsOfDirectory(paths.entries)
        var files: [EntryDigest: Void] = [:]
        for name in names { if let digest = EntryDigest(fileName: name) { files[digest] = () } }

        var index = DiskIndex()
        if let snapshot = try? reader.readFile(paths.index, for: .index) {
            let journal = (try? reader.readFile(paths.journal, for: .index)) ?? Data()
            index = (try? DiskIndex.load(snapshot: snapshot, journal: journal).index) ?? DiskIndex()
        }
        var listed: [Listed] = []
        for element in index.entries where files.removeValue(forKey: element.key) != nil {
            if let summary = element.value.summary, summary.isComplete {
                listed.append(Listed(summary: summary, fileBytes: element.value.fileSize))
            } else if let read = readListed(element.key, paths: paths, reader: reader) {
                listed.append(read)
            }
        }
        // Files the index does not list: written after its last append, or by another process.
        for digest in files.keys {
            if let read = readListed(digest, paths: paths, reader: reader) { listed.append(read) }
        }
        var pins = Pins()
        if let data = try? reader.readFile(paths.pins, for: .index), let keys = try? Pins.decode(data) {
            pins.install(keys, from: nil)
        }
        return (listed, pins)
    }

    private static func readListed(_ digest: EntryDigest, paths: Paths, reader: FileReader) -> Listed? {
        guard let data = try? reader.readFile(paths.entry(digest), for: .entry), let record = try? EntryCodec.decode(data),
              EntryDigest(key: record.key) == digest else { return nil }
        return Listed(summary: EntrySummary(record), fileBytes: data.count)
    }
}

extension DiskStore {
    /// The tier's settings, with their defaults.
    struct Configuration: Sendable {
        /// The cache directory. Created (with its parents) if missing, owner-only (0700).
        var directory: URL
        /// The most bytes the directory's files may take once writes settle. Default: 100 MiB.
        var capacity: Int
        /// The largest share of `capacity` one entry file may take; larger records are not
        /// stored. Default: 0.25.
        var maximumEntryFraction: Double
        /// Whether to sync each file the store writes before relying on it: entry files before
        /// they are renamed into place (`fsync`), and the journal and snapshot, which must
        /// survive a power loss to be worth syncing at all, with `F_FULLFSYNC` on Darwin (where
        /// `fsync` leaves the data in the drive's cache). Default: false: a file in the page cache
        /// survives the process being killed, a torn entry fails its checksum and is a miss, and a
        /// torn or stale index is rebuilt from the entry files, so a sync per write buys only
        /// keeping the last few seconds of entries through a power loss.
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
        /// moment (`Docs/benchmarks.md` has the measurement), and a burst of misses is written in
        /// one pass. Lookups find the record in the staging area meanwhile; `flush()` and
        /// back-pressure start the write at once. A crash in that window loses the record (a
        /// miss next time). Default: 5 ms.
        var writeDelay: TimeInterval
        /// The most bytes of records waiting to be written. A `store` that finds more staged
        /// (before its own record) waits until the worker has written them, so a burst of large
        /// responses faster than the disk holds memory at this bound instead of growing without
        /// limit. Default: 8 MiB.
        var maximumStagedBytes: Int
        /// The Data Protection class of every file and directory the store creates (Apple
        /// platforms; no effect elsewhere). Default: `.completeUntilFirstUserAuthentication`.
        var fileProtection: CachingFileProtection
        /// How often, at most, a lookup has the worker try again to load an index or scan files
        /// that could not be read (permissions, Data Protection while the device is locked).
        /// Measured with `now`. Default: 5 seconds.
        var unreadableRetryInterval: TimeInterval
        /// Where the store reads files it did not just write; tests inject read failures here.
        /// Default: the file system, with no faults.
        var reader: FileReader
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
            fileProtection: CachingFileProtection = .completeUntilFirstUserAuthentication,
            unreadableRetryInterval: TimeInterval = 5,
            reader: FileReader = FileReader(),
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
            self.fileProtection = fileProtection
            self.unreadableRetryInterval = unreadableRetryInterval
            self.reader = reader
            self.now = now
        }
    }

    /// The paths of one cache directory.
    struct Paths: Sendable {
        let root: String
        let entries: String
        let index: String
        let journal: String
        /// The pinned keys (`Pins`), and the file whose lock serialises changes to them.
        let pins: String
        let pinsLock: String

        init(directory: URL) {
            var root = directory.path
            while root.count > 1, root.hasSuffix("/") { root.removeLast() }
            self.root = root
            entries = root + "/entries"
            index = root + "/index"
            journal = root + "/journal"
            pins = root + "/pins"
            pinsLock = root + "/pins.lock"
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
