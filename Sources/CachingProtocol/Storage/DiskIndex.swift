import Foundation

/// What the disk tier knows about its entry files, in least-recently-used order: a value type
/// with no I/O, kept by `DiskStore` inside its lock.
///
/// It is persisted as a binary snapshot (`index`) plus an append-only journal (`journal`) of the
/// changes since; opening a cache reads the two and never lists or reads entry files. Both formats
/// are defined here so they can be tested without a disk.
package struct DiskIndex: Sendable {
    /// One entry file as the index knows it.
    package struct Entry: Sendable, Equatable {
        /// The real size of the file in bytes, charged against the capacity.
        package var fileSize: Int
        /// `CacheRecord.latestResponseDate` of the stored record, for `removeRecords(storedSince:)`.
        var latestResponseDate: Date
        /// The last time the record was stored or read: the LRU order.
        var lastAccess: Date
        /// Which write produced the file (in memory only, not persisted): lets a reader that
        /// found a file missing or corrupt drop the index entry only if no newer write replaced it.
        var generation: UInt64 = 0
        /// What the file holds, for listings and usage without reading it; nil when not known
        /// (an index from before summaries), then the file's header or the file is read.
        package var summary: EntrySummary?

        package init(fileSize: Int, latestResponseDate: Date, lastAccess: Date, generation: UInt64 = 0,
                     summary: EntrySummary? = nil) {
            self.fileSize = fileSize
            self.latestResponseDate = latestResponseDate
            self.lastAccess = lastAccess
            self.generation = generation
            self.summary = summary
        }

        /// The summary as the snapshot and journal keep it: not one too large to read back.
        var storableSummary: EntrySummary? {
            summary.flatMap { $0.encodedSize <= DiskIndex.maximumSummarySize ? $0 : nil }
        }

        package static func == (lhs: Entry, rhs: Entry) -> Bool {
            lhs.fileSize == rhs.fileSize && lhs.latestResponseDate == rhs.latestResponseDate
                && lhs.lastAccess == rhs.lastAccess && lhs.summary == rhs.summary
        }
    }

    package private(set) var entries = LRUList<EntryDigest, Entry>()
    private var lastGeneration: UInt64 = 0

    package init() {}

    package var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    /// The sum of the entry files' sizes.
    package var byteCount: Int { entries.totalCost }

    package func entry(for digest: EntryDigest) -> Entry? {
        entries.peek(digest)
    }

    func contains(_ digest: EntryDigest) -> Bool {
        entries.contains(digest)
    }

    /// Records a file just written for `digest`; it becomes the most recently used. Returns the
    /// generation given to it.
    @discardableResult
    package mutating func put(_ digest: EntryDigest, _ entry: Entry) -> UInt64 {
        lastGeneration &+= 1
        var entry = entry
        entry.generation = lastGeneration
        entries.set(entry, forKey: digest, cost: entry.fileSize)
        return lastGeneration
    }

    /// Records a file found on disk that the index did not list; it becomes the least recently
    /// used, with a last access no later than that of any entry already known.
    mutating func adopt(_ digest: EntryDigest, _ entry: Entry) {
        lastGeneration &+= 1
        var entry = entry
        entry.generation = lastGeneration
        if let oldest = entries.leastRecent?.value.lastAccess, oldest < entry.lastAccess {
            entry.lastAccess = oldest
        }
        entries.setLeastRecent(entry, forKey: digest, cost: entry.fileSize)
    }

    /// Marks `digest` as used at `date`; it becomes the most recently used. Returns its entry.
    @discardableResult
    mutating func touch(_ digest: EntryDigest, at date: Date) -> Entry? {
        guard entries.touch(digest) != nil else { return nil }
        entries.modify(digest) { $0.lastAccess = date }
        return entries.peek(digest)
    }

    @discardableResult
    mutating func remove(_ digest: EntryDigest) -> Entry? {
        entries.removeValue(forKey: digest)
    }

    /// Removes `digest` only if its entry is still the one of `generation`.
    @discardableResult
    mutating func remove(_ digest: EntryDigest, ifGeneration generation: UInt64) -> Bool {
        guard entries.peek(digest)?.generation == generation else { return false }
        entries.removeValue(forKey: digest)
        return true
    }

    /// Gives `digest`'s entry the summary read from its file, if the entry is still the one of
    /// `generation` (no newer write replaced the file meanwhile). Returns whether it did.
    @discardableResult
    mutating func describe(_ digest: EntryDigest, _ summary: EntrySummary, ifGeneration generation: UInt64) -> Bool {
        guard entries.peek(digest)?.generation == generation else { return false }
        return entries.modify(digest) { $0.summary = summary }
    }

    mutating func popLeastRecent() -> (digest: EntryDigest, entry: Entry)? {
        entries.popLeastRecent().map { ($0.key, $0.value) }
    }

    mutating func removeAll() {
        entries.removeAll()
    }

    /// The digests of every entry whose `latestResponseDate` is at or after `date`.
    func digests(storedSince date: Date) -> [EntryDigest] {
        entries.filter { $0.value.latestResponseDate >= date }.map(\.key)
    }

    /// Applies one journal record.
    mutating func apply(_ record: JournalRecord) {
        switch record {
        case .put(let digest, let entry): put(digest, entry)
        case .remove(let digest): remove(digest)
        case .touch(let digest, let date): touch(digest, at: date)
        case .clear: removeAll()
        }
    }
}

