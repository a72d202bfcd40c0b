import Foundation

/// What the disk tier knows of its files and of the records about to become files: the index,
/// the staged writes, the access times not journaled yet, what was removed while a scan of the
/// directory may still find it, and what could not be read. This is the only place they change:
/// `DiskStore` (lookups and the app's calls, on any thread) and `DiskWorker` (on its queue) call
/// the operations below, each named by what happened, and each keeps the parts consistent.
///
/// A value type with no I/O and no lock: the store keeps it inside its one `Locked`
/// (`DiskStore.Shared`), so an operation and the caller's bookkeeping around it are one step;
/// tests drive it without a disk.
///
/// What it keeps true:
/// - a digest is in the access times to journal only while the index lists it;
/// - tombstones exist only while a scan is queued, running or owed (`scanPending`): once none
///   is, the index lists every file the store may serve, so a removal goes through it alone;
/// - a staged record has at most one write queued, and a write that finishes after a newer
///   `stage` or a removal neither unstages the newer record nor brings the removed one back;
/// - a file the index does not list is read directly only while the index is incomplete or the
///   file could not be read by the last scan, and never once it was removed.
struct DiskState {
    /// The entry files on disk, least recently used first.
    private(set) var index = DiskIndex()
    private(set) var indexCondition = IndexCondition.ready
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
    /// Digests with a `.write` operation queued and not yet started.
    private var scheduledWrites: Set<EntryDigest> = []
    /// Numbers the stores, so a write knows whether a newer one came after it.
    private var sequence: UInt64 = 0
    /// Entries read since their access time was last journaled.
    private var touched: Set<EntryDigest> = []
    /// A delayed journal append of access times is queued.
    private var accessTimeWriteScheduled = false
    /// The pinned keys, as the pins file said when last read or written (`DiskWorker+Pins`).
    var pins = Pins()

    init() {}

    // MARK: - What it holds

    var stagedCount: Int { staged.count }
    /// The records handed to `store` and not written yet.
    var stagedRecords: [CacheRecord] { staged.map(\.value.record) }
    /// The summed cost of the staged records.
    var stagedBytes: Int { staged.bytes }
    var isIndexReady: Bool { indexCondition == .ready }
    /// Whether the journal and snapshot may be written: not while the index on disk could not
    /// be read (writing them would replace what it holds with what this store knows).
    var persistsIndex: Bool { indexCondition != .unreadable }
    /// Whether a scan may still find files the index does not list, so removals leave tombstones.
    var scanPending: Bool { scansInFlight > 0 || owedWork != nil }

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

    // MARK: - Lookups

