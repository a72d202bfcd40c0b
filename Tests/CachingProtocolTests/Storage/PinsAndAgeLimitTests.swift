import XCTest
@testable import CachingProtocol

/// What pins and the age limit change in `DiskLedger`, driven without a disk, and the pins
/// file's format.
final class PinsAndAgeLimitTests: LoaderRulesTestCase {
    private let base = Date(timeIntervalSinceReferenceDate: 700_000_000)

    /// Stages `key` and writes it as the worker does, with a file of `size` bytes, used at `seconds`.
    private func storeAndWrite(_ state: inout DiskLedger, _ key: String, size: Int = 100, at seconds: Double,
                               storedAt stored: Double? = nil) {
        let record = Fixtures.record(key: key, responseDate: base.addingTimeInterval(stored ?? seconds))
        _ = state.stage(record, cost: record.cost, at: base.addingTimeInterval(seconds))
        guard let job = state.beginWrite(EntryDigest(key: key)) else { return XCTFail("not staged") }
        _ = state.markWritten(EntryDigest(key: key), sequence: job.sequence, fileSize: size,
                              latestResponseDate: job.record.latestResponseDate)
    }

    func testEvictionSkipsPinnedEntriesUntilTheyAloneDoNotFit() {
        // Given a (least recently used, pinned), b and c, 100 bytes each
        var state = DiskLedger()
        for (number, key) in ["a", "b", "c"].enumerated() { storeAndWrite(&state, key, at: Double(number)) }
        state.pins.install(["a"], from: nil)
        // When they must fit in 200 bytes
        let victims = state.evict(toFit: 200, metadataBytes: 0, removalRecordSize: 0)
        // Then b goes, not a
        XCTAssertEqual(victims, [EntryDigest(key: "b")])
        XCTAssertTrue(state.isIndexed(EntryDigest(key: "a")))
        // And when pinned entries alone do not fit, the least recently used of them goes too
        state.pins.install(["a", "c"], from: nil)
        XCTAssertEqual(state.evict(toFit: 150, metadataBytes: 0, removalRecordSize: 0), [EntryDigest(key: "a")])
        XCTAssertEqual(state.bytes(of: [EntryDigest(key: "a"), EntryDigest(key: "c")]), 100)
    }

    func testPinsKeepTheirOrderOnceEach() {
        var pins = Pins()
        pins.install(["x", "y"], from: nil)
        XCTAssertEqual(pins.keys(adding: ["z", "x", "z"], removing: ["y"]), ["x", "z"])
        XCTAssertTrue(pins.contains(EntryDigest(key: "y")))
        XCTAssertFalse(pins.contains(EntryDigest(key: "z")))
    }

    func testThePinsFileRoundTripsAndDamageIsRejected() throws {
        let keys = ["GET https://example.com/a", "GET https://example.com/ü?x=1", ""]
        let data = Pins.encode(keys)
        XCTAssertEqual(try Pins.decode(data), keys)
        XCTAssertEqual(try Pins.decode(Pins.encode([])), [])
        var bytes = [UInt8](data)
        for position in bytes.indices {
            bytes[position] ^= 0x08
            XCTAssertThrowsError(try Pins.decode(Data(bytes)), "byte \(position)")
            bytes[position] ^= 0x08
        }
        for length in 0..<data.count {
            XCTAssertThrowsError(try Pins.decode(data.prefix(length)))
        }
    }
}

extension PinsAndAgeLimitTests {
    func testExpiryRemovesRecordsStoredBeforeTheCutoffExceptPinnedOnes() {
        // Given a and b stored at 0, c at 100, with a pinned
        var state = DiskLedger()
        storeAndWrite(&state, "a", at: 0)
        storeAndWrite(&state, "b", at: 1, storedAt: 0)
        storeAndWrite(&state, "c", at: 2, storedAt: 100)
        state.pins.install(["a"], from: nil)
        // When records stored before 50 expire
        let doomed = state.expire(storedBefore: base.addingTimeInterval(50))
        // Then only b goes
        XCTAssertEqual(doomed, [EntryDigest(key: "b")])
        XCTAssertEqual(Set(state.index.entries.map(\.key)), [EntryDigest(key: "a"), EntryDigest(key: "c")])
        // And an incomplete index expires nothing
        var loading = DiskLedger()
        loading.beginOpening()
        XCTAssertEqual(loading.expire(storedBefore: .distantFuture), [])
        // And the sweep interval is a tenth of the limit, between a minute and an hour
        XCTAssertEqual([60, 3_600, 86_400 * 30].map(DiskLedger.expiryInterval(for:)), [60, 360, 3_600])
    }
}
