import Foundation

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