    /// Decides how a lookup of `key` is answered and, when `counting`, marks what it finds as
    /// used at `now()` (read only then). `sizeLimit`: the most bytes the caller reads here. The
    /// second value says whether the caller must schedule the journal append of access times.
    mutating func planRead(_ key: String, counting: Bool, sizeLimit: Int?, now: () -> Date) -> (ReadPlan, scheduleAccessTimes: Bool) {
        let digest = EntryDigest(key: key)
        if let record = staged[digest]?.record, record.key == key {
            if counting { staged[digest]?.lastAccess = now() }
            return (.staged(record), false)
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

    /// A listing read the file of `digest` (its index entry of write `generation` had no complete
    /// summary): the entry keeps `summary` unless a newer write replaced the file. Returns
    /// whether it did (the index then needs a snapshot to keep it).
    mutating func describe(_ digest: EntryDigest, _ summary: EntrySummary, generation: UInt64) -> Bool {
        index.describe(digest, summary, ifGeneration: generation)
    }

    /// The delayed journal append of access times has run (or is about to).
    mutating func accessTimeWriteStarted() {
        accessTimeWriteScheduled = false
    }

    /// A lookup found the file of `digest` missing (another process evicted it, or the directory
    /// was deleted). Returns whether its discard must be queued: only for the index entry of
    /// write `generation` (a newer write replaced the file otherwise).
    mutating func fileVanished(_ digest: EntryDigest, generation: UInt64?) -> Bool {
        unreadableFiles.remove(digest)
        guard let generation, index.remove(digest, ifGeneration: generation) else { return false }
        touched.remove(digest)
        return true
    }

    /// A lookup found the file of `digest` damaged. Returns whether its discard must be queued.
    /// `generation`: the index entry the lookup read, or nil for a file it read directly.
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
        return true
    }

    // MARK: - Writing

    /// Stages `record` (lookups see it at once). Returns whether a write must be queued: not when
    /// one is queued for the digest already and has not started (this record replaces that one's).
    mutating func stage(_ record: CacheRecord, cost: Int, at now: Date) -> Bool {
        let digest = EntryDigest(key: record.key)
        sequence += 1
        staged[digest] = Staged(record: record, sequence: sequence, lastAccess: now, cost: cost)
        return scheduledWrites.insert(digest).inserted
    }

    /// The worker starts writing `digest`: the staged record and its sequence, or nil when it was
    /// removed meanwhile. A `stage` from now on queues another write.
    mutating func beginWrite(_ digest: EntryDigest) -> (record: CacheRecord, sequence: UInt64)? {
        scheduledWrites.remove(digest)
        return staged[digest].map { ($0.record, $0.sequence) }
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

    /// The app removed `digests`: they are unstaged, dropped from the index, and remembered as
    /// removed while a scan is pending. Returns the digests whose files must be deleted (none
    /// for a key with no staged write, no index entry and no file a scan may still find, so an
    /// unknown key costs no disk work).
    mutating func forget(_ digests: [EntryDigest]) -> [EntryDigest] {
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
    }

    /// Of `digests`, whose discard was queued, the files to delete: not those written again since.
    func filesToDiscard(_ digests: [EntryDigest]) -> [EntryDigest] {
        digests.filter { !index.contains($0) }
    }

    /// Evicts least recently used entries until they and `metadataBytes` (snapshot, journal and
    /// journal records not appended yet, each eviction adding `removalRecordSize`) fit in `limit`:
    /// unpinned entries first; pinned ones only when they alone do not fit (they grew, or the
    /// capacity was lowered). Returns the evicted digests, whose files the caller deletes.
    mutating func evict(toFit limit: Int, metadataBytes: Int, removalRecordSize: Int) -> [EntryDigest] {
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

    /// The bytes `digests` take on disk: each one's file, or the cost of its record not written yet.
    func bytes(of digests: Set<EntryDigest>) -> Int {
        digests.reduce(0) { total, digest in total + (staged[digest]?.cost ?? index.entry(for: digest)?.fileSize ?? 0) }
    }

    /// The cache directory was deleted while the store ran: it holds no file any more.
    mutating func vanish() {
        index.removeAll()
        touched.removeAll()
        unreadableFiles.removeAll()
    }

    // MARK: - The journal

    /// The access times of hits not journaled yet, oldest first; they count as journaled from now.
    mutating func takeAccessTimes() -> [DiskIndex.JournalRecord] {
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

    /// The whole index as a snapshot; the access times it holds count as journaled.
    mutating func takeSnapshot() -> Data {
        touched.removeAll()
        return index.snapshotData()
    }
}

// MARK: - Opening and scanning

extension DiskState {
    /// The store opens: its first operation (`open`) loads the index, then scans.
    mutating func beginOpening() {
        indexCondition = .loading
        scansInFlight += 1
    }

    /// A `reconcile` operation is queued: until it ends, removals leave tombstones.
    mutating func scanQueued() {
        scansInFlight += 1
    }

    /// The snapshot and journal were read: `loaded` takes the place of the index, without what
    /// was removed since the store opened and behind what was written since (which is newer).
    /// The scan that follows is still pending.
    mutating func install(_ loaded: DiskIndex) {
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
        indexCondition = .ready
        if owedWork == .loadIndex { owedWork = nil }
    }

    /// There is no usable snapshot: the scan that follows rebuilds the index from the files.
    mutating func indexMissing() {
        indexCondition = .rebuilding
        if owedWork == .loadIndex { owedWork = nil }
    }

    /// The snapshot or journal exists but could not be read: nothing is rebuilt, and a later
    /// lookup tries again (`takeOwedWork`). Ends the `open` operation.
    mutating func indexUnreadable() {
        indexCondition = .unreadable
        endScan(owing: .loadIndex)
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

    /// A scan read the headers of files the index did not list: each becomes least recently used
    /// (pass them newest first), unless it was removed since the store opened or listed since.
    /// Returns the journal records of the adopted entries, and the removed files to delete.
    mutating func adopt(_ found: [(digest: EntryDigest, entry: DiskIndex.Entry)]) -> (records: [DiskIndex.JournalRecord], removed: [EntryDigest]) {
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
        indexCondition = .ready
        endScan(owing: unreadableFiles.isEmpty ? nil : .scan)
    }

    /// A scan could not list `entries/` for a reason that may pass (permissions): nothing
    /// changes, and a later lookup tries again.
    mutating func scanUnavailable() {
        endScan(owing: .scan)
    }

    /// A scan did not run because the index could not be read: adopting files now would rebuild
    /// it. Loading it, when a later lookup tries again, scans too.
    mutating func scanPostponed() {
        endScan(owing: owedWork ?? .loadIndex)
    }

    /// A scan found the directory gone: the index is what it is (the next write recreates the
    /// directory).
    mutating func scanAbandoned() {
        indexCondition = .ready
        endScan(owing: nil)
    }

    private mutating func endScan(owing work: OwedWork?) {
        scansInFlight = max(0, scansInFlight - 1)
        owedWork = work
        owedWorkQueued = false
        // Once no scan is pending the index lists every file, so removals go through it alone.
        if !scanPending { tombstones = Tombstones() }
    }

    /// The operation that tries again what files that could not be read held up — loading the
    /// index, or a scan — when there is one, it is not queued already, and `interval` has passed
    /// since the last try. Counts it as a queued scan.
    mutating func takeOwedWork(now: () -> Date, interval: TimeInterval) -> DiskStore.Operation? {
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