// MARK: - Snapshot

extension DiskIndex {
    /// "CPIX" as a little-endian `UInt32`.
    static let snapshotMagic: UInt32 = 0x5849_5043
    /// 2 since entries carry summaries; a snapshot of version 1 is rebuilt from the entry files.
    static let snapshotVersion: UInt16 = 2
    /// magic, version, reserved, count.
    static let snapshotHeaderSize = 4 + 2 + 2 + 8
    /// digest (16), file size, latest response date, last access.
    static let snapshotEntrySize = 16 + 8 + 8 + 8
    /// ordinal and length before each summary.
    static let snapshotSummaryOverhead = 8 + 4
    /// The largest summary the index reads (a record of 8 variants with long URLs is far below it).
    static let maximumSummarySize = 1 << 20

    /// The size of a snapshot of `count` entries without summaries.
    static func snapshotSize(count: Int) -> Int {
        snapshotHeaderSize + count * snapshotEntrySize + EntryCodec.checksumSize
    }

    /// The snapshot file: a header, then every entry from least to most recently used, then the
    /// summaries of the entries that have one, then a checksum of all of it.
    ///
    /// ```
    /// magic "CPIX" · version u16 (2) · reserved u16 · count u64
    /// (digest.high u64 · digest.low u64 · fileSize u64 · latestResponseDate f64 · lastAccess f64)*
    /// (ordinal u64 · length u32 · summary)*      ordinals increasing, each < count (EntrySummary)
    /// checksum u64
    /// ```
    package func snapshotData() -> Data {
        var size = Self.snapshotSize(count: entries.count)
        for element in entries {
            if let summary = element.value.storableSummary { size += Self.snapshotSummaryOverhead + summary.encodedSize }
        }
        var data = Data(count: size)
        data.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.writeInteger(Self.snapshotMagic)
            writer.writeInteger(Self.snapshotVersion)
            writer.writeInteger(UInt16(0))
            writer.writeInteger(UInt64(entries.count))
            for element in entries {
                writer.writeInteger(element.key.high)
                writer.writeInteger(element.key.low)
                writer.writeInteger(UInt64(element.value.fileSize))
                writer.writeDate(element.value.latestResponseDate)
                writer.writeDate(element.value.lastAccess)
            }
            for (ordinal, element) in entries.enumerated() {
                guard let summary = element.value.storableSummary else { continue }
                writer.writeInteger(UInt64(ordinal))
                writer.writeInteger(UInt32(summary.encodedSize))
                summary.encode(to: &writer)
            }
            writer.writeInteger(writer.checksumOfWrittenBytes())
        }
        return data
    }

    /// Rebuilds the index from a snapshot and the journal written after it.
    ///
    /// The snapshot must be intact and of this version (else this throws and the caller rebuilds
    /// from the entry files). The journal is read as far as it is intact: damaged records (a torn
    /// tail after a crash, garbage) are skipped and counted in `damagedJournalBytes`. Entries end
    /// up ordered by last access, ties broken by the order in which the snapshot and journal list
    /// them.
    package static func load(snapshot: Data, journal: Data) throws -> (index: DiskIndex, damagedJournalBytes: Int) {
        var table: [EntryDigest: (entry: Entry, order: Int)] = [:]
        try snapshot.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            guard buffer.count >= snapshotSize(count: 0) else { throw BinaryDecodingError.truncated }
            guard try reader.readInteger(UInt32.self) == snapshotMagic else { throw BinaryDecodingError.badMagic }
            let version = try reader.readInteger(UInt16.self)
            guard version == snapshotVersion else { throw BinaryDecodingError.unsupportedVersion(version) }
            _ = try reader.readInteger(UInt16.self)
            let recordedCount = try reader.readInteger(UInt64.self)
            guard recordedCount <= UInt64(buffer.count / snapshotEntrySize),
                  snapshotSize(count: Int(recordedCount)) <= buffer.count
            else { throw BinaryDecodingError.lengthMismatch }
            let count = Int(recordedCount)
            let contentLength = buffer.count - EntryCodec.checksumSize
            var trailer = ByteReader(buffer, offset: contentLength)
            guard StableHash.hash(UnsafeRawBufferPointer(rebasing: buffer[0..<contentLength]))
                == (try trailer.readInteger(UInt64.self))
            else { throw BinaryDecodingError.checksumMismatch }
            var listed: [(digest: EntryDigest, entry: Entry)] = []
            listed.reserveCapacity(count)
            for _ in 0..<count {
                let digest = EntryDigest(high: try reader.readInteger(), low: try reader.readInteger())
                listed.append((digest, try readEntryFields(&reader)))
            }
            var content = ByteReader(UnsafeRawBufferPointer(rebasing: buffer[0..<contentLength]), offset: reader.offset)
            var previous = -1
            while content.remaining > 0 {
                guard let ordinal = Int(exactly: try content.readInteger(UInt64.self)), ordinal > previous, ordinal < count else {
                    throw BinaryDecodingError.malformed("summary ordinal")
                }
                listed[ordinal].entry.summary = try readSummary(&content, length: Int(try content.readInteger(UInt32.self)))
                previous = ordinal
            }
            table.reserveCapacity(count)
            for (order, item) in listed.enumerated() {
                table[item.digest] = (item.entry, order)
            }
        }

        var order = table.count
        let (records, damaged) = decodeJournal(journal)
        for record in records {
            switch record {
            case .put(let digest, let entry):
                table[digest] = (entry, order)
            case .remove(let digest):
                table.removeValue(forKey: digest)
            case .touch(let digest, let date):
                if var known = table[digest] {
                    known.entry.lastAccess = date
                    known.order = order
                    table[digest] = known
                }
            case .clear:
                table.removeAll()
            }
            order += 1
        }

        var ordered = table.map { (digest: $0.key, entry: $0.value.entry, order: $0.value.order) }
        ordered.sort { lhs, rhs in
            lhs.entry.lastAccess != rhs.entry.lastAccess
                ? lhs.entry.lastAccess < rhs.entry.lastAccess
                : lhs.order < rhs.order
        }
        var index = DiskIndex()
        index.entries.reserveCapacity(ordered.count)
        var total = 0
        for item in ordered {
            // Sizes are bounded, so only an absurd number of entries could overflow the sum.
            let (sum, overflow) = total.addingReportingOverflow(item.entry.fileSize)
            guard !overflow else { throw BinaryDecodingError.malformed("file sizes overflow") }
            total = sum
            index.put(item.digest, item.entry)
        }
        return (index, damaged)
    }

    /// The largest entry file size the index accepts (1 TiB): anything larger is damage, and
    /// would overflow the byte count the capacity is checked against.
    package static let maximumFileSize = 1 << 40

    /// A summary of exactly `length` bytes at the reader's offset.
    static func readSummary(_ reader: inout ByteReader, length: Int) throws -> EntrySummary {
        guard length <= maximumSummarySize else { throw BinaryDecodingError.malformed("summary length") }
        var bounded = ByteReader(try reader.readBytes(length))
        let summary = try EntrySummary.decode(&bounded)
        guard bounded.remaining == 0 else { throw BinaryDecodingError.malformed("summary length") }
        return summary
    }

    static func readEntryFields(_ reader: inout ByteReader) throws -> Entry {
        guard let fileSize = Int(exactly: try reader.readInteger(UInt64.self)), fileSize <= maximumFileSize else {
            throw BinaryDecodingError.malformed("file size")
        }
        return Entry(fileSize: fileSize, latestResponseDate: try reader.readDate(), lastAccess: try reader.readDate())
    }
}

