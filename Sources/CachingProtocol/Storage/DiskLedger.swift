import Foundation

/// Everything the disk tier knows, in one value: its entry files (the index) and the records
/// about to become files (the staged writes), what a scan of the directory may still find, the
/// pinned keys, the limits (capacity, the largest entry, the age limit), what went wrong, and the
/// work queued for the worker. This is the only place any of it changes: `DiskStore` (lookups and
/// the app's calls, on any thread) and `DiskWorker` (on its queue) call the operations below,
/// each named by what happened; an operation that leaves files to write or delete queues that
/// work itself, and says whether the worker must be started (`takeWorkerStart`).
///
/// A value type with no I/O and no lock: the store keeps it inside its one `Locked`, so an
/// operation and the caller's bookkeeping around it are one step; tests drive it without a disk.
///
/// What it keeps true:
/// - a digest is in the access times to journal only while the index lists it;
/// - tombstones exist only while a scan is queued, running or owed (`scanPending`): once none
///   is, the index lists every file the store may serve, so a removal goes through it alone;
/// - a staged record has at most one write queued, and a write that finishes after a newer
///   `stage` or a removal neither unstages the newer record nor brings the removed one back;
/// - a file the index does not list is read directly only while the index is incomplete or the
///   file could not be read by the last scan, and never once it was removed;
/// - pinned records are evicted only when the pinned ones alone do not fit, and never expire.
struct DiskLedger {
    /// The entry files on disk, least recently used first.
    private(set) var index = DiskIndex()
    /// How the index was obtained, and whether it lists every file yet.
    private(set) var phase = IndexPhase.loaded
    /// Files a scan listed but could not read: neither adopted nor deleted; lookups read them
    /// directly, and a later scan tries them again.
    private(set) var unreadableFiles: Set<EntryDigest> = []
    /// `open` and `reconcile` operations queued or running.
    private var scansInFlight = 0
    private var owedWork: OwedWork?
    /// The owed work is queued; `lastOwedAttempt` is when it was last handed out.
    private var owedWorkQueued = false
    private var lastOwedAttempt: Date?
    private var tombstones = Tombstones()
    private var staged = StagedWrites()
    /// Digests with a `.write` queued and not yet started.
    private var scheduledWrites: Set<EntryDigest> = []
    /// Numbers the stores, so a write knows whether a newer one came after it.
    private var sequence: UInt64 = 0
    /// Entries read since their access time was last journaled.
    private var touched: Set<EntryDigest> = []
    /// A delayed journal append of access times is scheduled.
    private var accessTimeWriteScheduled = false
    /// The pinned keys, as the pins file said when last read or written (`DiskWorker`).
    var pins = Pins()

    /// The most bytes the directory's files may take once writes settle.
    var capacity: Int
    /// The largest share of `capacity` one entry file may take.
    var maximumEntryFraction: Double
    /// The size of the index snapshot, journal and pins files, as the worker last saw them.
    var metadataBytes = 0
    /// Records whose newest response was stored longer ago than this are removed (unless
    /// pinned); nil: no age limit.
    private(set) var maximumEntryAge: TimeInterval?
    /// When records past the age limit were last removed, on `clock`.
    private var lastExpiry: Date?
    /// The clock for last-access times and the age limit.
    var clock: @Sendable () -> Date
    /// The Data Protection class asked for last: of every file created from now on, and (through
    /// the `protect` work, in order with the writes) of every existing one.
    private(set) var fileProtection: CachingFileProtection
    /// What lookups found and what went wrong since the store opened (`diagnostics` adds the
    /// index's phase and the staged count).
    var report = Diagnostics()
    /// The work queued for the worker, in order.
    private var work: [Work] = []
    /// A run of the worker is scheduled or running and will see new work.
    private var workerScheduled = false
    /// The worker must be started by whoever changed the ledger (`takeWorkerStart`).
    private var workerStartOwed: WorkerStart?

    /// A ledger with no files, whose index is complete (what a store finds in an empty
    /// directory), with the limits of `DiskStore.Configuration`'s defaults.
    init(capacity: Int = 100 << 20, maximumEntryFraction: Double = 0.25, clock: @escaping @Sendable () -> Date = systemClock,
         fileProtection: CachingFileProtection = .completeUntilFirstUserAuthentication) {
        self.capacity = capacity
        self.maximumEntryFraction = maximumEntryFraction
        self.clock = clock
        self.fileProtection = fileProtection
    }

    // MARK: - What it holds

