import Foundation
import XCTest
@testable import CachingProtocol

/// Each problem the fuzz targets found, pinned down as a deterministic test (the inputs are also
/// in Fuzz/corpus, replayed by FuzzCorpusTests).
final class FuzzFindingsTests: XCTestCase {
    /// `HTTPDate.format` wrote years below 1000 with fewer than four digits; "56" then parsed
    /// back as RFC 850's two-digit year 2056.
    func testFormattedDatesOfEarlyYearsParseBackToTheSameInstant() throws {
        // (The weekday is not checked by the parser; the formatter computes the right one.)
        for (text, year) in [("Thu, 29 Feb 056 23:59:59 GMT", "0056"), ("Mon, 01 Jan 1 00:00:00 GMT", "0001"),
                             ("Sat, 01 Jan 999 12:00:00 GMT", "0999")] {
            let date = try XCTUnwrap(HTTPDate.parse(text), text)
            let formatted = HTTPDate.format(date)
            XCTAssertTrue(formatted.contains(" \(year) "), formatted)
            XCTAssertEqual(HTTPDate.parse(formatted), date, formatted)
        }
    }
}