// MARK: - Journal

extension DiskIndex {
    /// One change to the index, as appended to the journal.
    ///
    /// Each record is self-contained and checksummed, and a batch of records is appended with a
    /// single `write` to a file opened with `O_APPEND`, so appends from two processes interleave
    /// whole records, and a torn record (a crash mid-append, a full disk) is skipped on replay.
    /// Replaying a journal twice gives the same index (every record sets an absolute value), so a
    /// crash between writing a new snapshot and emptying the journal loses nothing.
    ///
    /// ```
    /// magic "CPJ1" · type u8 · payload · checksum u64 (XXH64 of magic, type and payload)
    /// put    (1): digest.high u64 · digest.low u64 · fileSize u64 · latestResponseDate f64 · lastAccess f64
    /// remove (2): digest.high u64 · digest.low u64
    /// touch  (3): digest.high u64 · digest.low u64 · lastAccess f64
    /// clear  (4): nothing
    /// put    (5): as (1) · summaryLength u32 · summary (EntrySummary): a put whose entry has one
    /// ```
    package enum JournalRecord: Equatable, Sendable {
        case put(EntryDigest, Entry)
        case remove(EntryDigest)
        case touch(EntryDigest, Date)
        case clear

        fileprivate var type: UInt8 {
            switch self {
            case .put(_, let entry): entry.storableSummary == nil ? 1 : 5
            case .remove: 2
            case .touch: 3
            case .clear: 4
            }
        }

        fileprivate static func payloadSize(ofType type: UInt8) -> Int? {
            switch type {
            case 1: 40
            case 2: 16
            case 3: 24
            case 4: 0
            default: nil
            }
        }

        /// The bytes this record takes in the journal.
        package var encodedSize: Int {
            if case .put(_, let entry) = self, let summary = entry.storableSummary {
                return journalRecordOverhead + putPayloadSize + 4 + summary.encodedSize
            }
            return journalRecordOverhead + (Self.payloadSize(ofType: type) ?? 0)
        }
    }