    var stagedCount: Int { staged.count }
    /// The records handed to `store` and not written yet, summarised, with their cost.
    var stagedSummaries: [(summary: EntrySummary, cost: Int)] { staged.map { ($0.value.summary, $0.value.cost) } }
    /// The bytes the staged records hold in memory.
    var stagedBytes: Int { staged.bytes }
    /// Whether the index lists every file the store may serve.
    var isIndexReady: Bool { phase.isComplete }
    /// Whether the journal and snapshot may be written: not while the index on disk could not
    /// be read (writing them would replace what it holds with what this store knows).
    var persistsIndex: Bool { !phase.isUnreadable }
    /// Whether a scan may still find files the index does not list, so removals leave tombstones.
    var scanPending: Bool { scansInFlight > 0 || owedWork != nil }
    /// The most bytes one entry file may take.
    var maximumEntryBytes: Int { entryCostLimit(capacity: capacity, fraction: maximumEntryFraction) }

    /// Whether a record for `key` is staged or in the index.
    func holdsRecord(forKey key: String) -> Bool {
        let digest = EntryDigest(key: key)
        return staged[digest]?.record.key == key || index.contains(digest)
    }

    /// `holdsRecord(forKey:)`, or true while a file the index does not list may hold it.
    func mayHoldRecord(forKey key: String) -> Bool {
        !isIndexReady || unreadableFiles.contains(EntryDigest(key: key)) || holdsRecord(forKey: key)
    }

    func isIndexed(_ digest: EntryDigest) -> Bool {
        index.contains(digest)
    }

    /// Whether `digest` was removed while a scan was pending, so a file read directly for it
    /// (a lookup before the index was complete) must not be served.
    func wasRemoved(_ digest: EntryDigest, latestResponseDate: Date) -> Bool {
        tombstones.covers(digest, latestResponseDate: latestResponseDate)
    }

    /// What went wrong and how the index was obtained, now.
    var diagnostics: Diagnostics {
        var diagnostics = report
        diagnostics.indexOrigin = phase
        diagnostics.stagedCount = staged.count
        return diagnostics
    }

    /// Settled records and the real size of the directory's files (entries, index, journal, pins).
    var statistics: StoreStatistics {
        StoreStatistics(entryCount: index.count, byteCount: index.byteCount + metadataBytes, capacity: capacity,
                        hits: report.hits, misses: report.misses)
    }

    // MARK: - Lookups

    /// Decides how a lookup of `key` is answered and, when `counting`, marks what it finds as
    /// used at `now()` (read only then) and counts a staged hit or a miss (and every file read).
    /// `sizeLimit`: the most bytes the caller reads here. The second value says whether the
    /// caller must schedule the journal append of access times.
    mutating func planRead(_ key: String, counting: Bool, sizeLimit: Int?, now: () -> Date) -> (ReadPlan, scheduleAccessTimes: Bool) {
        let (plan, schedule) = plan(key, counting: counting, sizeLimit: sizeLimit, now: now)
        switch plan {
        case .staged: if counting { report.countLookup(found: true) }
        case .stagedInFile: break  // counted once the body is read (`stagedBodyRead`)
        case .indexed, .unindexed: report.countFileReads()
        case .miss: if counting { report.countLookup(found: false) }
        case .deferred: break
        }
        return (plan, schedule)
    }

    private mutating func plan(_ key: String, counting: Bool, sizeLimit: Int?, now: () -> Date) -> (ReadPlan, Bool) {
        let digest = EntryDigest(key: key)
        if let write = staged[digest], write.record.key == key {
            if counting { staged[digest]?.lastAccess = now() }
            guard let bodyFile = write.unreadBody else { return (.staged(write.record), false) }
            if let sizeLimit, write.cost > sizeLimit { return (.deferred, false) }
            return (.stagedInFile(write.record, bodyFile), false)
        }
        if let entry = index.entry(for: digest) {
            if let sizeLimit, entry.fileSize > sizeLimit { return (.deferred, false) }
            guard counting else { return (.indexed(generation: entry.generation), false) }
            index.touch(digest, at: now())
            touched.insert(digest)
            let schedule = !accessTimeWriteScheduled
            accessTimeWriteScheduled = true
            return (.indexed(generation: entry.generation), schedule)
        }
        if !isIndexReady || unreadableFiles.contains(digest), !tombstones.covers(digest) {
            return (sizeLimit == nil ? .unindexed : .deferred, false)
        }
        return (.miss, false)
    }

    /// A lookup read the file of `digest` directly (`generation` nil: the index did not list it)
    /// and decoded it: counts the lookup, and says whether the record must be served (not when
    /// it was removed since).
    mutating func fileRead(_ digest: EntryDigest, generation: UInt64?, latestResponseDate: Date, counting: Bool) -> Bool {
        let removed = generation == nil && wasRemoved(digest, latestResponseDate: latestResponseDate)
        if counting { report.countLookup(found: !removed) }
        return !removed
    }

    /// A lookup read the body of a staged record from its streamed file (`ReadPlan.stagedInFile`):
    /// counts the lookup, found or not (the file could not be read).
    mutating func stagedBodyRead(found: Bool, counting: Bool) {
        if counting { report.countLookup(found: found) }
    }

