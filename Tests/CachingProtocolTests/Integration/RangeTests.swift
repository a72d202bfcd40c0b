import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A request for one byte range is answered from a complete stored response (RFC 9111 §3.4);
/// any other range request reaches the origin as it was.
final class RangeTests: CachingTestCase {
    private let body = Data("01234567890".utf8)

    private func serveComplete(_ path: String, headers: [HTTPField] = [HTTPField("Cache-Control", "max-age=3600")]) {
        origin.handle(path) { [body] request in
            if let range = request.header("Range") {
                return OriginResponse(status: 206, headers: [HTTPField("Content-Range", "origin \(range)")], body: Data("from origin".utf8))
            }
            return OriginResponse(status: 200, headers: headers, body: body)
        }
    }

    func testRangesAreAnsweredFromTheStoredResponse() async throws {
        serveComplete("/digits")
        _ = try await get("/digits")
        for (range, text, contentRange) in [("bytes=0-1", "01", "bytes 0-1/11"), ("bytes=1-", "1234567890", "bytes 1-10/11"),
                                            ("bytes=-1", "0", "bytes 10-10/11")] {
            let (data, response) = try await get("/digits", headers: ["Range": range])
            XCTAssertEqual(response.statusCode, 206, range)
            XCTAssertEqual(String(decoding: data, as: UTF8.self), text, range)
            XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Range"), contentRange)
            XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Length"), String(data.count))
            XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
            XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Control"), "max-age=3600", "the stored fields")
        }
        XCTAssertEqual(originMethods("/digits"), ["GET"], "one fetch, every range from the store")
    }

    func testRangesTheStoreCannotAnswerReachTheOrigin() async throws {
        serveComplete("/digits")
        let (_, first) = try await get("/digits", headers: ["Range": "bytes=0-1"])
        XCTAssertEqual(first.statusCode, 206, "nothing stored yet: Foundation sent it")
        XCTAssertNil(first.value(forHTTPHeaderField: "Cache-Status"))
        _ = try await get("/digits")
        for headers in [["Range": "bytes=0-1,3-4"], ["Range": "bytes=20-"], ["Range": "bytes=0-1", "If-Range": "\"x\""]] {
            let (data, response) = try await get("/digits", headers: headers)
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "from origin", "\(headers)")
            XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Range"), "origin \(headers["Range"]!)")
        }
        XCTAssertEqual(originMethods("/digits").count, 5)
        let (data, _) = try await get("/digits")
        XCTAssertEqual(data, body, "the stored complete response is untouched")
        XCTAssertEqual(originMethods("/digits").count, 5)
    }

    func testAStaleStoredResponseDoesNotAnswerARange() async throws {
        serveComplete("/short", headers: [HTTPField("Cache-Control", "max-age=60")])
        _ = try await get("/short")
        clock.advance(by: 120)
        let (data, response) = try await get("/short", headers: ["Range": "bytes=0-1"])
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "from origin")
        XCTAssertEqual(response.statusCode, 206)
        XCTAssertEqual(originMethods("/short"), ["GET", "GET"])
    }

    /// The protocol took the range while the stored response was fresh, and it went stale before
    /// the load started: the request is forwarded as it was, and its answer is not stored.
    func testARangeTakenWhileFreshIsForwardedWhenItWentStale() async throws {
        serveComplete("/short", headers: [HTTPField("Cache-Control", "max-age=60")])
        _ = try await get("/short")
        var rangeRequest = request("/short")
        rangeRequest.setValue("bytes=0-1", forHTTPHeaderField: "Range")
        XCTAssertTrue(CachingURLProtocol.canInit(with: rangeRequest), "fresh: the store answers it")
        clock.advance(by: 120)
        let client = RecordingClient()
        let loading = CachingURLProtocol(request: rangeRequest, cachedResponse: nil, client: client)
        loading.startLoading()
        await fulfillment(of: [client.ended], timeout: 10)
        XCTAssertEqual(client.calls, ["response 206", "data 11", "finish"])
        XCTAssertEqual(origin.requests(to: "/short").last?.header("Range"), "bytes=0-1")
        let (data, _) = try await get("/short", cachePolicy: .returnCacheDataDontLoad)
        XCTAssertEqual(data, body, "the stored complete response is still the one stored")
    }
}