    /// "CPJ1" as a little-endian `UInt32`.
    static let journalMagic: UInt32 = 0x314A_5043
    /// magic, type and checksum.
    static let journalRecordOverhead = 4 + 1 + 8
    /// digest, file size and the two dates of a put.
    static let putPayloadSize = 40

    /// The bytes of `records`, to be appended with one `write`.
    package static func encodeJournal(_ records: [JournalRecord]) -> Data {
        let size = records.reduce(0) { $0 + $1.encodedSize }
        var data = Data(count: size)
        data.withUnsafeMutableBytes { buffer in
            var start = 0
            for record in records {
                let end = start + record.encodedSize
                var writer = ByteWriter(UnsafeMutableRawBufferPointer(rebasing: buffer[start..<end]))
                writer.writeInteger(journalMagic)
                writer.writeInteger(record.type)
                switch record {
                case .put(let digest, let entry):
                    writer.writeInteger(digest.high)
                    writer.writeInteger(digest.low)
                    writer.writeInteger(UInt64(entry.fileSize))
                    writer.writeDate(entry.latestResponseDate)
                    writer.writeDate(entry.lastAccess)
                    if let summary = entry.storableSummary {
                        writer.writeInteger(UInt32(summary.encodedSize))
                        summary.encode(to: &writer)
                    }
                case .remove(let digest):
                    writer.writeInteger(digest.high)
                    writer.writeInteger(digest.low)
                case .touch(let digest, let date):
                    writer.writeInteger(digest.high)
                    writer.writeInteger(digest.low)
                    writer.writeDate(date)
                case .clear:
                    break
                }
                writer.writeInteger(writer.checksumOfWrittenBytes())
                start = end
            }
        }
        return data
    }