    /// A lookup found the file of `digest` missing (another process evicted it, or the directory
    /// was deleted): forgotten, and its discard queued, if the index entry is still the one of
    /// write `generation` (a newer write replaced the file otherwise). Returns whether it was.
    @discardableResult
    mutating func fileVanished(_ digest: EntryDigest, generation: UInt64?) -> Bool {
        unreadableFiles.remove(digest)
        guard let generation, index.remove(digest, ifGeneration: generation) else { return false }
        touched.remove(digest)
        enqueue(.discard([digest]))
        return true
    }

    /// A lookup found the file of `digest` damaged: it is forgotten and its discard queued.
    /// `generation`: the index entry the lookup read, or nil for a file it read directly.
    /// Returns false when a newer write replaced the file meanwhile (that one is kept).
    @discardableResult
    mutating func fileCorrupt(_ digest: EntryDigest, generation: UInt64?) -> Bool {
        unreadableFiles.remove(digest)
        if let generation {
            guard index.remove(digest, ifGeneration: generation) else {
                return false  // a newer write replaced the file meanwhile: keep that one
            }
        } else {
            index.remove(digest)  // read before the index was complete: it may list it since
        }
        touched.remove(digest)
        // Until the discard runs the file is still there: remembered as removed while a scan is
        // pending, so no lookup and no scan finds (and counts) it again.
        if scanPending { tombstones.digests.insert(digest) }
        enqueue(.discard([digest]))
        return true
    }

    /// A listing read the files of entries that had no complete summary, `described` being those
    /// it could read, each with the write `generation` it read: an entry keeps its summary
    /// unless a newer write replaced the file, and the index is saved with them.
    mutating func filesDescribed(_ described: [(digest: EntryDigest, summary: EntrySummary, generation: UInt64)], reads: Int) {
        report.countFileReads(reads)
        var kept = false
        for item in described where index.describe(item.digest, item.summary, ifGeneration: item.generation) {
            kept = true
        }
        if kept { enqueue(.persistIndex) }
    }

    /// The delayed journal append of access times has run (or is about to).
    mutating func accessTimeWriteStarted() {
        accessTimeWriteScheduled = false
    }

    // MARK: - Writing

    /// Stages `record` (lookups see it at once, as used at `now`) and queues its write, unless one
    /// is queued for the digest already and has not started (this record replaces that one's).
    /// With `bodyFile`, the first variant's body is in that file (`record` may hold it in memory
    /// too, or not at all), which the write makes the entry's file. A record larger than an
    /// entry may be is not staged, and what was stored for its key goes. Returns whether a write
    /// was queued.
    @discardableResult
    mutating func stage(_ record: CacheRecord, cost: Int, at now: Date, bodyFile: StreamedEntryFile? = nil) -> Bool {
        let digest = EntryDigest(key: record.key)
        guard cost <= maximumEntryBytes else {
            forget([digest])
            return false
        }
        sequence += 1
        staged[digest] = Staged(record: record, sequence: sequence, lastAccess: now, cost: cost, bodyFile: bodyFile)
        guard scheduledWrites.insert(digest).inserted else { return false }  // coalesced
        enqueue(.write(digest))
        return true
    }

    /// What the worker writes for a staged record.
    struct WriteJob {
        var record: CacheRecord
        var sequence: UInt64
        /// The largest file it may write.
        var limit: Int
        /// The file that holds the first variant's body already, to be made whole and renamed.
        var bodyFile: StreamedEntryFile?
    }

    /// The worker starts writing `digest`: the staged record's job, or nil when it was removed
    /// meanwhile. A `stage` from now on queues another write.
    mutating func beginWrite(_ digest: EntryDigest) -> WriteJob? {
        scheduledWrites.remove(digest)
        return staged[digest].map { WriteJob(record: $0.record, sequence: $0.sequence, limit: maximumEntryBytes, bodyFile: $0.bodyFile) }
    }

    /// Whether a record for `digest` is still staged (it was not removed while being written).
    func isStaged(_ digest: EntryDigest) -> Bool {
        staged[digest] != nil
    }

    /// The file of write `sequence` is in place. Unstages the record unless a newer one was
    /// staged, and lists the file in the index with the record's last access. Returns the index
    /// entry, or nil when the record was removed after the rename (the file must go).
    mutating func markWritten(_ digest: EntryDigest, sequence: UInt64, fileSize: Int, latestResponseDate: Date,
                              summary: EntrySummary? = nil) -> DiskIndex.Entry? {
        guard let current = staged[digest] else { return nil }
        if current.sequence == sequence { staged.removeValue(forKey: digest) }
        var entry = DiskIndex.Entry(fileSize: fileSize, latestResponseDate: latestResponseDate, lastAccess: current.lastAccess,
                                    summary: summary)
        entry.generation = index.put(digest, entry)
        touched.remove(digest)  // the put carries the access time
        unreadableFiles.remove(digest)
        report.noteWriteSucceeded()
        return entry
    }

