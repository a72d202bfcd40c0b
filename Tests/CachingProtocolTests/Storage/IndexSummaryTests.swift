import XCTest
@testable import CachingProtocol

/// Summaries in the disk index (snapshot version 2, journal record type 5): they round-trip,
/// old and damaged snapshots are rejected (the store then rebuilds from the entry files), and
/// entries without summaries keep the format they had.
final class IndexSummaryTests: LoaderRulesTestCase {
    private let base = Date(timeIntervalSinceReferenceDate: 700_000_000)

    private func summary(_ key: String, etag: String? = "\"e\"") -> EntrySummary {
        EntrySummary(key: key, variants: [
            .init(responseURL: String(key.dropFirst(4)), statusCode: 200, bodyBytes: 1_234, responseDate: base,
                  initialAge: 3, freshnessLifetime: 600, etag: etag, lastModified: nil, user: nil),
            .init(responseURL: "https://elsewhere.example/x", statusCode: 203, bodyBytes: 5, responseDate: base.addingTimeInterval(9),
                  initialAge: 0, freshnessLifetime: 0, etag: nil, lastModified: "Tue, 14 Nov 2023 00:00:00 GMT", user: 0xFEED),
        ])
    }

    private func entry(_ size: Int, accessed: Double, summary: EntrySummary?) -> DiskIndex.Entry {
        DiskIndex.Entry(fileSize: size, latestResponseDate: base, lastAccess: base.addingTimeInterval(accessed), summary: summary)
    }

    func testSummariesRoundTripThroughSnapshotAndJournal() throws {
        // Given an index with one summarised entry, one with a key only and one with none
        var index = DiskIndex()
        index.put(EntryDigest(key: "GET https://a.example/1"), entry(10, accessed: 1, summary: summary("GET https://a.example/1")))
        index.put(EntryDigest(key: "GET https://a.example/2"), entry(20, accessed: 2, summary: EntrySummary(key: "GET https://a.example/2", variants: nil)))
        index.put(EntryDigest(key: "GET https://a.example/3"), entry(30, accessed: 3, summary: nil))
        // When it is snapshotted, and a put with a summary is journaled after it
        let journaled = entry(40, accessed: 4, summary: summary("GET https://a.example/4", etag: nil))
        let journal = DiskIndex.encodeJournal([.put(EntryDigest(key: "GET https://a.example/4"), journaled)])
        let loaded = try DiskIndex.load(snapshot: index.snapshotData(), journal: journal).index
        // Then every entry comes back with its summary, or without one
        for number in 1...3 {
            let digest = EntryDigest(key: "GET https://a.example/\(number)")
            XCTAssertEqual(loaded.entry(for: digest), index.entry(for: digest))
        }
        XCTAssertEqual(loaded.entry(for: EntryDigest(key: "GET https://a.example/4"))?.summary, journaled.summary)
        XCTAssertEqual(DiskIndex.decodeJournal(journal).records.count, 1)
        XCTAssertEqual(journal.count, DiskIndex.JournalRecord.put(EntryDigest(key: "x"), journaled).encodedSize)
        // And an entry without a summary keeps the record size it always had
        XCTAssertEqual(DiskIndex.JournalRecord.put(EntryDigest(key: "x"), entry(1, accessed: 0, summary: nil)).encodedSize, 13 + 40)
    }

    /// A variant stored for a user carries the user's digest (what forgetting a user reads); one
    /// that names a user without the digest (flag 1 alone) reads as a summary whose variants are
    /// not known, so a listing reads the entry file once and no user's variant is missed.
    func testAVariantsUserIsSummarisedAndOneWithoutItsDigestIsNotKnown() throws {
        func encoded(_ summary: EntrySummary) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: summary.encodedSize)
            bytes.withUnsafeMutableBytes { buffer in
                var writer = ByteWriter(buffer)
                summary.encode(to: &writer)
            }
            return bytes
        }
        func decoded(_ bytes: [UInt8]) throws -> EntrySummary {
            try bytes.withUnsafeBytes { buffer in
                var reader = ByteReader(buffer)
                return try EntrySummary.decode(&reader)
            }
        }
        let signed = EntrySummary(key: "GET https://a.example/me", variants: [
            .init(responseURL: "", statusCode: 200, bodyBytes: 5, responseDate: base, initialAge: 0, freshnessLifetime: 60,
                  etag: nil, lastModified: nil, user: 0xA11CE),
        ])
        var bytes = encoded(signed)
        let roundTripped = try decoded(bytes)
        XCTAssertEqual(roundTripped, signed)
        XCTAssertEqual(roundTripped.variants?.first?.user, 0xA11CE)
        XCTAssertTrue(roundTripped.variants?.first?.hasCredentials == true)
        // The same variant as a summary without the digest: flags 1 (a user), nothing after it.
        XCTAssertEqual(bytes[bytes.count - 9], 9)
        bytes[bytes.count - 9] = 1
        bytes.removeLast(8)
        let unknown = try decoded(bytes)
        XCTAssertNil(unknown.variants, "not known: read from the entry file by the next listing")
        XCTAssertEqual(encoded(unknown).count, unknown.encodedSize, "written again as what it is")
    }

    func testVersionOneAndDamagedSnapshotsAreRejected() {
        var index = DiskIndex()
        index.put(EntryDigest(key: "k"), entry(10, accessed: 1, summary: summary("GET https://a.example/k")))
        let snapshot = index.snapshotData()
        // A snapshot that says version 1 (with a valid checksum) is another format: rebuilt
        var bytes = [UInt8](snapshot)
        bytes[4] = 1
        let contentLength = bytes.count - 8
        let checksum = Data(bytes[0..<contentLength]).withUnsafeBytes { StableHash.hash($0) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes.replaceSubrange(contentLength..., with: $0) }
        XCTAssertThrowsError(try DiskIndex.load(snapshot: Data(bytes), journal: Data())) { error in
            XCTAssertEqual(error as? BinaryDecodingError, .unsupportedVersion(1))
        }
        // Every flipped byte and every truncation of a snapshot with summaries is damage
        bytes = [UInt8](snapshot)
        for position in bytes.indices {
            bytes[position] ^= 0x20
            XCTAssertThrowsError(try DiskIndex.load(snapshot: Data(bytes), journal: Data()), "byte \(position)")
            bytes[position] ^= 0x20
        }
        for length in 0..<snapshot.count {
            XCTAssertThrowsError(try DiskIndex.load(snapshot: snapshot.prefix(length), journal: Data()))
        }
        // And a damaged journal record with a summary is skipped whole
        var journal = DiskIndex.encodeJournal([.put(EntryDigest(key: "j"), entry(5, accessed: 1, summary: summary("GET https://a.example/j")))])
        journal[journal.count / 2] ^= 0x01
        XCTAssertEqual(DiskIndex.decodeJournal(journal).records, [])
    }
}
