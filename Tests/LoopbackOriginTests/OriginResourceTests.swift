import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

@testable import LoopbackOrigin

final class OriginResourceTests: XCTestCase {
    private let start = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT

    private func makeOrigin(_ resource: OriginResource, clock: ManualClock) throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin(now: clock.read)
        origin.serve("/r", resource)
        return origin
    }

    func testGetAnswers200WithValidatorsAndExtraHeaders() async throws {
        let clock = ManualClock(start)
        let resource = OriginResource(
            body: Data("{\"a\":1}".utf8), contentType: "application/json",
            headers: [HTTPField("Cache-Control", "max-age=60"), HTTPField("Vary", "Accept")])
        let origin = try makeOrigin(resource, clock: clock)

        let (body, response) = try await fetch(makeSession(), origin.url("/r?x=1"))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(body, Data("{\"a\":1}".utf8))
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Type"), "application/json")
        let etag = try XCTUnwrap(response.value(forHTTPHeaderField: "ETag"))
        XCTAssertTrue(etag.hasPrefix("\"") && etag.hasSuffix("\""), etag)
        XCTAssertEqual(etag, resource.etag)
        XCTAssertEqual(response.value(forHTTPHeaderField: "Last-Modified"), "Tue, 14 Nov 2023 22:13:20 GMT")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Date"), "Tue, 14 Nov 2023 22:13:20 GMT")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Control"), "max-age=60")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Vary"), "Accept")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Length"), "7")
    }

    func testAutomaticETagFollowsTheBody() {
        let a = OriginResource(body: Data("same".utf8))
        let b = OriginResource(body: Data("same".utf8))
        let c = OriginResource(body: Data("other".utf8))
        XCTAssertEqual(a.etag, b.etag)
        XCTAssertNotEqual(a.etag, c.etag)
        XCTAssertNil(OriginResource(body: Data(), etag: .none).etag)
        XCTAssertNil(OriginResource(body: Data(), contentType: "text/plain", etag: nil).etag)
        XCTAssertEqual(OriginResource(body: Data(), etag: .fixed("\"f\"")).etag, "\"f\"")
        XCTAssertNotNil(OriginResource(body: Data()).lastModified, "stamped by the clock by default")
        XCTAssertEqual(OriginResource(body: Data(), etag: "W/\"v1\"").etag, "W/\"v1\"")
        XCTAssertNil(OriginResource(body: Data(), lastModified: .none).lastModified)
        XCTAssertEqual(OriginResource(body: Data(), lastModified: start).lastModified, start)
    }

    func testHeadHasTheHeadersOfGetButNoBody() throws {
        let resource = OriginResource(body: Data("twelve bytes".utf8), contentType: "text/plain")
        let origin = try makeOrigin(resource, clock: ManualClock(start))
        let connection = try RawConnection(port: origin.port)
        try connection.send("HEAD /r HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try connection.readResponse(forHead: true)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "12")
        XCTAssertEqual(head.header("Content-Type"), "text/plain")
        XCTAssertEqual(head.header("ETag"), resource.etag)
        XCTAssertNotNil(head.header("Last-Modified"))
        // No body followed the HEAD response: the next response parses cleanly.
        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "twelve bytes")
        XCTAssertEqual(origin.bodyBytesSent, 12)
    }

    func testIfNoneMatchThatMatchesGets304() async throws {
        let resource = OriginResource(
            body: Data("body".utf8), contentType: "text/plain", etag: "\"v1\"",
            headers: [HTTPField("Cache-Control", "max-age=5"), HTTPField("Vary", "Accept"), HTTPField("X-Other", "1")])
        let origin = try makeOrigin(resource, clock: ManualClock(start))
        let connection = try RawConnection(port: origin.port)

        for condition in ["\"v1\"", "W/\"v1\"", "\"v0\", \"v1\"", "\"a,b\" , W/\"v1\"", "*"] {
            try connection.send("GET /r HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(condition)\r\n\r\n")
            let response = try connection.readResponse()
            XCTAssertEqual(response.status, 304, condition)
            XCTAssertEqual(response.header("ETag"), "\"v1\"")
            XCTAssertNotNil(response.header("Last-Modified"))
            XCTAssertNotNil(response.header("Date"))
            XCTAssertEqual(response.header("Cache-Control"), "max-age=5")
            XCTAssertEqual(response.header("Vary"), "Accept")
            XCTAssertNil(response.header("X-Other"))
            XCTAssertNil(response.header("Content-Type"))
            XCTAssertNil(response.header("Content-Length"))
        }
        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v2\", \"v11\"\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "body")
        XCTAssertEqual(origin.bodyBytesSent, 4)

        // A 304 through URLSession too (no URL cache: the app sees the 304 itself).
        let (body, response) = try await fetch(makeSession(), origin.url("/r"), headers: ["If-None-Match": "\"v1\""])
        XCTAssertEqual(response.statusCode, 304)
        XCTAssertTrue(body.isEmpty)

        // HEAD is conditional too.
        try connection.send("HEAD /r HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v1\"\r\n\r\n")
        XCTAssertEqual(try connection.readResponse(forHead: true).status, 304)
    }

    func testIfModifiedSinceAtOrAfterLastModifiedGets304() throws {
        let lastModified = Date(timeIntervalSince1970: 784_111_777.75)  // Sun, 06 Nov 1994 08:49:37 GMT
        let resource = OriginResource(body: Data("b".utf8), lastModified: lastModified)
        let origin = try makeOrigin(resource, clock: ManualClock(start))
        let connection = try RawConnection(port: origin.port)

        func status(_ headers: String) throws -> Int {
            try connection.send("GET /r HTTP/1.1\r\nHost: x\r\n\(headers)\r\n")
            return try connection.readResponse().status
        }
        XCTAssertEqual(try status("If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"), 304)
        XCTAssertEqual(try status("If-Modified-Since: Sun, 06 Nov 1994 09:00:00 GMT\r\n"), 304)
        XCTAssertEqual(try status("If-Modified-Since: Sunday, 06-Nov-94 08:49:37 GMT\r\n"), 304)
        XCTAssertEqual(try status("If-Modified-Since: Sun, 06 Nov 1994 08:49:36 GMT\r\n"), 200)
        XCTAssertEqual(try status("If-Modified-Since: not a date\r\n"), 200)
        // If-None-Match takes precedence: a non-matching tag means 200 whatever the date says.
        XCTAssertEqual(try status("If-None-Match: \"nope\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 09:00:00 GMT\r\n"), 200)

        let noDate = OriginResource(body: Data("b".utf8), lastModified: .none)
        origin.serve("/nodate", noDate)
        try connection.send("GET /nodate HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 2094 09:00:00 GMT\r\n\r\n")
        let response = try connection.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertNil(response.header("Last-Modified"))
    }

    func testUpdateChangesTheETagAndLastModifiedSoOldValidatorsGet200() throws {
        let clock = ManualClock(start)
        let resource = OriginResource(body: Data("v1".utf8), contentType: "text/plain")
        let origin = try makeOrigin(resource, clock: clock)
        let connection = try RawConnection(port: origin.port)
        let oldETag = try XCTUnwrap(resource.etag)
        let oldDate = IMFFixdate.string(from: start)

        clock.advance(by: 3_600)
        resource.update(body: Data("v2".utf8))
        XCTAssertNotEqual(resource.etag, oldETag)
        XCTAssertEqual(resource.lastModified, clock.now)

        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(oldETag)\r\n\r\n")
        let changed = try connection.readResponse()
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(changed.text, "v2")
        XCTAssertEqual(changed.header("ETag"), resource.etag)
        XCTAssertEqual(changed.header("Last-Modified"), IMFFixdate.string(from: clock.now))

        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: \(oldDate)\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().status, 200)

        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(resource.etag!)\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().status, 304)

        // A fixed ETag survives an update; setters change validators and headers.
        resource.setETag("\"fixed\"")
        resource.update(body: Data("v3".utf8), lastModified: start)
        XCTAssertEqual(resource.etag, "\"fixed\"")
        XCTAssertEqual(resource.lastModified, start)
        resource.setHeaders([HTTPField("Cache-Control", "no-cache")])
        resource.setContentType("application/json")
        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
        let latest = try connection.readResponse()
        XCTAssertEqual(latest.header("ETag"), "\"fixed\"")
        XCTAssertEqual(latest.header("Cache-Control"), "no-cache")
        XCTAssertEqual(latest.header("Content-Type"), "application/json")
        XCTAssertEqual(latest.text, "v3")
    }

    func testOtherMethodsGet405UnlessAHandlerTakesThem() throws {
        let resource = OriginResource(body: Data("b".utf8))
        let origin = try makeOrigin(resource, clock: ManualClock(start))
        let connection = try RawConnection(port: origin.port)
        try connection.send("POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        let refused = try connection.readResponse()
        XCTAssertEqual(refused.status, 405)
        XCTAssertEqual(refused.header("Allow"), "GET, HEAD")

        origin.handle("/r") { request in .text("posted \(request.body.count)", status: 201) }
        try connection.send("POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        let accepted = try connection.readResponse()
        XCTAssertEqual(accepted.status, 201)
        XCTAssertEqual(accepted.text, "posted 2")
        // GET still goes to the resource.
        try connection.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "b")
    }

    func testConditionalParsing() {
        XCTAssertEqual(OriginResource.parseEntityTags("\"a\", W/\"b\",\"c,d\" ,*"), ["\"a\"", "W/\"b\"", "\"c,d\"", "*"])
        XCTAssertEqual(OriginResource.parseEntityTags("bare"), ["\"bare\""])
        let request = OriginRequest(method: "GET", target: "/r", headers: [HTTPField("If-None-Match", "W/\"x\"")])
        XCTAssertTrue(OriginResource.isNotModified(request, etag: "\"x\"", lastModified: nil))
        XCTAssertFalse(OriginResource.isNotModified(request, etag: nil, lastModified: nil))
    }
}
