import Foundation

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
