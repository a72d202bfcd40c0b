import XCTest
@testable import CachingProtocol

final class StableHashTests: LoaderRulesTestCase {
    /// Reference values of the XXH64 specification, so the file names of a cache written by one
    /// build are the file names another build looks for.
    func testMatchesReferenceVectors() {
        XCTAssertEqual(StableHash.hash(""), 0xEF46_DB37_51D8_E999)
        XCTAssertEqual(StableHash.hash("a"), 0xD24E_C4F1_A98C_6E5B)
        XCTAssertEqual(StableHash.hash("abc"), 0x44BC_2CF5_AD77_0999)
    }

    func testLongInputsUseEveryLane() {
        let text = String(repeating: "0123456789abcdef", count: 40)
        XCTAssertEqual(StableHash.hash(text), 0x58A5_A357_BA28_14C3)
        XCTAssertEqual(StableHash.hash(text, seed: 1), 0xA3F2_0D8F_8D8C_44B1)
        XCTAssertNotEqual(StableHash.hash(text), StableHash.hash(text + "x"))
    }

    func testDigestIsThirtyTwoHexDigits() {
        let digest = StableHash.hexDigest128("GET https://example.com/?q=1")
        XCTAssertEqual(digest.count, 32)
        XCTAssertTrue(digest.allSatisfy { $0.isHexDigit && !$0.isUppercase })
    }

    func testStreamingOverAnySplitEqualsHashingTheWholeInput() {
        // Given inputs around the 32-byte stripe and split at random points
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 7, 31, 32, 33, 63, 64, 65, 100, 1000, 4099] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = bytes.withUnsafeBytes { StableHash.hash($0) }
            for _ in 0..<20 {
                var cuts = (0..<Int.random(in: 0...5)).map { _ in Int.random(in: 0...length) }.sorted()
                cuts = [0] + cuts + [length]
                // When each piece is combined in order
                var streaming = StableHash.Streaming()
                for (start, end) in zip(cuts, cuts.dropFirst()) {
                    bytes[start..<end].withUnsafeBytes { streaming.combine($0) }
                }
                // Then the result is the one-shot hash
                XCTAssertEqual(streaming.finalize(), expected, "length \(length), cuts \(cuts)")
            }
        }
        var seeded = StableHash.Streaming(seed: 1)
        seeded.combine(Data(String(repeating: "0123456789abcdef", count: 40).utf8))
        XCTAssertEqual(seeded.finalize(), 0xA3F2_0D8F_8D8C_44B1)
    }
}
