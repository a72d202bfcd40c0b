import Foundation

/// The binary format of one entry file: a whole `CacheRecord` (every variant), versioned and
/// checksummed, so that a torn, truncated, bit-flipped, foreign or other-version file decodes as
/// an error and never as a wrong record.
///
/// Layout of version 2, which this build writes (little-endian; `str` is a `UInt32` byte count
/// then UTF-8; `bytes` is a `UInt64` count then the bytes; dates and intervals are `Double` bit
/// patterns):
///
/// ```
/// header    magic "CPEN" · version u16 (2) · flags u16 (0) · fileLength u64
///           · latestResponseDate f64 · key str · headerChecksum u64 (XXH64 of the header so far)
/// bodies    every variant's body, back to back, in the order of the variants
/// variants  variantCount u32, then per variant:
///           responseURL str · statusCode i64 · fieldCount u32 · (name str · value str)*
///           · bodyLength u64 · requestDate f64 · responseDate f64 · initialAge f64
///           · freshnessLifetime f64 · varyCount u32 · (name str · hasValue u8 · [value str])*
///           · partition u8 (1 user, 2 judge) · [user u64] · [judge u64]
///           · hasUserInfo u8 · [userInfo bytes]
/// trailer   variantsOffset u64 · checksum u64 (XXH64 of every byte from the bodies on)
/// ```
///
/// The bodies come first, at an offset the key alone decides, so a body can be written to the
/// file as it arrives and the rest — the variants, the trailer, then the header, whose length and
/// date are known only at the end — once it is whole (`remainder(of:firstBodyLength:checksum:)`).
/// The two checksums cover every byte: the header's its own, the trailer's everything after it.
/// Version 1 (written by earlier builds) is still read: the same header and variants, with each
/// body inside its variant (`body bytes` in place of `bodyLength`), no bodies section, and a
/// trailer of only the checksum, of every byte before it. In files of earlier builds the partition
/// byte was a credential fingerprint's presence (0 or 1), which reads as a user.
///
/// Decoding also rejects numbers no cache writes (a status outside 0...999, a NaN, infinite or
/// absurdly large date, age or lifetime), so that a file crafted with valid checksums is a miss
/// and never a trap where the engine turns ages into integers.
///
/// The header carries its own checksum so an index rebuild can learn a file's key, size and date
/// from its first bytes (`decodeHeader`) without reading the body; a full read verifies the
/// trailer checksum over the whole file before anything is parsed.
package enum EntryCodec {
    /// "CPEN" read as a little-endian `UInt32`.
    package static let magic: UInt32 = 0x4E45_5043
    /// The version this build writes.
    package static let version: UInt16 = 2
    /// The version earlier builds wrote, still read.
    package static let inlineBodiesVersion: UInt16 = 1
    /// magic, version, flags, fileLength, latestResponseDate, key length.
    package static let fixedHeaderSize = 4 + 2 + 2 + 8 + 8 + 4
    package static let checksumSize = 8
    /// The bytes `decodeHeader` is first given: enough for the header of any key shorter than
    /// about 4 KB.
    package static let headerProbeSize = 4096

    /// What the first bytes of an entry file say.
    package struct Header: Equatable, Sendable {
        package var key: String
        var latestResponseDate: Date
        /// The length of the whole file, as written.
        package var fileLength: Int
    }

    // MARK: - Encoding

    /// The bytes of the header of `key`'s file, with its checksum: where the bodies begin.
    package static func headerSize(forKey key: String) -> Int {
        fixedHeaderSize + key.utf8.count + checksumSize
    }

    package static func encode(_ record: CacheRecord) -> Data {
        encodedParts(record).parts.reduce(into: Data()) { $0.append($1) }
    }

    /// `encode(record)` as parts to write one after another (`FileIO.createFile(_:parts:…)`):
    /// the same bytes, without copying a large body into a buffer of its own.
    package static func encodedParts(_ record: CacheRecord) -> (parts: [Data], count: Int) {
        let tail = remainder(of: record, firstBodyLength: nil, checksum: StableHash.Streaming())
        return ([tail.header] + tail.parts, tail.fileLength)
    }

    /// What an entry file for `record` holds besides what is already written: the file's header,
    /// and the parts that follow the bodies written so far. With `firstBodyLength`, the first
    /// variant's body — that many bytes, whatever `record` holds for it — is in the file right
    /// after the header, hashed into `checksum`, and the parts begin with the next body; without
    /// it, nothing is written yet and the parts begin with the first body.
    static func remainder(of record: CacheRecord, firstBodyLength: Int?, checksum: StableHash.Streaming)
        -> (header: Data, parts: [Data], fileLength: Int) {
        let headerSize = headerSize(forKey: record.key)
        var lengths = record.variants.map(\.body.count)
        var writer = SegmentWriter(checksum: checksum)
        for (index, entry) in record.variants.enumerated() {
            if index == 0, let firstBodyLength {
                lengths[0] = firstBodyLength
            } else {
                writer.writeBody(entry.body)
            }
        }
        let variantsOffset = headerSize + lengths.reduce(0, +)
        writer.writeInteger(UInt32(truncatingIfNeeded: record.variants.count))
        for (entry, length) in zip(record.variants, lengths) {
            write(entry, bodyLength: length, to: &writer)
        }
        writer.writeInteger(UInt64(variantsOffset))
        writer.writeInteger(writer.checksumOfWrittenBytes())
        let fileLength = headerSize + (firstBodyLength ?? 0) + writer.count
        return (encodedHeader(key: record.key, latestResponseDate: record.latestResponseDate, fileLength: fileLength),
                writer.finish(), fileLength)
    }

    /// The header of a file of `fileLength` bytes for `key`, its checksum included.
    private static func encodedHeader(key: String, latestResponseDate: Date, fileLength: Int) -> Data {
        var data = Data(count: headerSize(forKey: key))
        data.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.writeInteger(magic)
            writer.writeInteger(version)
            writer.writeInteger(UInt16(0))
            writer.writeInteger(UInt64(fileLength))
            writer.writeDate(latestResponseDate)
            writer.writeString(key)
            writer.writeInteger(writer.checksumOfWrittenBytes())
        }
        return data
    }

    private static func write<Sink: ByteSink>(_ entry: CacheEntry, bodyLength: Int, to sink: inout Sink) {
        sink.writeString(entry.responseURL)
        sink.writeInteger(Int64(entry.statusCode))
        sink.writeInteger(UInt32(truncatingIfNeeded: entry.headers.fields.count))
        for field in entry.headers.fields {
            sink.writeString(field.name)
            sink.writeString(field.value)
        }
        sink.writeInteger(UInt64(bodyLength))
        sink.writeDate(entry.requestDate)
        sink.writeDate(entry.responseDate)
        sink.writeDouble(entry.initialAge)
        sink.writeDouble(entry.freshnessLifetime)
        sink.writeInteger(UInt32(truncatingIfNeeded: entry.varyFields.count))
        for field in entry.varyFields {
            sink.writeString(field.name)
            if let value = field.value {
                sink.writeInteger(UInt8(1))
                sink.writeString(value)
            } else {
                sink.writeInteger(UInt8(0))
            }
        }
        let partition = entry.partition
        sink.writeInteger(UInt8((partition.user != nil ? 1 : 0) | (partition.judge != nil ? 2 : 0)))
        if let user = partition.user { sink.writeInteger(user) }
        if let judge = partition.judge { sink.writeInteger(judge) }
        if let userInfo = entry.userInfo {
            sink.writeInteger(UInt8(1))
            sink.writeData(userInfo)
        } else {
            sink.writeInteger(UInt8(0))
        }
    }

    // MARK: - Decoding

    /// Decodes a whole entry file. Throws `BinaryDecodingError` for anything but an intact file
    /// of a version this build reads (and, when `expectedKey` is given, for that key).
    package static func decode(_ data: Data, expectedKey: String? = nil) throws -> CacheRecord {
        try data.withUnsafeBytes { buffer in
            try decode(buffer, expectedKey: expectedKey)
        }
    }

    package static func decode(_ buffer: UnsafeRawBufferPointer, expectedKey: String? = nil) throws -> CacheRecord {
        var reader = ByteReader(buffer)
        let header: Header
        let version: UInt16
        do {
            (header, version) = try readHeader(&reader, available: buffer.count)
        } catch is NeedMoreBytes {
            throw BinaryDecodingError.truncated
        }
        guard header.fileLength == buffer.count else { throw BinaryDecodingError.lengthMismatch }
        let headerEnd = reader.offset
        let checksumOffset = buffer.count - checksumSize
        guard checksumOffset >= headerEnd else { throw BinaryDecodingError.truncated }
        var trailer = ByteReader(buffer, offset: checksumOffset)
        let storedChecksum = try trailer.readInteger(UInt64.self)
        // Version 1 checksums the whole file before the trailer; version 2 what follows the header.
        let checksummed = version == inlineBodiesVersion ? 0 : headerEnd
        guard StableHash.hash(UnsafeRawBufferPointer(rebasing: buffer[checksummed..<checksumOffset])) == storedChecksum else {
            throw BinaryDecodingError.checksumMismatch
        }
        if let expectedKey, expectedKey != header.key { throw BinaryDecodingError.keyMismatch }

        // Only what lies before the trailer is parsed, so no length inside can reach the checksum.
        let variants: [CacheEntry]
        if version == inlineBodiesVersion {
            variants = try decodeVariants(UnsafeRawBufferPointer(rebasing: buffer[headerEnd..<checksumOffset]), bodies: nil)
        } else {
            guard checksumOffset - headerEnd >= 8 else { throw BinaryDecodingError.truncated }
            var offsetReader = ByteReader(buffer, offset: checksumOffset - 8)
            let recorded = try offsetReader.readInteger(UInt64.self)
            guard let variantsOffset = Int(exactly: recorded), variantsOffset >= headerEnd, variantsOffset <= checksumOffset - 8 else {
                throw BinaryDecodingError.malformed("variants offset")
            }
            variants = try decodeVariants(UnsafeRawBufferPointer(rebasing: buffer[variantsOffset..<(checksumOffset - 8)]),
                                          bodies: UnsafeRawBufferPointer(rebasing: buffer[headerEnd..<variantsOffset]))
        }
        let record = CacheRecord(key: header.key, variants: variants)
        guard record.latestResponseDate.timeIntervalSinceReferenceDate.bitPattern
            == header.latestResponseDate.timeIntervalSinceReferenceDate.bitPattern
        else { throw BinaryDecodingError.malformed("header date disagrees with the variants") }
        return record
    }

    /// The variants from their section: a count, then each variant, and nothing after. Each
    /// variant's body is the next `bodyLength` bytes of `bodies`, which they must use up; nil
    /// for version 1, whose bodies lie inside the variants.
    package static func decodeVariants(_ section: UnsafeRawBufferPointer, bodies: UnsafeRawBufferPointer?) throws -> [CacheEntry] {
        var reader = ByteReader(section)
        var bodyReader = bodies.map { ByteReader($0) }
        let variantCount = try reader.readInteger(UInt32.self)
        var variants: [CacheEntry] = []
        for _ in 0..<variantCount {
            variants.append(try readEntry(&reader, bodies: &bodyReader))
        }
        guard reader.remaining == 0 else { throw BinaryDecodingError.malformed("trailing bytes") }
        guard bodyReader?.remaining ?? 0 == 0 else { throw BinaryDecodingError.malformed("body bytes no variant claims") }
        return variants
    }

    /// Decodes the header from the first bytes of a file of `fileSize` bytes, without the body.
    ///
    /// - Returns: the header, or nil when `prefix` is too short for this header, in which case
    ///   `requiredPrefixLength` says how many bytes to read instead.
    package static func decodeHeader(
        _ prefix: UnsafeRawBufferPointer,
        fileSize: Int,
        requiredPrefixLength: inout Int
    ) throws -> Header? {
        var reader = ByteReader(prefix)
        do {
            let (header, _) = try readHeader(&reader, available: fileSize)
            guard header.fileLength == fileSize else { throw BinaryDecodingError.lengthMismatch }
            return header
        } catch NeedMoreBytes.count(let count) {
            requiredPrefixLength = count
            return nil
        }
    }

    /// Thrown by `readHeader` when the prefix ends inside a header that the file has room for.
    private enum NeedMoreBytes: Error {
        case count(Int)
    }

    /// Reads and verifies the header, leaving `reader` after its checksum; `available` is the size
    /// of the whole file. Returns the header and the file's format version.
    private static func readHeader(_ reader: inout ByteReader, available: Int) throws -> (Header, UInt16) {
        guard available >= fixedHeaderSize + checksumSize * 2 + 4 else { throw BinaryDecodingError.truncated }
        guard reader.remaining >= fixedHeaderSize else { throw NeedMoreBytes.count(fixedHeaderSize) }
        guard try reader.readInteger(UInt32.self) == magic else { throw BinaryDecodingError.badMagic }
        let version = try reader.readInteger(UInt16.self)
        guard version == self.version || version == inlineBodiesVersion else { throw BinaryDecodingError.unsupportedVersion(version) }
        guard try reader.readInteger(UInt16.self) == 0 else { throw BinaryDecodingError.malformed("flags") }
        let recordedLength = try reader.readInteger(UInt64.self)
        guard let fileLength = Int(exactly: recordedLength) else { throw BinaryDecodingError.lengthMismatch }
        let date = try reader.readDate()
        guard let keyLength = Int(exactly: try reader.readInteger(UInt32.self)) else {
            throw BinaryDecodingError.truncated
        }
        let headerEnd = fixedHeaderSize + keyLength
        // The header, its checksum, a variant count and the trailer must all fit in the file.
        let trailerSize = version == inlineBodiesVersion ? checksumSize : 8 + checksumSize
        guard headerEnd + checksumSize + 4 + trailerSize <= available else { throw BinaryDecodingError.truncated }
        guard headerEnd + checksumSize <= reader.buffer.count else {
            throw NeedMoreBytes.count(headerEnd + checksumSize)
        }
        let keyBytes = try reader.readBytes(keyLength)
        let storedChecksum = try reader.readInteger(UInt64.self)
        guard StableHash.hash(UnsafeRawBufferPointer(rebasing: reader.buffer[0..<headerEnd])) == storedChecksum else {
            throw BinaryDecodingError.checksumMismatch
        }
        guard let key = decodeUTF8(keyBytes) else { throw BinaryDecodingError.malformed("key is not UTF-8") }
        return (Header(key: key, latestResponseDate: date, fileLength: fileLength), version)
    }

    /// The largest magnitude, in seconds, of a stored date (from 2001) or interval: about
    /// 31,700 years, far beyond anything the policy computes (it caps lifetimes at 2^31 s).
    static let maximumSeconds: Double = 1e12

    private static func isPlausible(_ seconds: Double) -> Bool {
        seconds.isFinite && abs(seconds) <= maximumSeconds
    }

    /// One variant; its body comes from `bodies` (version 2) or from `reader` itself (version 1,
    /// `bodies` nil).
    private static func readEntry(_ reader: inout ByteReader, bodies: inout ByteReader?) throws -> CacheEntry {
        let responseURL = try reader.readString()
        guard let statusCode = Int(exactly: try reader.readInteger(Int64.self)), (0...999).contains(statusCode) else {
            throw BinaryDecodingError.malformed("status code")
        }
        let fieldCount = try reader.readInteger(UInt32.self)
        var fields: [HTTPHeaders.Field] = []
        for _ in 0..<fieldCount {
            let name = try reader.readString()
            let value = try reader.readString()
            fields.append(HTTPHeaders.Field(name: name, value: value))
        }
        let body: Data
        if var section = bodies {
            guard let length = Int(exactly: try reader.readInteger(UInt64.self)) else { throw BinaryDecodingError.truncated }
            body = Data(try section.readBytes(length))
            bodies = section
        } else {
            body = try reader.readData()
        }
        let requestDate = try reader.readDate()
        let responseDate = try reader.readDate()
        let initialAge = try reader.readDouble()
        let freshnessLifetime = try reader.readDouble()
        // Ages and lifetimes become `Int`s (the `Age` and `Cache-Status` values): a value no
        // cache writes (NaN, infinite, beyond ~30,000 years) would trap there.
        for seconds in [requestDate.timeIntervalSinceReferenceDate, responseDate.timeIntervalSinceReferenceDate,
                        initialAge, freshnessLifetime] where !isPlausible(seconds) {
            throw BinaryDecodingError.malformed("time value \(seconds)")
        }
        let varyCount = try reader.readInteger(UInt32.self)
        var varyFields: [CacheEntry.VaryField] = []
        for _ in 0..<varyCount {
            let name = try reader.readString()
            let value = try reader.readPresence() ? try reader.readString() : nil
            varyFields.append(CacheEntry.VaryField(name: name, value: value))
        }
        let partitionFlags = try reader.readInteger(UInt8.self)
        guard partitionFlags & ~3 == 0 else { throw BinaryDecodingError.malformed("partition flags") }
        let user = partitionFlags & 1 != 0 ? try reader.readInteger(UInt64.self) : nil
        let judge = partitionFlags & 2 != 0 ? try reader.readInteger(UInt64.self) : nil
        let userInfo = try reader.readPresence() ? try reader.readData() : nil
        return CacheEntry(
            responseURL: responseURL,
            statusCode: statusCode,
            headers: HTTPHeaders(fields),
            body: body,
            requestDate: requestDate,
            responseDate: responseDate,
            initialAge: initialAge,
            freshnessLifetime: freshnessLifetime,
            varyFields: varyFields,
            partition: Partition(user: user, judge: judge),
            userInfo: userInfo
        )
    }
}
