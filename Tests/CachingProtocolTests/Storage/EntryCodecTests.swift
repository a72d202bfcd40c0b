import XCTest
@testable import CachingProtocol

final class EntryCodecTests: LoaderRulesTestCase {
    private func decodes(_ data: Data, expectedKey: String? = nil) -> Bool {
        (try? EntryCodec.decode(data, expectedKey: expectedKey)) != nil
    }

    /// Replaces the checksums and length so a mutated file gets past them and reaches the parser
    /// (the trailer's checksum as version 2 computes it, from the end of the header on).
    private func resealed(_ data: Data) -> Data {
        var bytes = [UInt8](data)
        guard bytes.count >= EntryCodec.fixedHeaderSize + 8 else { return data }
        withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { bytes.replaceSubrange(8..<16, with: $0) }
        let keyLength = Int(UInt32(bytes[24]) | UInt32(bytes[25]) << 8 | UInt32(bytes[26]) << 16 | UInt32(bytes[27]) << 24)
        let headerEnd = EntryCodec.fixedHeaderSize + keyLength
        var checksummed = 0
        if headerEnd + 8 <= bytes.count - 8 {
            let headerChecksum = bytes.withUnsafeBytes { StableHash.hash(UnsafeRawBufferPointer(rebasing: $0[0..<headerEnd])) }
            withUnsafeBytes(of: headerChecksum.littleEndian) { bytes.replaceSubrange(headerEnd..<(headerEnd + 8), with: $0) }
            checksummed = headerEnd + 8
        }
        let contentEnd = bytes.count - 8
        let checksum = bytes.withUnsafeBytes { StableHash.hash(UnsafeRawBufferPointer(rebasing: $0[checksummed..<contentEnd])) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes.replaceSubrange(contentEnd..<bytes.count, with: $0) }
        return Data(bytes)
    }

    /// `record` in version 1 of the format, as earlier builds wrote it: each body inside its
    /// variant, the trailer's checksum over every byte before it.
    private func versionOne(_ record: CacheRecord) -> Data {
        var bytes = Data()
        func integer<Value: FixedWidthInteger>(_ value: Value) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        func string(_ value: String) { integer(UInt32(value.utf8.count)); bytes.append(contentsOf: Array(value.utf8)) }
        func data(_ value: Data) { integer(UInt64(value.count)); bytes.append(value) }
        func date(_ value: Date) { integer(value.timeIntervalSinceReferenceDate.bitPattern) }
        integer(EntryCodec.magic)
        integer(UInt16(1))
        integer(UInt16(0))
        let lengthOffset = bytes.count
        integer(UInt64(0))
        date(record.latestResponseDate)
        string(record.key)
        let headerChecksumOffset = bytes.count
        integer(UInt64(0))
        integer(UInt32(record.variants.count))
        for entry in record.variants {
            string(entry.responseURL)
            integer(Int64(entry.statusCode))
            integer(UInt32(entry.headers.fields.count))
            for field in entry.headers.fields { string(field.name); string(field.value) }
            data(entry.body)
            date(entry.requestDate)
            date(entry.responseDate)
            integer(entry.initialAge.bitPattern)
            integer(entry.freshnessLifetime.bitPattern)
            integer(UInt32(entry.varyFields.count))
            for field in entry.varyFields {
                string(field.name)
                integer(UInt8(field.value == nil ? 0 : 1))
                if let value = field.value { string(value) }
            }
            integer(UInt8((entry.partition.user != nil ? 1 : 0) | (entry.partition.judge != nil ? 2 : 0)))
            if let user = entry.partition.user { integer(user) }
            if let judge = entry.partition.judge { integer(judge) }
            integer(UInt8(entry.userInfo == nil ? 0 : 1))
            if let userInfo = entry.userInfo { data(userInfo) }
        }
        withUnsafeBytes(of: UInt64(bytes.count + 8).littleEndian) { bytes.replaceSubrange(lengthOffset..<(lengthOffset + 8), with: $0) }
        let headerChecksum = bytes.prefix(headerChecksumOffset).withUnsafeBytes { StableHash.hash($0) }
        withUnsafeBytes(of: headerChecksum.littleEndian) { bytes.replaceSubrange(headerChecksumOffset..<(headerChecksumOffset + 8), with: $0) }
        integer(bytes.withUnsafeBytes { StableHash.hash($0) })
        return bytes
    }

