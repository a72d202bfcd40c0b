import Foundation

/// The memory tier: records kept in an LRU ordering by byte cost (`CacheRecord.cost`).
///
/// Never holds more than `capacity` bytes: storing evicts least recently used records first,
/// and lowering the capacity evicts at once. A record costing more than
/// `capacity * maximumEntryFraction` is not kept, so one large response cannot flush the tier.
///
/// Threading: all state is in one `Locked`; a lookup takes the lock once, does one dictionary
/// lookup and returns the record without copying its bodies (`Data` is copy-on-write).
final class MemoryStore: Sendable {
    /// The tier's settings.
    struct Configuration: Sendable {
        /// The most bytes kept. Default: 0, which keeps nothing.
        var capacity: Int
        /// The largest share of `capacity` one record may cost; larger records are not kept.
        /// Default: 0.25, a quarter of the tier.
        var maximumEntryFraction: Double

        init(capacity: Int = 0, maximumEntryFraction: Double = 0.25) {
            self.capacity = capacity
            self.maximumEntryFraction = maximumEntryFraction
        }
    }

    private struct State {
        var records = LRUList<String, CacheRecord>()
        var capacity: Int
        var maximumEntryFraction: Double
        var hits = 0
        var misses = 0

        var maximumEntryCost: Int {
            entryCostLimit(capacity: capacity, fraction: maximumEntryFraction)
        }

        mutating func evictToCapacity() {
            while records.totalCost > capacity, records.popLeastRecent() != nil {}
        }
    }

    private let state: Locked<State>

    init(configuration: Configuration = Configuration()) {
        state = Locked(State(
            capacity: max(0, configuration.capacity),
            maximumEntryFraction: configuration.maximumEntryFraction
        ))
    }

    convenience init(capacity: Int, maximumEntryFraction: Double = 0.25) {
        self.init(configuration: Configuration(capacity: capacity, maximumEntryFraction: maximumEntryFraction))
    }

    func record(forKey key: String, countingLookup: Bool = true) -> CacheRecord? {
        state.withLock { state in
            guard countingLookup else { return state.records.peek(key) }
            if let record = state.records.touch(key) {
                state.hits += 1
                return record
            }
            state.misses += 1
            return nil
        }
    }

    func store(_ record: CacheRecord) {
        let cost = record.cost  // computed outside the lock: it walks the headers
        state.withLock { state in
            guard cost <= state.maximumEntryCost else {
                state.records.removeValue(forKey: record.key)
                return
            }
            state.records.set(record, forKey: record.key, cost: cost)
            state.evictToCapacity()
        }
    }

    func removeRecord(forKey key: String) {
        state.withLock { _ = $0.records.removeValue(forKey: key) }
    }

    func removeRecords(storedSince date: Date) {
        state.withLock { state in
            let doomed = state.records.filter { $0.value.latestResponseDate >= date }.map(\.key)
            for key in doomed { state.records.removeValue(forKey: key) }
        }
    }

    /// Removes every record `isDoomed` picks (called under the tier's lock: keep it cheap).
    func removeRecords(where isDoomed: (CacheRecord) -> Bool) {
        state.withLock { state in
            let doomed = state.records.filter { isDoomed($0.value) }.map(\.key)
            for key in doomed { state.records.removeValue(forKey: key) }
        }
    }

    func removeAll() {
        state.withLock { $0.records.removeAll() }
    }

    /// Every record held, least recently used first: for writing the tier to disk before memory
    /// is given back under pressure.
    func allRecords() -> [CacheRecord] {
        state.withLock { state in state.records.map(\.value) }
    }

    var capacity: Int {
        get { state.withLock { $0.capacity } }
        set {
            state.withLock { state in
                state.capacity = max(0, newValue)
                state.evictToCapacity()
            }
        }
    }

    /// The largest share of `capacity` one record may cost. Lowering it does not evict records
    /// already held; it applies to the next `store`.
    var maximumEntryFraction: Double {
        get { state.withLock { $0.maximumEntryFraction } }
        set { state.withLock { $0.maximumEntryFraction = newValue } }
    }

    var statistics: StoreStatistics {
        state.withLock { state in
            StoreStatistics(
                entryCount: state.records.count,
                byteCount: state.records.totalCost,
                capacity: state.capacity,
                hits: state.hits,
                misses: state.misses
            )
        }
    }
}

/// The largest cost one entry may have in a tier of `capacity` bytes: `capacity * fraction`,
/// clamped to `0...capacity` (a fraction outside `0...1` is clamped too).
func entryCostLimit(capacity: Int, fraction: Double) -> Int {
    guard fraction.isFinite else { return capacity }
    let clamped = min(1, max(0, fraction))
    return Int(Double(capacity) * clamped)
}
