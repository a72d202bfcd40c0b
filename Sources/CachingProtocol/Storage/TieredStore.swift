import Foundation

/// The memory tier in front of the disk tier, as one store: what `CachingURLCache` shows as a
/// `URLCache` and what the engine looks records up in (`RecordStore`).
///
/// Reads try memory first, then disk; a record read from disk is put in memory. Writes go to
/// both tiers (disk writes settle on the disk tier's worker; lookups see them at once).
///
/// Threading: every member may be called from any thread, concurrently; each tier serialises
/// its own state. The read-modify-write of the variant updates is not atomic across callers: two
/// concurrent updates of one key can lose one of the two changes (a variant), never tear a record.
final class TieredStore: RecordStore {
    // The tiers. The rest of the library goes through the store's own members (lookups, writes,
    // capacities, statistics, pins, trimming, flushing); tests reach the tiers directly.
    let memory: MemoryStore
    let disk: DiskStore

    /// Disk records up to this size are read on the thread that asks (the session's queue, for
    /// the protocol): reading 64 KB costs less than the hop to another thread. Larger ones are
    /// `.deferred`, so a big file never holds up other requests.
    static let inlineDiskReadLimit = 64 << 10

    /// Most variants kept per URL when the origin sends `Vary`.
    static let maximumVariants = 8

    /// The share of the larger capacity one stored response may cost by default: Apple's
    /// URLCache stores nothing above about 5 % of its disk capacity.
    static let defaultMaximumEntryFraction = 0.05

    /// The largest stored response set by the app; nil follows the capacities.
    private let maximumEntrySizeSetting = Locked<Int?>(nil)
    /// The age limit (`maximumEntryAge`), read by every lookup, and when memory was last swept.
    private let ageLimit = Locked<(limit: TimeInterval?, lastSweep: Date?)>((nil, nil))

    /// Where memory warnings move memory to disk, one after the other, off the posting thread.
    private let memoryWarnings = DispatchQueue(label: "CachingProtocol.TieredStore.memoryWarnings", qos: .utility)
    /// The users whose answers were removed, and when (`removeVariants(ofUser:)`).
    private let forgotten = Locked(ForgottenUsers())

    init(memoryCapacity: Int, diskCapacity: Int, directory: URL) {
        memory = MemoryStore(capacity: max(0, memoryCapacity))
        disk = DiskStore(directory: directory, capacity: max(0, diskCapacity))
    }

    /// The most bytes one stored response (body, headers and URL) may cost; a larger one is not
    /// stored, replaces nothing and evicts nothing. Default: 5 % of the larger of the two
    /// capacities, following them when they change; setting it fixes it (negative: 0).
    var maximumEntrySize: Int {
        get {
            maximumEntrySizeSetting.withLock { $0 }
                ?? Int(Double(max(memory.capacity, disk.capacity)) * Self.defaultMaximumEntryFraction)
        }
        set { maximumEntrySizeSetting.withLock { $0 = max(0, newValue) } }
    }

    /// Responses stored longer ago than this (on `clock`) are never served and are removed,
    /// unless their key is pinned; nil: no limit. The disk tier sweeps them
    /// (`DiskStore.maximumEntryAge`); lookups drop them meanwhile, from memory too.
    var maximumEntryAge: TimeInterval? {
        get { ageLimit.withLock { $0.limit } }
        set {
            ageLimit.withLock { $0 = (newValue, nil) }
            disk.maximumEntryAge = newValue
            sweepMemoryIfDue()
        }
    }