    /// A write that will not happen (too large once encoded, or it failed): unstages it unless a
    /// newer one is staged, and forgets the old file, which the caller deletes.
    mutating func dropWrite(_ digest: EntryDigest, sequence: UInt64) {
        if staged[digest]?.sequence == sequence { staged.removeValue(forKey: digest) }
        index.remove(digest)
        touched.remove(digest)
        unreadableFiles.remove(digest)
    }

    // MARK: - Removing

    /// The app removed `digests`: they are unstaged, dropped from the index, remembered as
    /// removed while a scan is pending, and their files' deletion is queued (none for a key with
    /// no staged write, no index entry and no file a scan may still find, so an unknown key
    /// costs no disk work). Returns the digests whose files go.
    @discardableResult
    mutating func forget(_ digests: [EntryDigest]) -> [EntryDigest] {
        let onDisk = forgetting(digests)
        if !onDisk.isEmpty { enqueue(.discard(onDisk)) }
        return onDisk
    }

    /// `forget` without queuing the discard: for the worker, which deletes them itself.
    private mutating func forgetting(_ digests: [EntryDigest]) -> [EntryDigest] {
        var onDisk: [EntryDigest] = []
        for digest in digests {
            let wasStaged = staged.removeValue(forKey: digest) != nil
            // A later store must queue a write after this removal, not coalesce into an earlier one.
            scheduledWrites.remove(digest)
            let wasIndexed = index.remove(digest) != nil
            let wasUnreadable = unreadableFiles.remove(digest) != nil
            touched.remove(digest)
            if scanPending { tombstones.digests.insert(digest) }
            if wasStaged || wasIndexed || wasUnreadable || scanPending { onDisk.append(digest) }
        }
        return onDisk
    }

    /// The app removed every record whose newest response is dated `date` or later: `forget`
    /// for those the store knows of, and a date a pending scan applies to the files it finds.
    @discardableResult
    mutating func forget(storedSince date: Date) -> [EntryDigest] {
        var digests = index.digests(storedSince: date)
        for (digest, staged) in staged where staged.record.latestResponseDate >= date {
            digests.append(digest)
        }
        if scanPending { tombstones.storedSince = min(tombstones.storedSince ?? date, date) }
        return digests.isEmpty ? [] : forget(digests)
    }

    /// The app removed everything: the worker then deletes every file the index does not list.
    mutating func forgetAll() {
        staged.removeAll()
        scheduledWrites.removeAll()
        touched.removeAll()
        index.removeAll()
        unreadableFiles.removeAll()
        if scanPending { tombstones.all = true }
        enqueue(.removeAll)
    }

    /// Of `digests`, whose discard was queued, the files to delete: not those written again since.
    func filesToDiscard(_ digests: [EntryDigest]) -> [EntryDigest] {
        digests.filter { !index.contains($0) }
    }

    /// Evicts least recently used entries until they and `metadataBytes` (snapshot, journal and
    /// journal records not appended yet, each eviction adding `removalRecordSize`) fit in `limit`
    /// (at most the capacity): unpinned entries first; pinned ones only when they alone do not fit
    /// (they grew, or the capacity was lowered). Returns the evicted digests, whose files the
    /// caller deletes.
    mutating func evict(toFit limit: Int = .max, metadataBytes: Int, removalRecordSize: Int) -> [EntryDigest] {
        let limit = min(limit, capacity)
        var total = index.byteCount + metadataBytes
        var victims: [EntryDigest] = []
        if total > limit, !pins.isEmpty {
            for element in index.entries where !pins.contains(element.key) {
                guard total > limit else { break }
                victims.append(element.key)
                total += removalRecordSize - element.value.fileSize
            }
            for digest in victims {
                index.remove(digest)
                touched.remove(digest)
            }
        }
        while total > limit, let victim = index.popLeastRecent() {
            touched.remove(victim.digest)
            victims.append(victim.digest)
            total += removalRecordSize - victim.entry.fileSize
        }
        return victims
    }

    /// The cache directory was deleted while the store ran: it holds no file any more.
    mutating func vanish() {
        index.removeAll()
        touched.removeAll()
        unreadableFiles.removeAll()
    }

    // MARK: - The age limit

    /// How often, on the store's clock, records past `limit` are looked for: a tenth of it,
    /// between a minute and an hour.
    static func expiryInterval(for limit: TimeInterval) -> TimeInterval {
        min(max(limit / 10, 60), 3_600)
    }

    /// Sets the age limit (nil: none; a non-finite one is no limit in practice) and has the next
    /// settle sweep at once.
    mutating func limitAge(to limit: TimeInterval?) {
        maximumEntryAge = limit.map { $0.isFinite ? max(0, $0) : .greatestFiniteMagnitude }
        lastExpiry = nil
        enqueue(.enforceCapacity)
    }

