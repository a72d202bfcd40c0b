import Foundation

/// One tier of the store: a place that keeps cache records by key. `MemoryStore` and
/// `DiskStore` implement it; `TieredStore` composes them.
///
/// Threading: every member may be called from any thread at any time, concurrently; each store
/// serialises its own state. A lookup returns either a whole record that a `store` call handed in
/// or nil, never a torn one. Calls never throw: a store that cannot do its job (a full or
/// read-only disk, a corrupt file) degrades to answering nil and reports why in `statistics`.
protocol StoreTier: AnyObject, Sendable {
    /// The record stored under `key`, or nil. When `countingLookup`, counts a hit or a miss in
    /// `statistics` and marks the record recently used; the cache's own read-modify-write passes
    /// false, so statistics count what callers asked for.
    func record(forKey key: String, countingLookup: Bool) -> CacheRecord?
    /// Stores `record` under `record.key`, replacing what was there. A record whose cost exceeds
    /// what the store accepts for one entry is not stored (and what was there is removed).
    func store(_ record: CacheRecord)
    func removeRecord(forKey key: String)
    /// Removes every record whose `latestResponseDate` is at or after `date`.
    func removeRecords(storedSince date: Date)
    func removeAll()
    /// The most bytes the store keeps; setting a smaller value evicts at once.
    var capacity: Int { get set }
    var statistics: StoreStatistics { get }
}

extension StoreTier {
    /// The record stored under `key`, or nil, counted as a lookup.
    func record(forKey key: String) -> CacheRecord? {
        record(forKey: key, countingLookup: true)
    }
}

/// What a store holds and how often it answered.
public struct StoreStatistics: Sendable, Equatable {
    /// Records held.
    public var entryCount: Int
    /// Bytes charged against the capacity (for the disk tier: the real size of its files).
    public var byteCount: Int
    /// The capacity in bytes.
    public var capacity: Int
    /// Lookups that found a record.
    public var hits: Int
    /// Lookups that found none.
    public var misses: Int

    /// Statistics with the given values (all zero by default).
    public init(entryCount: Int = 0, byteCount: Int = 0, capacity: Int = 0, hits: Int = 0, misses: Int = 0) {
        self.entryCount = entryCount
        self.byteCount = byteCount
        self.capacity = capacity
        self.hits = hits
        self.misses = misses
    }
}