    /// Removes from memory the records past the age limit (not pinned), when a tenth of the
    /// limit (between a minute and an hour, as on disk) passed since the last time: so that
    /// raising or lifting the limit never brings them back. Run by stores and `waitUntilSettled`.
    private func sweepMemoryIfDue() {
        guard ageLimit.withLock({ $0.limit }) != nil else { return }
        let now = clock()
        let limit = ageLimit.withLock { state -> TimeInterval? in
            guard let limit = state.limit else { return nil }
            if let last = state.lastSweep, now >= last, now.timeIntervalSince(last) < DiskLedger.expiryInterval(for: limit) {
                return nil
            }
            state.lastSweep = now
            return limit
        }
        guard let limit else { return }
        let cutoff = now.addingTimeInterval(-limit)
        let pins = disk.currentPins()
        memory.removeRecords { $0.latestResponseDate < cutoff && !pins.contains(EntryDigest(key: $0.key)) }
    }

    /// `record` without the variants stored longer ago than the age limit, or nil when none is
    /// left (then the record is removed). Pinned records are kept whole. Costs one lock when
    /// there is no limit.
    private func withinAgeLimit(_ record: CacheRecord) -> CacheRecord? {
        guard let limit = ageLimit.withLock({ $0.limit }) else { return record }
        let cutoff = clock().addingTimeInterval(-limit)
        guard record.variants.contains(where: { $0.responseDate < cutoff }), !disk.isPinned(record.key) else { return record }
        let kept = record.variants.filter { $0.responseDate >= cutoff }
        guard kept.isEmpty else { return CacheRecord(key: record.key, variants: kept) }
        removeRecord(forKey: record.key)
        return nil
    }

    // MARK: Capacities, statistics, settings

    /// The most bytes kept in memory; lowering it evicts at once.
    var memoryCapacity: Int {
        get { memory.capacity }
        set { memory.capacity = max(0, newValue) }
    }

    /// The most bytes the disk tier's files take once writes settle; lowering it evicts on the
    /// disk worker (`waitUntilSettled` waits for it).
    var diskCapacity: Int {
        get { disk.capacity }
        set { disk.capacity = max(0, newValue) }
    }

    /// What each tier holds and how often it answered.
    var statistics: (memory: StoreStatistics, disk: StoreStatistics) {
        (memory.statistics, disk.statistics)
    }

    /// What went wrong on disk, and how its index was obtained.
    var diskDiagnostics: DiskLedger.Diagnostics {
        disk.diagnostics
    }

    /// Evicts least recently used disk entries until the disk tier holds at most `bytes`, without
    /// changing its capacity; settles on the disk worker.
    func trimDisk(toBytes bytes: Int) {
        disk.trim(toBytes: bytes)
    }

    /// The Data Protection class of the disk tier's files and directories (`DiskStore.fileProtection`).
    var fileProtection: CachingFileProtection {
        get { disk.fileProtection }
        set { disk.fileProtection = newValue }
    }

    // MARK: Pins

    /// Pins `keys` on disk: kept from eviction and the age limit, in the directory's pins file
    /// (`DiskStore.pin`). Throws `pinnedBeyondCapacity` when they would leave less than `room`
    /// bytes of the disk capacity for the rest.
    func pin(_ keys: [String], leavingRoom room: Int) throws {
        try disk.pin(keys, leavingRoom: room)
    }

    /// Unpins `keys`.
    func unpin(_ keys: [String]) throws {
        try disk.unpin(keys)
    }

    /// The pinned keys now, read again when another process changed the pins file.
    func currentPins() -> Pins {
        disk.currentPins()
    }

    /// The clock for the disk tier's last-access times (the LRU order).
    var clock: @Sendable () -> Date {
        get { disk.clock }
        set { disk.clock = newValue }
    }

    // MARK: RecordStore

    func lookup(_ key: String) -> RecordLookup {
        if let record = memory.record(forKey: key, countingLookup: true) { return .answered(withinAgeLimit(record)) }
        switch disk.lookup(forKey: key, readingUpTo: Self.inlineDiskReadLimit) {
        case .found(let record):
            guard let record = withinAgeLimit(record) else { return .answered(nil) }
            memory.store(record)
            return .answered(record)
        case .missing:
            return .answered(nil)
        case .deferred:
            return .deferred
        }
    }

