import Foundation
import XCTest
@testable import CachingProtocol

/// What an entry is charged against a tier's capacity, with the numbers computed here from the
/// entry's parts, never from `cost` itself: the other capacity tests derive their limits from
/// `cost`, so a `cost` that left something out would pass them all.
final class EntryCostTests: LoaderRulesTestCase {
    private let url = "https://example.com/cost"
    /// Each field as on the wire: name, ": ", value, CRLF.
    private static func wireBytes(_ fields: [(String, String)]) -> Int {
        fields.reduce(0) { $0 + $1.0.utf8.count + 2 + $1.1.utf8.count + 2 }
    }

    private static func entry(url: String, body: Data, headers: [(String, String)]) -> CacheEntry {
        CacheEntry(responseURL: url, statusCode: 200, headers: HTTPHeaders(headers.map { HTTPHeaders.Field(name: $0.0, value: $0.1) }),
                   body: body, requestDate: Date(timeIntervalSince1970: 0), responseDate: Date(timeIntervalSince1970: 0),
                   initialAge: 0, freshnessLifetime: 60, varyFields: [], partition: .anonymous, userInfo: nil)
    }

    func testAnEntryIsChargedItsBodyHeaderFieldsURLAndAFixedAllowance() {
        let headers = [("Content-Type", "text/plain"), ("ETag", "\"v1\""), ("X-Long", String(repeating: "h", count: 3_000))]
        let entry = Self.entry(url: url, body: Data(count: 1_000), headers: headers)
        XCTAssertEqual(Self.wireBytes(headers), 26 + 12 + 3_010)
        XCTAssertEqual(entry.cost, 1_000 + 3_048 + url.utf8.count + 128, "body, header fields, URL and 128 bytes for the rest")

        // Each header byte counts: a longer value costs exactly its extra bytes.
        let longer = Self.entry(url: url, body: Data(count: 1_000), headers: headers + [("Set-Cookie", "a=1")])
        XCTAssertEqual(longer.cost - entry.cost, "Set-Cookie".utf8.count + 2 + 3 + 2)

        let key = "GET \(url)"
        XCTAssertEqual(CacheRecord(key: key, variants: [entry, longer]).cost, key.utf8.count + entry.cost + longer.cost)
    }

    /// Records whose header fields are twenty times their body, and a memory tier whose capacity
    /// holds three of them counted as this test counts them: it holds three, never ten.
    func testHeaderFieldsCountAgainstTheMemoryTiersCapacity() {
        let headers = [("X-Big", String(repeating: "x", count: 2_000))]
        func record(_ index: Int) -> CacheRecord {
            let url = "https://example.com/k\(index)"
            return CacheRecord(key: "k\(index)", variants: [Self.entry(url: url, body: Data(count: 100), headers: headers)])
        }
        let size = "k0".utf8.count + 100 + Self.wireBytes(headers) + "https://example.com/k0".utf8.count + 128
        let store = MemoryStore(capacity: 3 * size + 100, maximumEntryFraction: 1)
        for index in 0..<10 { store.store(record(index)) }
        XCTAssertEqual(store.statistics.entryCount, 3)
        XCTAssertEqual(store.statistics.byteCount, 3 * size)
        XCTAssertEqual((7..<10).filter { store.record(forKey: "k\($0)") != nil }.count, 3, "the three stored last are kept")
    }
}