    /// When a sweep is due (an age limit is set, and `expiryInterval` passed since the last one,
    /// on `clock`): `expire(storedBefore:)` at the limit. The worker deletes the files returned.
    mutating func expireIfDue() -> [EntryDigest] {
        guard let limit = maximumEntryAge, isIndexReady else { return [] }
        let now = clock()
        if let lastExpiry, now.timeIntervalSince(lastExpiry) < Self.expiryInterval(for: limit), now >= lastExpiry {
            return []
        }
        lastExpiry = now
        return expire(storedBefore: now.addingTimeInterval(-limit))
    }

    /// The records stored before `cutoff` (their newest response is older), except pinned ones,
    /// are removed as the app's removals are (`forget`). Returns the digests whose files the
    /// caller (the worker) deletes. Nothing while the index is incomplete: a later sweep sees
    /// every file.
    mutating func expire(storedBefore cutoff: Date) -> [EntryDigest] {
        guard isIndexReady else { return [] }
        var doomed: [EntryDigest] = []
        for element in index.entries where element.value.latestResponseDate < cutoff && !pins.contains(element.key) {
            doomed.append(element.key)
        }
        return doomed.isEmpty ? [] : forgetting(doomed)
    }

    // MARK: - Pins

    /// The bytes `digests` take on disk: each one's file, or the cost of its record not written yet.
    func bytes(of digests: Set<EntryDigest>) -> Int {
        digests.reduce(0) { total, digest in total + (staged[digest]?.cost ?? index.entry(for: digest)?.fileSize ?? 0) }
    }

    // MARK: - The journal

    /// The access times of hits not journaled yet, oldest first; they count as journaled from
    /// now. Nil while the index may not be persisted.
    mutating func takeAccessTimes() -> [DiskIndex.JournalRecord]? {
        guard persistsIndex else { return nil }
        guard !touched.isEmpty else { return [] }
        var times: [(EntryDigest, Date)] = []
        times.reserveCapacity(touched.count)
        for digest in touched {
            if let entry = index.entry(for: digest) { times.append((digest, entry.lastAccess)) }
        }
        touched.removeAll()
        times.sort { $0.1 < $1.1 }
        return times.map { .touch($0.0, $0.1) }
    }

    /// The whole index as a snapshot; the access times it holds count as journaled. Nil while the
    /// index may not be persisted.
    mutating func takeSnapshot() -> Data? {
        guard persistsIndex else { return nil }
        touched.removeAll()
        return index.snapshotData()
    }

    // MARK: - Failures and settings

    /// The cache directory could not be created when the store opened: it starts empty, in
    /// memory only until a write can create it.
    mutating func directoryUnusable(_ error: CachingError) {
        report.noteDirectoryUnusable(error)
        phase = .unavailable
    }

    /// Gives every file and directory of the cache `protection` (on the worker, in order with
    /// the writes queued before), and every file created from now on.
    mutating func protect(_ protection: CachingFileProtection) {
        fileProtection = protection
        enqueue(.protect(protection))
    }
}

// MARK: - Opening and scanning

extension DiskLedger {
    /// The store opens: its first work (`open`) loads the index, then scans.
    mutating func beginOpening() {
        phase = .opening
        scansInFlight += 1
        enqueue(.open)
    }

    /// A `reconcile` is about to be queued: until it ends, removals leave tombstones.
    mutating func scanQueued() {
        scansInFlight += 1
    }

    /// The worker found the directory usable again after it was not (or was deleted): a scan
    /// learns what it holds now (another process may have written there).
    mutating func directoryRecovered() {
        scanQueued()
        enqueue(.reconcile(full: false))
    }

    /// The snapshot and journal were read (with `damagedJournalBytes` skipped): `loaded` takes
    /// the place of the index, without what was removed since the store opened and behind what
    /// was written since (which is newer). The scan that follows is still pending.
    mutating func install(_ loaded: DiskIndex, damagedJournalBytes: Int = 0) {
        var loaded = loaded
        if tombstones.all {
            loaded.removeAll()
        } else {
            for element in loaded.entries
            where tombstones.covers(element.key, latestResponseDate: element.value.latestResponseDate) {
                loaded.remove(element.key)
            }
        }
        if index.isEmpty {
            index = loaded
        } else {
            // Written while the index could not be read: those entries stay the most recent.
            for element in loaded.entries.reversed() where !index.contains(element.key) {
                index.adopt(element.key, element.value)
            }
        }
        phase = .loaded
        report.damagedJournalBytes = damagedJournalBytes
        if owedWork == .loadIndex { owedWork = nil }
    }