    func testRoundTripsEveryField() throws {
        // Given a record with two variants and every optional field used
        let record = Fixtures.richRecord()
        // When it is encoded and decoded
        let data = EntryCodec.encode(record)
        let decoded = try EntryCodec.decode(data, expectedKey: record.key)
        // Then it is equal, field for field (dates and doubles bit-exact)
        XCTAssertEqual(decoded, record)
        XCTAssertEqual(decoded.variants[0].requestDate.timeIntervalSinceReferenceDate.bitPattern,
                       record.variants[0].requestDate.timeIntervalSinceReferenceDate.bitPattern)
        XCTAssertEqual(decoded.variants[0].headers.fields, record.variants[0].headers.fields)
        XCTAssertEqual(decoded.variants[0].varyFields[1].value, nil)
        XCTAssertEqual(decoded.variants[0].partition, Partition(user: 0xDEAD_BEEF_CAFE_F00D, judge: 0x0123_4567_89AB_CDEF))
        XCTAssertEqual(decoded.variants[1].partition, .anonymous)
        XCTAssertEqual(decoded.variants[0].userInfo, Data([0, 1, 2, 3, 255]))
    }

    func testRoundTripsEdgeCases() throws {
        let cases = [
            CacheRecord(key: "", variants: []),
            CacheRecord(key: "k", variants: [Fixtures.entry(url: "", body: Data())]),
            Fixtures.record(key: "large", bodySize: 3_000_000),
            CacheRecord(key: String(repeating: "🙂", count: 2000), variants: [Fixtures.entry(body: Data([1]))]),
        ]
        for record in cases {
            XCTAssertEqual(try EntryCodec.decode(EntryCodec.encode(record)), record)
        }
    }

    func testPartsAreTheEncodedBytesWithoutCopyingLargeBodies() {
        // Given records below and above the size at which a body becomes a part of its own
        let large = Fixtures.record(key: "GET https://example.com/large", bodySize: 3_000_000)
        let twoLarge = CacheRecord(key: "GET https://example.com/two", variants: [
            Fixtures.entry(body: Data(repeating: 7, count: SegmentWriter.separateBodyBytes)),
            Fixtures.entry(body: Data(repeating: 9, count: SegmentWriter.separateBodyBytes + 1)),
        ])
        for record in [Fixtures.richRecord(), Fixtures.record(key: "k", bodySize: 0), large, twoLarge] {
            // When it is encoded in parts
            let encoded = EntryCodec.encodedParts(record)
            // Then the parts laid end to end are exactly the one-buffer encoding, checksum included
            let joined = encoded.parts.reduce(into: Data()) { $0.append($1) }
            XCTAssertEqual(joined, EntryCodec.encode(record), record.key)
            XCTAssertEqual(encoded.count, joined.count, record.key)
        }
        // And a large body is a part of its own: header, body, then the rest
        let parts = EntryCodec.encodedParts(large).parts
        XCTAssertEqual(parts.count, 3)
        XCTAssertEqual(parts[1], large.variants[0].body)
        XCTAssertEqual(EntryCodec.encodedParts(twoLarge).parts.count, 4, "header, the two bodies, the rest")
    }

    func testAFileWrittenAsItsBodyArrivesIsTheEncodedFile() {
        // Given records whose first body is written first, hashed as it goes, in pieces
        let records = [
            Fixtures.richRecord(),
            Fixtures.record(key: "GET https://example.com/large", bodySize: 3_000_000),
            CacheRecord(key: "GET https://example.com/empty", variants: [Fixtures.entry(body: Data())]),
            CacheRecord(key: "GET https://example.com/vary", variants: [
                Fixtures.entry(body: Data(repeating: 1, count: 70_000)), Fixtures.entry(body: Data(repeating: 2, count: 40_000)),
            ]),
        ]
        for record in records {
            let body = record.variants[0].body
            var checksum = StableHash.Streaming()
            for start in stride(from: 0, to: body.count, by: 16_384) {
                checksum.combine(body[start..<min(body.count, start + 16_384)])
            }
            // When the rest is made with the first body left out of the record (as it is when
            // the body is only in the file)
            var withoutBody = record
            withoutBody.variants[0].body = Data()
            let tail = EntryCodec.remainder(of: withoutBody, firstBodyLength: body.count, checksum: checksum)
            // Then header, body and the rest laid end to end are the encoded file
            let assembled = tail.parts.reduce(into: tail.header + body) { $0.append($1) }
            XCTAssertEqual(assembled, EntryCodec.encode(record), record.key)
            XCTAssertEqual(tail.fileLength, assembled.count, record.key)
            XCTAssertEqual(tail.header.count, EntryCodec.headerSize(forKey: record.key), "the body starts where the key says")
        }
    }