    func finishLookup(_ key: String) -> CacheRecord? {
        record(forKey: key, counting: true, memoryAlreadyCounted: true)
    }

    func record(forKey key: String) -> CacheRecord? {
        record(forKey: key, counting: true, memoryAlreadyCounted: false)
    }

    func peek(_ key: String) -> CacheRecord? {
        record(forKey: key, counting: false, memoryAlreadyCounted: false)
    }

    func removeVariant(forKey key: String, matching matches: (CacheEntry) -> Bool) {
        guard let stored = record(forKey: key, counting: false, memoryAlreadyCounted: false),
              let variant = stored.variants.first(where: matches) else { return }
        let remaining = stored.variants.filter { $0 != variant }
        if remaining.isEmpty {
            removeRecord(forKey: key)
        } else {
            store(CacheRecord(key: key, variants: remaining))
        }
    }

    func mayContainRecord(forKey key: String) -> Bool {
        memory.record(forKey: key, countingLookup: false) != nil || disk.mayContainRecord(forKey: key)
    }

    func storesWithoutWaiting(forKey key: String) -> Bool {
        guard !disk.isBacklogged else { return false }
        return memory.record(forKey: key, countingLookup: false) != nil || !disk.mayContainRecord(forKey: key)
    }

    func removeRecord(forKey key: String) {
        memory.removeRecord(forKey: key)
        disk.removeRecord(forKey: key)
    }

    // MARK: Reading and writing

    /// The record in memory, else on disk (then also put into memory).
    ///
    /// - Parameter counting: whether the lookup counts in the tiers' statistics (false for a
    ///   read-modify-write, so statistics count what callers asked for).
    /// - Parameter memoryAlreadyCounted: the caller already counted a memory miss; memory is
    ///   looked at again (the record may have arrived since) without counting a second one.
    private func record(forKey key: String, counting: Bool, memoryAlreadyCounted: Bool) -> CacheRecord? {
        if let record = memory.record(forKey: key, countingLookup: counting && !memoryAlreadyCounted) {
            return withinAgeLimit(record)
        }
        guard let record = disk.record(forKey: key, countingLookup: counting).flatMap(withinAgeLimit) else { return nil }
        memory.store(record)
        return record
    }

    /// Stores `record` in memory, and its variants that are not memory-only
    /// (`CacheEntry.isMemoryOnly`) on disk: when it has none, the key leaves the disk. Waits for
    /// the disk tier when it is behind, unless not `waitsIfBehind` (`DiskStore.store`).
    func store(_ record: CacheRecord, waitsIfBehind: Bool = true) {
        memory.store(record)
        guard let forDisk = Self.writable(record) else { return disk.removeRecord(forKey: record.key) }
        disk.store(forDisk, bodyFile: nil, waitsIfBehind: waitsIfBehind)
    }

    /// `record` as a file may hold it: without its memory-only variants, nil when none is left.
    private static func writable(_ record: CacheRecord) -> CacheRecord? {
        guard record.variants.contains(where: \.isMemoryOnly) else { return record }
        let kept = record.variants.filter { !$0.isMemoryOnly }
        return kept.isEmpty ? nil : CacheRecord(key: record.key, variants: kept)
    }