    /// There is no usable snapshot (`reason`): the scan that follows rebuilds the index from the files.
    mutating func indexMissing(_ reason: String = "") {
        phase = .rebuilt(reason: reason, complete: false)
        report.damagedJournalBytes = 0
        if owedWork == .loadIndex { owedWork = nil }
    }

    /// The snapshot or journal exists but could not be read: nothing is rebuilt, and a later
    /// lookup tries again (`takeOwedWork`). Ends the `open` work.
    mutating func indexUnreadable(_ reason: String = "") {
        phase = .unreadable(reason: reason)
        report.damagedJournalBytes = 0
        endScan(owing: .loadIndex)
    }

    /// A scan may begin: false (and the scan ends, owed) while the index could not be read,
    /// since adopting files now would rebuild it. Loading it, when a later lookup tries again,
    /// scans too.
    mutating func scanMayRun() -> Bool {
        guard !persistsIndex else { return true }
        endScan(owing: owedWork ?? .loadIndex)
        return false
    }

    /// A scan listed `entries/`: drops the entries whose file is gone and returns them, with the
    /// files the index does not list that were not removed since the store opened (to adopt).
    mutating func compare(listed: Set<EntryDigest>) -> (unlisted: [EntryDigest], vanished: [EntryDigest]) {
        var vanished: [EntryDigest] = []
        for element in index.entries where !listed.contains(element.key) {
            vanished.append(element.key)
        }
        for digest in vanished {
            index.remove(digest)
            touched.remove(digest)
        }
        // Files removed since the store opened have their discard queued: not read here (a
        // corrupt one was counted when a lookup found it).
        let unlisted: [EntryDigest] = listed.filter { !index.contains($0) && !tombstones.covers($0) }
        return (unlisted, vanished)
    }

    /// A scan read the headers of files the index did not list: each found becomes least
    /// recently used (pass them newest first), unless it was removed since the store opened or
    /// listed since. Returns the journal records of the adopted entries, and the removed files
    /// to delete.
    mutating func adopt(_ found: [(digest: EntryDigest, entry: DiskIndex.Entry)])
        -> (records: [DiskIndex.JournalRecord], removed: [EntryDigest]) {
        var records: [DiskIndex.JournalRecord] = []
        var removed: [EntryDigest] = []
        for item in found where !index.contains(item.digest) {
            // Removed by the app since the store opened: delete it rather than bring it back.
            if tombstones.covers(item.digest, latestResponseDate: item.entry.latestResponseDate) {
                removed.append(item.digest)
                continue
            }
            index.adopt(item.digest, item.entry)
            unreadableFiles.remove(item.digest)
            if let entry = index.entry(for: item.digest) { records.append(.put(item.digest, entry)) }
        }
        return (records, removed)
    }

    /// A scan dealt with every file it listed, except `unreadable` ones (neither adopted nor
    /// deleted; a later lookup has them scanned again). The index is complete but for those.
    mutating func finishScan(unreadable: Set<EntryDigest> = []) {
        unreadableFiles = unreadable.filter { !index.contains($0) }
        phase = phase.completed
        endScan(owing: unreadableFiles.isEmpty ? nil : .scan)
    }

    /// A scan could not list `entries/` for a reason that may pass (permissions): nothing
    /// changes, and a later lookup tries again.
    mutating func scanUnavailable() {
        endScan(owing: .scan)
    }

    /// A scan found the directory gone: the index is what it is (the next write recreates the
    /// directory).
    mutating func scanAbandoned() {
        phase = phase.completed
        endScan(owing: nil)
    }

    private mutating func endScan(owing work: OwedWork?) {
        scansInFlight = max(0, scansInFlight - 1)
        owedWork = work
        owedWorkQueued = false
        // Once no scan is pending the index lists every file, so removals go through it alone.
        if !scanPending { tombstones = Tombstones() }
    }

    /// The work that tries again what files that could not be read held up — loading the
    /// index, or a scan — when there is one, it is not queued already, and `interval` has passed
    /// since the last try. Counts it as a queued scan.
    mutating func takeOwedWork(now: () -> Date, interval: TimeInterval) -> Work? {
        guard let owedWork, !owedWorkQueued else { return nil }
        let now = now()
        if let lastOwedAttempt, now.timeIntervalSince(lastOwedAttempt) < interval { return nil }
        owedWorkQueued = true
        lastOwedAttempt = now
        scansInFlight += 1
        switch owedWork {
        case .loadIndex: return .open
        case .scan: return .reconcile(full: !isIndexReady)
        }
    }
}

// MARK: - The worker's queue

