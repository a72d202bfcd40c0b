import Foundation

// Placeholder tiers so the protocol can be built and tested while the storage engine is being
// written on its own branch; replaced by the real MemoryStore and DiskStore when it lands.

final class MemoryStore: RecordStore {
    private let records = Locked<[String: CacheRecord]>([:])
    private let capacityValue: Locked<Int>
    init(capacity: Int) { capacityValue = Locked(capacity) }
    func record(forKey key: String) -> CacheRecord? { records.withLock { $0[key] } }
    func store(_ record: CacheRecord) { records.withLock { $0[record.key] = record } }
    func removeRecord(forKey key: String) { records.withLock { $0[key] = nil } }
    func removeRecords(storedSince date: Date) { records.withLock { $0 = $0.filter { $0.value.latestResponseDate < date } } }
    func removeAll() { records.withLock { $0 = [:] } }
    var capacity: Int { get { capacityValue.withLock { $0 } } set { capacityValue.withLock { $0 = newValue } } }
    var statistics: StoreStatistics { StoreStatistics(entryCount: records.withLock { $0.count }) }
    func allRecords() -> [CacheRecord] { records.withLock { Array($0.values) } }
}

final class DiskStore: RecordStore {
    private let memory: MemoryStore
    init(directory: URL, capacity: Int) { memory = MemoryStore(capacity: capacity) }
    func record(forKey key: String) -> CacheRecord? { memory.record(forKey: key) }
    func store(_ record: CacheRecord) { memory.store(record) }
    func removeRecord(forKey key: String) { memory.removeRecord(forKey: key) }
    func removeRecords(storedSince date: Date) { memory.removeRecords(storedSince: date) }
    func removeAll() { memory.removeAll() }
    var capacity: Int { get { memory.capacity } set { memory.capacity = newValue } }
    var statistics: StoreStatistics { memory.statistics }
    func flush() {}
    func trim(toBytes bytes: Int) {}
}
