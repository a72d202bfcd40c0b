import Foundation

/// What the engine needs from storage, and all it sees of it.
///
/// `TieredStore` (memory in front of disk) is the one implementation; tests may provide others.
///
/// Threading: every member may be called from any thread, concurrently. `lookup` is meant for
/// the thread that asks (a `URLProtocol`'s `startLoading`): it never reads more than a small
/// file there. Calls never throw; a store that cannot do its job answers nil (a miss).
protocol RecordStore: AnyObject, Sendable {
    /// A counted lookup that stays cheap on the calling thread: the record from memory, or from
    /// a small disk file read right here, or word that nothing is stored; `.deferred` when the
    /// record sits in a larger file, which `finishLookup(_:)` then reads elsewhere.
    func lookup(_ key: String) -> RecordLookup
    /// Completes a lookup that answered `.deferred`: reads the record wherever it is, counting
    /// the disk lookup (the memory one was counted already).
    func finishLookup(_ key: String) -> CacheRecord?
    /// A counted lookup that reads whatever it takes, on the calling thread.
    func record(forKey key: String) -> CacheRecord?
    /// The record, read like `record(forKey:)` but not counted and not marked used: a look
    /// before deciding whether to take a request at all.
    func peek(_ key: String) -> CacheRecord?
    /// The most bytes one stored response may cost (`CacheEntry.cost`); `storeVariant` stores
    /// nothing larger.
    var maximumEntrySize: Int { get }
    /// Puts `entry` first among the variants stored under `key`, replacing the variant it is the
    /// same as (`CacheEntry.isSameVariant(as:)`); in memory only (and off the disk) when
    /// `memoryOnly`. An entry costing more than `maximumEntrySize` is not stored. With
    /// `bodyFile` (from `streamedEntryFile(forKey:)`), the entry's body is in that
    /// file, whole — `entry` holds it too, or holds none — and the file becomes the entry's file;
    /// a file that is not stored is discarded. When the disk tier is behind, it waits for it
    /// (back-pressure), unless not `waitsIfBehind`: then the record is staged past the bound.
    func storeVariant(_ entry: CacheEntry, key: String, memoryOnly: Bool, bodyFile: StreamedEntryFile?, waitsIfBehind: Bool)
    /// Whether a body of `bodyOfLength` bytes (nil: not known) that may be stored goes to a file
    /// as it arrives (`streamedEntryFile(forKey:)`) rather than being collected in memory and
    /// stored with `storeVariant` once whole: it is larger than what memory collects, and
    /// there is a disk tier to write it to.
    func writesAsItArrives(bodyOfLength length: Int?) -> Bool
    /// A new file to write the body of a response for `key` into as it arrives; nil when the
    /// store makes none.
    func streamedEntryFile(forKey key: String) -> StreamedEntryFile?
    /// Removes the variant stored under `key` that `matches` picks (the first, newest first);
    /// the record goes when it was the last one.
    func removeVariant(forKey key: String, matching matches: (CacheEntry) -> Bool)
    /// Removes everything stored under `key`.
    func removeRecord(forKey key: String)
    /// Whether something may be stored under `key`, without reading a file or counting a
    /// lookup: true when it is, and while the disk index is still loading (it may be).
    func mayContainRecord(forKey key: String) -> Bool
    /// Whether `storeVariant` for `key` would go on without waiting: it reads no file (what is
    /// stored under `key` is in memory, or the disk holds nothing for it) and the disk tier is
    /// not behind (the back-pressure of `DiskStore.store`). Reads no file itself.
    func storesWithoutWaiting(forKey key: String) -> Bool
}

extension RecordStore {
    /// `storeVariant(_:key:memoryOnly:bodyFile:waitsIfBehind:)` of an entry that holds its body,
    /// waiting for the disk tier when it is behind.
    func storeVariant(_ entry: CacheEntry, key: String, memoryOnly: Bool) {
        storeVariant(entry, key: key, memoryOnly: memoryOnly, bodyFile: nil, waitsIfBehind: true)
    }
}

/// What `RecordStore.lookup(_:)` found on the calling thread.
enum RecordLookup {
    /// The record (from memory, or a small disk file), or nil when nothing is stored.
    case answered(CacheRecord?)
    /// Stored in a file too large to read on the calling thread: call `finishLookup(_:)` elsewhere.
    case deferred
}