extension DiskLedger {
    /// Work for the worker, done in the order queued.
    enum Work: Equatable {
        /// Write the staged record of this digest, if it is still staged.
        case write(EntryDigest)
        /// Delete these entry files unless a write settled for them since (and journal it).
        case discard([EntryDigest])
        /// Delete every entry file not in the index, then write a fresh snapshot.
        case removeAll
        /// Evict down to the capacity (and sweep what is past the age limit, when due): what
        /// every batch ends with, so this only makes sure a batch runs.
        case enforceCapacity
        /// Evict down to this many bytes once, leaving the capacity as it is.
        case trim(toBytes: Int)
        /// Compare the index with the files in `entries/`; when `full`, the index was not loaded
        /// and is rebuilt from the files.
        case reconcile(full: Bool)
        /// Load the index snapshot and journal, then reconcile: the store's first work, and
        /// what a lookup queues again when they could not be read.
        case open
        /// Give every file and directory of the cache this Data Protection class.
        case protect(CachingFileProtection)
        /// Write a fresh snapshot (and empty the journal) at the next settle: a listing filled in
        /// summaries the journal does not have, or the app removed records whose keys must leave
        /// every file.
        case persistIndex
    }

    /// How the worker is to be started.
    enum WorkerStart: Equatable {
        case now
        /// After `DiskStore.Configuration.writeDelay`: the first work queued was a write.
        case afterWriteDelay
    }

    /// Queues `work`. When no run of the worker is scheduled, the caller owes it a start
    /// (`takeWorkerStart`).
    mutating func enqueue(_ work: Work) {
        self.work.append(work)
        guard !workerScheduled else { return }
        workerScheduled = true
        if case .write = work { workerStartOwed = .afterWriteDelay } else { workerStartOwed = .now }
    }

    /// How the caller must start the worker for the work it queued, if it must; asked once per
    /// change of the ledger (`DiskStore.update`).
    mutating func takeWorkerStart() -> WorkerStart? {
        defer { workerStartOwed = nil }
        return workerStartOwed
    }

    /// The work queued so far, for the worker to perform.
    mutating func takeWork() -> [Work] {
        defer { work = [] }
        return work
    }

    /// The worker found nothing left to do: the next `enqueue` starts it again. Returns false
    /// when something arrived meanwhile (the worker goes on).
    mutating func finishRun() -> Bool {
        guard work.isEmpty else { return false }
        workerScheduled = false
        return true
    }
}

// MARK: - Its parts

extension DiskLedger {
    /// How the index was obtained, and whether it lists every file yet: the disk tier's phase.
    enum IndexPhase: Sendable, Equatable {
        /// The store's first work has not loaded it yet. Lookups read entry files directly.
        case opening
        /// From the snapshot and journal, without reading entry files; complete.
        case loaded
        /// The snapshot was missing or damaged (`reason`): the scan rebuilds the index from the
        /// files' headers, and until it is `complete` lookups read entry files directly.
        case rebuilt(reason: String, complete: Bool)
        /// The snapshot or journal could not be read (permissions; Data Protection while the
        /// device is locked). Nothing is rebuilt and neither is overwritten; the index holds only
        /// what this store wrote since, lookups read other entry files directly, and a later
        /// lookup tries to load it again (then `loaded`).
        case unreadable(reason: String)
        /// The directory could not be used when the store opened: it started empty.
        case unavailable

        var isComplete: Bool {
            switch self {
            case .loaded, .unavailable, .rebuilt(_, complete: true): true
            case .opening, .rebuilt(_, complete: false), .unreadable: false
            }
        }

        var isUnreadable: Bool {
            if case .unreadable = self { return true }
            return false
        }

