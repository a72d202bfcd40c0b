import Foundation

extension DiskState {
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