    /// Puts `entry` first among the variants stored under `key`, replacing the variant it is the
    /// same as and dropping the oldest beyond `maximumVariants`. With `memoryOnly`, or when the
    /// entry is memory-only already (a copy of one, freshened by a `304`), it is marked so and
    /// never reaches a file; the record's other variants still do. An entry costing more than
    /// `maximumEntrySize` is not stored. With `bodyFile`, the entry's body is in that streamed
    /// file (and in `entry` too, or not at all): the disk tier makes it the entry's file, and the
    /// memory tier keeps the record only when `entry` holds the body.
    ///
    /// An answer for a user whose answers were removed (`removeVariants(ofUser:)`) to a request
    /// sent before the removal — one that was on its way meanwhile — is not stored.
    func storeVariant(_ entry: CacheEntry, key: String, memoryOnly: Bool, bodyFile: StreamedEntryFile?, waitsIfBehind: Bool) {
        let bodyOnlyInFile = bodyFile.map { entry.body.count != $0.appendedBytes } ?? false
        let cost = entry.cost + (bodyOnlyInFile ? bodyFile?.appendedBytes ?? 0 : 0)
        guard cost <= maximumEntrySize, !(bodyOnlyInFile && (memoryOnly || entry.isMemoryOnly)),
              !forgotten.withLock({ $0.refuses(entry) }) else {
            bodyFile?.discard()
            return
        }
        sweepMemoryIfDue()
        var entry = entry
        if memoryOnly { entry.isMemoryOnly = true }
        var variants = record(forKey: key, counting: false, memoryAlreadyCounted: false)?.variants ?? []
        variants.removeAll { $0.isSameVariant(as: entry) }
        variants.insert(entry, at: 0)
        if variants.count > Self.maximumVariants {
            variants.removeLast(variants.count - Self.maximumVariants)
        }
        let record = CacheRecord(key: key, variants: variants)
        guard let bodyFile, !entry.isMemoryOnly, let forDisk = Self.writable(record) else {
            bodyFile?.discard()
            return store(record, waitsIfBehind: waitsIfBehind)
        }
        if bodyOnlyInFile {
            memory.removeRecord(forKey: key)
        } else {
            memory.store(record)
        }
        disk.store(forDisk, bodyFile: bodyFile, waitsIfBehind: waitsIfBehind)
    }

    /// Bodies up to this size are collected in memory and written after the response (staged);
    /// larger ones, and those of unknown size, go to a file as they arrive.
    static let largestCollectedBody = 512 << 10

    func writesAsItArrives(bodyOfLength length: Int?) -> Bool {
        if let length, length <= Self.largestCollectedBody || length > maximumEntrySize { return false }
        return disk.capacity > 0
    }

    func streamedEntryFile(forKey key: String) -> StreamedEntryFile? {
        disk.streamedEntryFile(forKey: key)
    }

    /// Removes from both tiers every variant stored for the user `user` (`Partition.user`), or
    /// for any user when nil — never one stored for nobody in particular — and returns once no
    /// file of the directory holds one (`waitUntilRemoved`). A record whose variants are all
    /// going is removed without reading its file: the disk index's summaries name each
    /// variant's user; a record with others is read and written again without them. Memory is
    /// looked through too (it alone holds the variants kept in memory only). Answers for those
    /// users to requests sent until now, which arrive later, are not stored (`storeVariant`).
    func removeVariants(ofUser user: UInt64?) {
        forgotten.withLock { $0.forget(user, at: clock()) }
        func isDoomed(_ variantUser: UInt64?) -> Bool {
            guard let variantUser else { return false }
            return user.map { $0 == variantUser } ?? true
        }
        var whollyDoomed = Set<String>()
        var partlyDoomed = Set<String>()
        for listed in disk.listing() {
            guard let variants = listed.summary.variants, variants.contains(where: { isDoomed($0.user) }) else { continue }
            if variants.allSatisfy({ isDoomed($0.user) }) {
                whollyDoomed.insert(listed.summary.key)
            } else {
                partlyDoomed.insert(listed.summary.key)
            }
        }
        for record in memory.allRecords() where record.variants.contains(where: { isDoomed($0.partition.user) }) {
            partlyDoomed.insert(record.key)
        }
        for key in whollyDoomed.subtracting(partlyDoomed) {
            removeRecord(forKey: key)
        }
        for key in partlyDoomed {
            guard let record = record(forKey: key, counting: false, memoryAlreadyCounted: false) else { continue }
            let kept = record.variants.filter { !isDoomed($0.partition.user) }
            if kept.isEmpty {
                removeRecord(forKey: key)
            } else if kept.count < record.variants.count {
                store(CacheRecord(key: key, variants: kept))
            }
        }
        waitUntilRemoved()
    }