    func testFilesOfTheFirstVersionAreStillRead() throws {
        // Given records as an earlier build wrote them (bodies inside their variants)
        for record in [Fixtures.richRecord(), Fixtures.record(key: "GET https://example.com/one", bodySize: 100_000)] {
            let old = versionOne(record)
            // When read, the record is the same, and its header too
            XCTAssertEqual(try EntryCodec.decode(old, expectedKey: record.key), record)
            var required = 0
            let header = try old.withUnsafeBytes { try EntryCodec.decodeHeader($0, fileSize: old.count, requiredPrefixLength: &required) }
            XCTAssertEqual(header?.key, record.key)
            // And every single bit flipped in a small one fails
            guard record.variants[0].body.count < 1_000 else { continue }
            var bytes = [UInt8](old)
            for index in bytes.indices {
                bytes[index] ^= 0x10
                XCTAssertFalse(decodes(Data(bytes)), "byte \(index)")
                bytes[index] ^= 0x10
            }
        }
    }

    func testEncodingIsDeterministic() {
        XCTAssertEqual(EntryCodec.encode(Fixtures.richRecord()), EntryCodec.encode(Fixtures.richRecord()))
    }

    func testEveryTruncationFailsCleanly() {
        // Given a small valid file
        let data = EntryCodec.encode(Fixtures.record(key: "GET https://example.com/t", bodySize: 40))
        // When it is cut at every length
        for length in 0..<data.count {
            // Then it never decodes (and never traps)
            XCTAssertThrowsError(try EntryCodec.decode(data.prefix(length)), "length \(length)")
        }
        // And appended bytes fail too
        XCTAssertThrowsError(try EntryCodec.decode(data + Data([0])))
    }

    func testEverySingleBitFlipFailsCleanly() {
        let data = EntryCodec.encode(Fixtures.richRecord())
        var bytes = [UInt8](data)
        for index in bytes.indices {
            for bit in 0..<8 {
                bytes[index] ^= 1 << bit
                XCTAssertFalse(decodes(Data(bytes)), "byte \(index) bit \(bit)")
                bytes[index] ^= 1 << bit
            }
        }
    }

    func testRandomMultiByteCorruptionFailsCleanly() {
        let data = EntryCodec.encode(Fixtures.richRecord())
        for _ in 0..<2000 {
            var bytes = [UInt8](data)
            // Distinct bytes, each changed once: two changes to one byte could undo each other
            // (it happened: 456 ^ 12 twice left the file intact, and it decoded, as it should).
            for index in bytes.indices.shuffled().prefix(Int.random(in: 1...8)) {
                bytes[index] ^= UInt8.random(in: 1...255)
            }
            XCTAssertFalse(decodes(Data(bytes)))
        }
    }

    func testGarbageFailsCleanly() {
        for length in [0, 1, 7, 8, 35, 36, 64, 100, 4096] {
            for _ in 0..<50 {
                let garbage = Data((0..<length).map { _ in UInt8.random(in: 0...255) })
                XCTAssertFalse(decodes(garbage))
                var required = 0
                _ = try? garbage.withUnsafeBytes {
                    try EntryCodec.decodeHeader($0, fileSize: length, requiredPrefixLength: &required)
                }
            }
        }
        XCTAssertFalse(decodes(Data(repeating: 0, count: 500)))
        XCTAssertFalse(decodes(Data(repeating: 0xFF, count: 500)))
    }

    func testWrongMagicAndWrongVersionAreReported() {
        let data = EntryCodec.encode(Fixtures.record(key: "k"))
        var wrongMagic = [UInt8](data)
        wrongMagic[0] = UInt8(ascii: "X")
        XCTAssertThrowsError(try EntryCodec.decode(resealed(Data(wrongMagic)))) {
            XCTAssertEqual($0 as? BinaryDecodingError, .badMagic)
        }
        var wrongVersion = [UInt8](data)
        wrongVersion[4] = 3
        XCTAssertThrowsError(try EntryCodec.decode(resealed(Data(wrongVersion)))) {
            XCTAssertEqual($0 as? BinaryDecodingError, .unsupportedVersion(3))
        }
        var wrongFlags = [UInt8](data)
        wrongFlags[6] = 1
        XCTAssertThrowsError(try EntryCodec.decode(resealed(Data(wrongFlags))))
    }

    func testAnotherKeysEntryIsRejected() {
        let data = EntryCodec.encode(Fixtures.record(key: "GET https://a.example/"))
        XCTAssertThrowsError(try EntryCodec.decode(data, expectedKey: "GET https://b.example/")) {
            XCTAssertEqual($0 as? BinaryDecodingError, .keyMismatch)
        }
    }

