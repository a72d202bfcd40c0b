import Foundation

extension DiskState {
    /// How complete the index is.
    enum IndexCondition: Sendable, Equatable {
        /// The store's first operation has not loaded it yet. Lookups read entry files directly.
        case loading
        /// There was no usable snapshot: the scan rebuilds the index from the files' headers.
        /// Lookups read entry files directly meanwhile.
        case rebuilding
        /// The snapshot or journal could not be read (permissions; Data Protection while the
        /// device is locked). Nothing is rebuilt and neither is overwritten; the index holds only
        /// what this store wrote since, lookups read other entry files directly, and a later
        /// lookup tries to load it again.
        case unreadable
        /// Loaded or rebuilt: it lists every file the store knows of.
        case ready
    }

    /// A scan that could not be completed because files could not be read, to be tried again.
    enum OwedWork {
        /// Load the index (the `open` operation), then scan.
        case loadIndex
        /// List the directory and read the headers of the files the index lacks.
        case scan
    }

    /// One staged record.
    struct Staged {
        var record: CacheRecord
        var sequence: UInt64
        var lastAccess: Date
        /// `record.cost`, counted in `StagedWrites.bytes`.
        var cost: Int
    }

    /// What a lookup should do, decided under the lock.
    enum ReadPlan: Equatable {
        /// The record is staged: no file to read.
        case staged(CacheRecord)
        /// Read the file the index lists, written by write `generation`.
        case indexed(generation: UInt64)
        /// Read the file directly: the index does not list it but may be incomplete.
        case unindexed
        /// The file is larger than the caller wants to read here, or its size is unknown.
        case deferred
        /// Nothing is stored.
        case miss
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

    /// What was removed while a scan was pending: files a scan finds that match are deleted, not
    /// adopted, and lookups that read files directly treat them as misses.
    struct Tombstones {
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