    /// Removes every record whose newest variant was stored at or after `date`, from both tiers.
    func removeRecords(storedSince date: Date) {
        memory.removeRecords(storedSince: date)
        disk.removeRecords(storedSince: date)
    }

    /// Removes every record from both tiers.
    func removeAll() {
        memory.removeAll()
        disk.removeAll()
    }

    /// Hands every record in memory that the disk tier lacks to the disk tier, without its
    /// memory-only variants (`CacheEntry.isMemoryOnly`: those are dropped, never written), then
    /// empties memory.
    func flushMemoryToDisk() {
        for record in memory.allRecords() where !disk.containsRecord(forKey: record.key) {
            guard let record = withinAgeLimit(record), let forDisk = Self.writable(record) else { continue }
            disk.store(forDisk)
        }
        memory.removeAll()
    }

    /// `flushMemoryToDisk()` on a queue of its own, returning at once: what a memory warning
    /// does, so the thread that posts it (the main thread, on UIKit) never waits for the disk
    /// tier (whose back-pressure makes a large move wait for its writes). Memory is emptied when
    /// the move ends; warnings that arrive meanwhile run after it, in order.
    func flushMemoryToDiskInBackground() {
        memoryWarnings.async { [self] in flushMemoryToDisk() }
    }

    /// `waitUntilSettled()` after an app's removal: the disk index is rewritten too (a fresh
    /// snapshot, an empty journal), so no file of the directory holds a removed key any more
    /// (the index's summaries keep keys; its journal would keep them until compacted).
    func waitUntilRemoved() {
        disk.persistIndex()
        waitUntilSettled()
    }

    /// Blocks until every disk write handed in so far has settled, a memory warning's move to
    /// disk included.
    func waitUntilSettled() {
        sweepMemoryIfDue()
        memoryWarnings.sync {}
        disk.flush()
    }

    /// Every stored record, summarised: the disk tier's listing (`DiskStore.listing()`) and the
    /// records only memory holds (kept in memory only, or refused by the disk tier).
    func listing() -> [DiskStore.Listed] {
        var listed = disk.listing()
        let onDisk = Set(listed.map(\.summary.key))
        for record in memory.allRecords() where !onDisk.contains(record.key) {
            listed.append(DiskStore.Listed(summary: EntrySummary(record), fileBytes: record.cost))
        }
        return listed
    }

    /// Every stored key with the bytes it takes: its entry file's size, or for a record only in
    /// memory its memory cost. Reads each entry file's header (see `DiskStore.storedKeys()`).
    func storedKeys() -> [String: Int] {
        var sizes: [String: Int] = [:]
        for record in memory.allRecords() { sizes[record.key] = record.cost }
        for (key, bytes) in disk.storedKeys() { sizes[key] = bytes }
        return sizes
    }
}

/// The users whose answers were removed, each with when (on the store's clock), so that an answer
/// for one of them to a request sent before that — a load that was on its way — is not stored
/// after the removal. Bounded: the oldest removals are let go beyond `capacity` users.
private struct ForgottenUsers {
    static let capacity = 64
    /// When every user's answers were last removed.
    private var allUsers: Date?
    private var users: [UInt64: Date] = [:]

    mutating func forget(_ user: UInt64?, at now: Date) {
        guard let user else { return allUsers = now }
        users[user] = now
        if users.count > Self.capacity, let oldest = users.min(by: { $0.value < $1.value }) {
            users[oldest.key] = nil
        }
    }

    /// Whether `entry` answers a request sent by the time its user's answers were removed.
    func refuses(_ entry: CacheEntry) -> Bool {
        guard let user = entry.partition.user, allUsers != nil || !users.isEmpty else { return false }
        let removed = [allUsers, users[user]].compactMap { $0 }.max()
        return removed.map { entry.requestDate <= $0 } ?? false
    }
}