        /// The phase once a scan dealt with every file: a rebuild is complete.
        var completed: IndexPhase {
            if case .rebuilt(let reason, _) = self { return .rebuilt(reason: reason, complete: true) }
            return self
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

    /// What lookups found and what went wrong since the store opened, and whether it can write.
    struct Diagnostics: Sendable, Equatable {
        private(set) var hits = 0
        private(set) var misses = 0
        /// Whether the store can write.
        private(set) var status = Status.available
        /// The most recent failure (a write, a corrupt or unreadable file), or nil.
        private(set) var lastError: CachingError?
        /// Entry files found torn, truncated, foreign, of another version or another key, and removed.
        private(set) var corruptEntriesRemoved = 0
        /// Reads of entry files, of the directory or of the index that failed for a reason that
        /// may pass (permissions, Data Protection, I/O errors): each left everything in place.
        private(set) var unavailableReads = 0
        /// Writes that failed (entry files, journal appends, snapshots) and were dropped.
        private(set) var writeFailures = 0
        /// Entry files opened for reading (lookups and index rebuilds): a test hook.
        private(set) var entryFileReads = 0
        /// Journal bytes skipped as damaged when the index was loaded.
        var damagedJournalBytes = 0
        /// How the index was obtained (`opening` until the worker has loaded it).
        fileprivate(set) var indexOrigin = IndexPhase.loaded
        /// Records accepted by `store` and not yet written.
        fileprivate(set) var stagedCount = 0

        mutating func countLookup(found: Bool) {
            if found { hits += 1 } else { misses += 1 }
        }

        mutating func countFileReads(_ count: Int = 1) {
            entryFileReads += count
        }

        /// Damaged entry files were found; their deletion is queued or done.
        mutating func noteCorrupt(_ error: CachingError, count: Int = 1) {
            corruptEntriesRemoved += count
            lastError = error
        }

        /// Reads failed for a reason that may pass; nothing was deleted.
        mutating func noteUnavailable(_ error: CachingError, count: Int = 1) {
            unavailableReads += count
            lastError = error
        }

        mutating func noteWriteFailure(_ error: CachingError) {
            writeFailures += 1
            status = .unavailable(error)
            lastError = error
        }

        /// A write succeeded: the store can write again.
        fileprivate mutating func noteWriteSucceeded() {
            if case .unavailable = status { status = .available }
        }

        /// The directory could not be created when the store opened: it starts empty.
        fileprivate mutating func noteDirectoryUnusable(_ error: CachingError) {
            status = .unavailable(error)
            lastError = error
        }
    }

    /// A scan that could not be completed because files could not be read, to be tried again.
    private enum OwedWork {
        /// Load the index (the `open` work), then scan.
        case loadIndex
        /// List the directory and read the headers of the files the index lacks.
        case scan
    }

    /// One staged record.
    struct Staged {
        var record: CacheRecord
        var sequence: UInt64
        var lastAccess: Date
        /// What the record costs, a body kept in `bodyFile` included (the size limit's estimate).
        var cost: Int
        /// The file that holds the first variant's body (`stage(_:cost:at:bodyFile:)`), and the
        /// length of that body.
        var bodyFile: StreamedEntryFile?
        var bodyFileBytes = 0

        init(record: CacheRecord, sequence: UInt64, lastAccess: Date, cost: Int, bodyFile: StreamedEntryFile? = nil) {
            self.record = record
            self.sequence = sequence
            self.lastAccess = lastAccess
            self.cost = cost
            self.bodyFile = bodyFile
            bodyFileBytes = bodyFile?.appendedBytes ?? 0
        }

        /// The file to read the first variant's body from, when `record` does not hold it.
        var unreadBody: StreamedEntryFile? {
            guard let bodyFile, record.variants.first?.body.count != bodyFileBytes else { return nil }
            return bodyFile
        }

        /// The bytes it holds in memory: its cost, less a body only in its file. What
        /// back-pressure counts (`StagedWrites.bytes`).
        var heldBytes: Int {
            unreadBody == nil ? cost : cost - bodyFileBytes
        }

        /// The record as a listing shows it, a body kept in `bodyFile` counted.
        var summary: EntrySummary {
            EntrySummary(record, firstBodyBytes: bodyFile == nil ? nil : bodyFileBytes)
        }
    }

    /// What a lookup should do, decided under the lock.
    enum ReadPlan: Equatable {
        /// The record is staged: no file to read.
        case staged(CacheRecord)
        /// The record is staged with its first variant's body in a streamed file not written
        /// into place yet: read the body from it (`StreamedEntryFile.readBody`).
        case stagedInFile(CacheRecord, StreamedEntryFile)
        /// Read the file the index lists, written by write `generation`.
        case indexed(generation: UInt64)
        /// Read the file directly: the index does not list it but may be incomplete.
        case unindexed
        /// The file is larger than the caller wants to read here, or its size is unknown.
        case deferred
        /// Nothing is stored.
        case miss
    }

    /// Records handed to `store` and not yet written, with the bytes they hold kept up to date.
    private struct StagedWrites: Sequence {
        private var records: [EntryDigest: Staged] = [:]
        /// The summed `heldBytes` of the staged records.
        private(set) var bytes = 0

        var count: Int { records.count }

        subscript(digest: EntryDigest) -> Staged? {
            get { records[digest] }
            set {
                bytes -= records[digest]?.heldBytes ?? 0
                bytes += newValue?.heldBytes ?? 0
                records[digest] = newValue
            }
        }

        @discardableResult
        mutating func removeValue(forKey digest: EntryDigest) -> Staged? {
            let removed = records.removeValue(forKey: digest)
            bytes -= removed?.heldBytes ?? 0
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

    /// What was removed while a scan was pending: files a scan finds that match are deleted, not
    /// adopted, and lookups that read files directly treat them as misses.
    private struct Tombstones {
        var digests: Set<EntryDigest> = []
        /// Everything was removed.
        var all = false
        /// Records whose newest response is dated this or later were removed.
        var storedSince: Date?

        func covers(_ digest: EntryDigest) -> Bool {
            all || digests.contains(digest)
        }

        func covers(_ digest: EntryDigest, latestResponseDate: Date) -> Bool {
            covers(digest) || storedSince.map { latestResponseDate >= $0 } == true
        }
    }
}