    func testParserSurvivesCorruptionPastTheChecksums() {
        // Mutations with the checksums and length recomputed, so hostile lengths and counts reach
        // the parser: it must throw or return a record that encodes back to the same bytes.
        let original = EntryCodec.encode(Fixtures.richRecord())
        for round in 0..<5000 {
            var bytes = [UInt8](original)
            switch round % 3 {
            case 0:
                for _ in 0..<Int.random(in: 1...4) {
                    let index = Int.random(in: 28..<(bytes.count - 8))
                    bytes[index] = UInt8.random(in: 0...255)
                }
            case 1:
                // Huge length or count fields
                let index = Int.random(in: 28..<(bytes.count - 12))
                bytes.replaceSubrange(index..<(index + 4), with: [0xFF, 0xFF, 0xFF, 0x7F].shuffled())
            default:
                let cut = Int.random(in: 28..<(bytes.count - 8))
                bytes.removeSubrange(cut..<min(bytes.count - 8, cut + Int.random(in: 1...20)))
            }
            let sealed = resealed(Data(bytes))
            if let record = try? EntryCodec.decode(sealed) {
                XCTAssertEqual(EntryCodec.encode(record), sealed)
            }
        }
    }

    func testHeaderIsReadFromThePrefixAlone() throws {
        // Given a record whose key is longer than the first probe
        let longKey = "GET https://example.com/" + String(repeating: "x", count: 6000)
        let record = Fixtures.record(key: longKey, bodySize: 10_000)
        let data = EntryCodec.encode(record)
        // When the header is decoded from the first 4 KB
        var required = 0
        let first = try data.prefix(EntryCodec.headerProbeSize).withUnsafeBytes {
            try EntryCodec.decodeHeader($0, fileSize: data.count, requiredPrefixLength: &required)
        }
        // Then it asks for exactly the header, and that is enough
        XCTAssertNil(first)
        XCTAssertGreaterThan(required, EntryCodec.headerProbeSize)
        XCTAssertLessThan(required, data.count)
        let header = try data.prefix(required).withUnsafeBytes {
            try EntryCodec.decodeHeader($0, fileSize: data.count, requiredPrefixLength: &required)
        }
        XCTAssertEqual(header, EntryCodec.Header(key: longKey, latestResponseDate: record.latestResponseDate, fileLength: data.count))
        // And a file whose size differs from the recorded length is refused
        XCTAssertThrowsError(try data.prefix(required).withUnsafeBytes {
            try EntryCodec.decodeHeader($0, fileSize: data.count - 1, requiredPrefixLength: &required)
        })
    }

    func testDigestMatchesTheStableHashFileName() {
        for key in ["", "a", "GET https://example.com/?q=1", String(repeating: "é", count: 300)] {
            let digest = EntryDigest(key: key)
            XCTAssertEqual(digest.fileName, StableHash.hexDigest128(key))
            XCTAssertEqual(EntryDigest(fileName: digest.fileName), digest)
        }
        XCTAssertNil(EntryDigest(fileName: "../../etc/passwd"))
        XCTAssertNil(EntryDigest(fileName: String(repeating: "A", count: 32)))
        XCTAssertNil(EntryDigest(fileName: String(repeating: "a", count: 31)))
        XCTAssertNil(EntryDigest(fileName: ".tmp-1-" + String(repeating: "a", count: 25)))
    }
}

/// The UTF-8 decoder Apple builds use (their SDKs before iOS 18 lack `String(validating:)`)
/// agrees with the standard library's on valid, invalid and truncated input.
final class PortableUTF8Tests: LoaderRulesTestCase {
    func testThePortableDecoderAgreesWithTheStandardLibrary() {
        var inputs: [[UInt8]] = [
            [], Array("plain ascii".utf8), Array("café ✓ 𝄞".utf8),
            [0xC3], [0xE2, 0x9C], [0xF0, 0x9D, 0x84], [0x80], [0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
            [0xF4, 0x90, 0x80, 0x80], Array("ok".utf8) + [0xFE] + Array("ok".utf8),
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            inputs.append((0..<Int.random(in: 0...12, using: &generator)).map { _ in
                Bool.random(using: &generator) ? UInt8.random(in: 0x20...0x7E, using: &generator) : UInt8.random(in: 0...255, using: &generator)
            })
        }
        for input in inputs {
            input.withUnsafeBytes { bytes in
                XCTAssertEqual(decodeUTF8Portably(bytes), strictUTF8(bytes), "\(input)")
            }
        }
    }

    /// The reference: the standard library's strict decoder. `String(validating:as:)` is an
    /// iOS 18 / macOS 15 API on Apple, where the package supports iOS 16 / macOS 13; there the
    /// reference is the repairing decoder, which returns the input's own bytes exactly when they
    /// are valid UTF-8 (it replaces any invalid sequence with U+FFFD).
    private func strictUTF8(_ bytes: UnsafeRawBufferPointer) -> String? {
        #if os(Linux)
        return String(validating: bytes, as: UTF8.self)
        #else
        let repaired = String(decoding: bytes, as: UTF8.self)
        return repaired.utf8.elementsEqual(bytes) ? repaired : nil
        #endif
    }
}
