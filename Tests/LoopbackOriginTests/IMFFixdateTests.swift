import Foundation
import XCTest

@testable import LoopbackOrigin

final class IMFFixdateTests: XCTestCase {
    func testFormatsIMFFixdate() {
        XCTAssertEqual(IMFFixdate.string(from: Date(timeIntervalSince1970: 784_111_777)), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(IMFFixdate.string(from: Date(timeIntervalSince1970: 784_111_777.999)), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(IMFFixdate.string(from: Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(IMFFixdate.string(from: Date(timeIntervalSince1970: 951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT")
        XCTAssertEqual(IMFFixdate.string(from: Date(timeIntervalSince1970: -1)), "Wed, 31 Dec 1969 23:59:59 GMT")
    }

    func testParsesAllThreeHTTPDateForms() {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        XCTAssertEqual(IMFFixdate.date(from: "Sun, 06 Nov 1994 08:49:37 GMT"), expected)
        XCTAssertEqual(IMFFixdate.date(from: "Sunday, 06-Nov-94 08:49:37 GMT"), expected)
        XCTAssertEqual(IMFFixdate.date(from: "Sun Nov  6 08:49:37 1994"), expected)
        XCTAssertNil(IMFFixdate.date(from: "yesterday"))
        XCTAssertNil(IMFFixdate.date(from: "Sun, 06 Nov 1994"))
    }

    func testRoundTripsManyDates() {
        var seconds: TimeInterval = 0
        while seconds < 4_102_444_800 {  // up to 2100
            let date = Date(timeIntervalSince1970: seconds)
            XCTAssertEqual(IMFFixdate.date(from: IMFFixdate.string(from: date)), date)
            seconds += 86_400 * 17 + 3_607
        }
    }
}