    /// The intact records of a journal, in order, and how many bytes were skipped as damaged.
    /// After a damaged byte the reader looks for the next intact record, so one torn append does
    /// not hide the appends that followed it.
    static func decodeJournal(_ data: Data) -> (records: [JournalRecord], damagedBytes: Int) {
        data.withUnsafeBytes { buffer in
            var records: [JournalRecord] = []
            var damaged = 0
            var offset = 0
            while offset < buffer.count {
                if let (record, size) = decodeJournalRecord(buffer, at: offset) {
                    records.append(record)
                    offset += size
                } else {
                    damaged += 1
                    offset += 1
                }
            }
            return (records, damaged)
        }
    }

    private static func decodeJournalRecord(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> (JournalRecord, Int)? {
        var reader = ByteReader(buffer, offset: offset)
        guard (try? reader.readInteger(UInt32.self)) == journalMagic, let type = try? reader.readInteger(UInt8.self) else {
            return nil
        }
        let payloadSize: Int
        if type == 5 {
            // A put with a summary: its length follows the put's fields.
            var lengthReader = ByteReader(buffer, offset: reader.offset + putPayloadSize)
            guard let length = try? lengthReader.readInteger(UInt32.self), Int(length) <= maximumSummarySize else { return nil }
            payloadSize = putPayloadSize + 4 + Int(length)
        } else {
            guard let fixed = JournalRecord.payloadSize(ofType: type) else { return nil }
            payloadSize = fixed
        }
        let size = journalRecordOverhead + payloadSize
        guard size <= buffer.count - offset else { return nil }
        let checksummed = UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + size - EntryCodec.checksumSize)])
        var trailer = ByteReader(buffer, offset: offset + size - EntryCodec.checksumSize)
        guard let stored = try? trailer.readInteger(UInt64.self), StableHash.hash(checksummed) == stored else {
            return nil
        }
        do {
            switch type {
            case 1:
                let digest = EntryDigest(high: try reader.readInteger(), low: try reader.readInteger())
                return (.put(digest, try readEntryFields(&reader)), size)
            case 2:
                return (.remove(EntryDigest(high: try reader.readInteger(), low: try reader.readInteger())), size)
            case 3:
                let digest = EntryDigest(high: try reader.readInteger(), low: try reader.readInteger())
                return (.touch(digest, try reader.readDate()), size)
            case 5:
                let digest = EntryDigest(high: try reader.readInteger(), low: try reader.readInteger())
                var entry = try readEntryFields(&reader)
                entry.summary = try readSummary(&reader, length: Int(try reader.readInteger(UInt32.self)))
                return (.put(digest, entry), size)
            default:
                return (.clear, size)
            }
        } catch {
            return nil
        }
    }
}
