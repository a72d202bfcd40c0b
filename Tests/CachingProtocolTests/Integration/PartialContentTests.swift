import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Partial content with a policy that stores it (RFC 9111 §3.3–3.4, the `.rfc9111` preset): a
/// `206` is stored and answers the ranges it holds, parts of one representation are combined,
/// a stale part is revalidated with a conditional range request, and a part never answers a
/// request for the whole.
final class PartialContentTests: CachingTestCase {
    /// The representation the origin serves: its bytes and strong ETag, which a test may change.
    private let representation = LockedBox((body: Data.pattern(100), etag: "\"v1\"", version: 1))

    override func makeConfiguration() -> CachingConfiguration {
        var configuration = super.makeConfiguration()
        configuration.policy = .rfc9111
        configuration.revalidation = .conditionalGet
        return configuration
    }

    /// An origin that answers ranges as a server does: one byte range gets a `206` with its
    /// `Content-Range`, `If-None-Match` with the current ETag a `304`, anything else the whole
    /// (an empty ETag: none is sent).
    private func serveRanges(_ path: String, cacheControl: String = "max-age=3600") {
        origin.handle(path) { [representation] request in
            let (body, etag, version) = representation.withLock { ($0.body, $0.etag, $0.version) }
            var headers = [HTTPField("Cache-Control", cacheControl), HTTPField("X-Version", String(version))]
            if !etag.isEmpty { headers.append(HTTPField("ETag", etag)) }
            if !etag.isEmpty, request.header("If-None-Match") == etag {
                return OriginResponse(status: 304, headers: headers)
            }
            guard let range = request.header("Range").flatMap(ByteRange.init), let bounds = range.bounds(in: body.count) else {
                return OriginResponse(status: 200, headers: headers, body: body)
            }
            headers.append(HTTPField("Content-Range", "bytes \(bounds.lowerBound)-\(bounds.upperBound)/\(body.count)"))
            return OriginResponse(status: 206, headers: headers, body: body.subdata(in: bounds.lowerBound..<(bounds.upperBound + 1)))
        }
    }

    private func getRange(_ path: String, _ range: String) async throws -> (Data, HTTPURLResponse) {
        try await get(path, headers: ["Range": range])
    }

    private var whole: Data { representation.withLock { $0.body } }

    func testAStoredPartAnswersTheRangesItHoldsAndNothingElse() async throws {
        serveRanges("/part")
        let (first, firstResponse) = try await getRange("/part", "bytes=10-29")
        XCTAssertEqual(firstResponse.statusCode, 206)
        XCTAssertEqual(first, whole.subdata(in: 10..<30))
        XCTAssertEqual(firstResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=uri-miss; fwd-status=206; stored; ttl=3600")

        for (range, bounds) in [("bytes=15-20", 15...20), ("bytes=10-29", 10...29), ("bytes=20-", nil)] as [(String, ClosedRange<Int>?)] {
            let (data, response) = try await getRange("/part", range)
            guard let bounds else {
                XCTAssertEqual(data, whole.subdata(in: 20..<100), "bytes=20- needs bytes the part does not hold: from the origin")
                XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=partial; fwd-status=206; stored; ttl=3600")
                continue
            }
            XCTAssertEqual(response.statusCode, 206, range)
            XCTAssertEqual(data, whole.subdata(in: bounds.lowerBound..<(bounds.upperBound + 1)), range)
            XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Range"), "bytes \(bounds.lowerBound)-\(bounds.upperBound)/100")
            XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Length"), String(bounds.count))
            XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit", range)
        }
        XCTAssertEqual(origin.requests(to: "/part").map { $0.header("Range") }, ["bytes=10-29", "bytes=20-"])

        // 10-29 and 20-99 are parts of one representation (same strong ETag): combined, they
        // hold 10-99.
        let (combined, combinedResponse) = try await getRange("/part", "bytes=12-99")
        XCTAssertEqual(combined, whole.subdata(in: 12..<100))
        XCTAssertEqual(combinedResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")

        // A part never answers a request for the whole.
        let (full, fullResponse) = try await get("/part")
        XCTAssertEqual(fullResponse.statusCode, 200)
        XCTAssertEqual(full, whole)
        XCTAssertEqual(origin.requests(to: "/part").map { $0.header("Range") }, ["bytes=10-29", "bytes=20-", nil])
    }

    func testPartsThatMeetAreCombinedIntoTheWholeResponseOnDisk() async throws {
        serveRanges("/halves")
        _ = try await getRange("/halves", "bytes=50-99")
        _ = try await getRange("/halves", "bytes=0-49")
        let (data, response) = try await get("/halves")
        XCTAssertEqual(response.statusCode, 200, "0-49 and 50-99 of one representation are the whole of it")
        XCTAssertEqual(data, whole)
        XCTAssertNil(response.value(forHTTPHeaderField: "Content-Range"))
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Length"), "100")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(originMethods("/halves"), ["GET", "GET"])

        // What was written to disk: the complete response, read back by a cache that opens the
        // directory anew.
        cache.waitUntilSettled()
        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        let stored = try XCTUnwrap(reopened.cachedResponse(for: request("/halves")))
        XCTAssertEqual((stored.response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(stored.data, whole)
    }

    func testPartsOfDifferentRepresentationsAreNotCombined() async throws {
        serveRanges("/changing")
        _ = try await getRange("/changing", "bytes=0-49")
        representation.withLock { $0 = (Data.pattern(100, seed: 7), "\"v2\"", 2) }
        _ = try await getRange("/changing", "bytes=50-99")
        let (data, response) = try await getRange("/changing", "bytes=0-9")
        XCTAssertEqual(data, whole.subdata(in: 0..<10), "the v1 part was replaced by the v2 part, never mixed with it")
        XCTAssertEqual(response.value(forHTTPHeaderField: "X-Version"), "2")
        XCTAssertEqual(origin.requests(to: "/changing").count, 3)
        let (full, _) = try await get("/changing")
        XCTAssertEqual(full, whole)
        XCTAssertEqual(origin.requests(to: "/changing").count, 4)
    }

    func testWeakValidatorsDoNotCombineParts() async throws {
        representation.withLock { $0.etag = "W/\"weak\"" }
        serveRanges("/weak")
        _ = try await getRange("/weak", "bytes=0-49")
        _ = try await getRange("/weak", "bytes=50-99")
        _ = try await getRange("/weak", "bytes=0-9")
        XCTAssertEqual(origin.requests(to: "/weak").map { $0.header("Range") }, ["bytes=0-49", "bytes=50-99", "bytes=0-9"],
                       "a weak ETag does not say the bytes are the same: the second part replaced the first")
        _ = try await getRange("/weak", "bytes=5-9")
        XCTAssertEqual(origin.requests(to: "/weak").count, 3, "the newest part answers what it holds")
    }

    func testAPartWhoseContentRangeDoesNotDescribeItsBodyIsDeliveredAndNotStored() async throws {
        // The shape of cache-tests' partial-store-partial-* responses: six bytes announced, five sent.
        origin.handle("/inconsistent") { _ in
            OriginResponse(status: 206, headers: [HTTPField("Cache-Control", "max-age=3600"), HTTPField("Content-Range", "bytes 4-9/10")],
                           body: Data("01234".utf8))
        }
        for _ in 0..<2 {
            let (data, response) = try await getRange("/inconsistent", "bytes=-5")
            XCTAssertEqual(response.statusCode, 206)
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "01234", "handed on as the origin sent it")
            XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=uri-miss; fwd-status=206; detail=partialContent")
        }
        XCTAssertEqual(origin.requests(to: "/inconsistent").count, 2)
        XCTAssertNil(cache.cachedResponse(for: request("/inconsistent", headers: ["Range": "bytes=-5"])))
    }

    func testAStalePartIsRevalidatedWithAConditionalRangeRequestAnd304UpdatesItsHeaders() async throws {
        serveRanges("/stale", cacheControl: "max-age=60")
        _ = try await getRange("/stale", "bytes=0-49")
        clock.advance(by: 120)
        representation.withLock { $0.version = 2 }   // same bytes and ETag, new header value
        let (data, response) = try await getRange("/stale", "bytes=10-19")
        XCTAssertEqual(response.statusCode, 206)
        XCTAssertEqual(data, whole.subdata(in: 10..<20))
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Range"), "bytes 10-19/100")
        XCTAssertEqual(response.value(forHTTPHeaderField: "X-Version"), "2", "the 304's fields replace the stored ones")
        let revalidation = try XCTUnwrap(origin.requests(to: "/stale").last)
        XCTAssertEqual(revalidation.method, "GET")
        XCTAssertEqual(revalidation.header("Range"), "bytes=10-19")
        XCTAssertEqual(revalidation.header("If-None-Match"), "\"v1\"")

        // Fresh again for 60 s, with the new header stored.
        clock.advance(by: 30)
        let (again, againResponse) = try await getRange("/stale", "bytes=40-49")
        XCTAssertEqual(again, whole.subdata(in: 40..<50))
        XCTAssertEqual(againResponse.value(forHTTPHeaderField: "X-Version"), "2")
        XCTAssertEqual(againResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(origin.requests(to: "/stale").count, 2)
    }

    func testAStalePartAnswersItsRangesWhenTheOriginCannotBeReached() async throws {
        representation.withLock { $0.etag = "" }   // no validator: a stale part can only be refetched
        serveRanges("/offline", cacheControl: "max-age=60")
        _ = try await getRange("/offline", "bytes=20-39")
        clock.advance(by: 120)
        origin.stop()
        let (data, response) = try await getRange("/offline", "bytes=25-29")
        XCTAssertEqual(response.statusCode, 206, "the RFC preset serves a disconnected cache's stale response (§4.2.4)")
        XCTAssertEqual(data, whole.subdata(in: 25..<30))
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Range"), "bytes 25-29/100")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=stale; ttl=-60; detail=stale-if-error")
        do {
            _ = try await getRange("/offline", "bytes=50-59")
            XCTFail("a range the stale part does not hold cannot be answered without the origin")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .cannotConnectToHost)
        }
    }

    func testAStoredCompleteResponseIsNotReplacedByAPartOfItself() async throws {
        serveRanges("/complete")
        _ = try await get("/complete")
        // A reload goes to the origin; its 206 has the stored response's strong ETag.
        let (part, partResponse) = try await get("/complete", headers: ["Range": "bytes=0-9"], cachePolicy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(part, whole.subdata(in: 0..<10))
        XCTAssertEqual(partResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=request; fwd-status=206; detail=partialContent")
        let (data, response) = try await get("/complete", cachePolicy: .returnCacheDataDontLoad)
        XCTAssertEqual(response.statusCode, 200, "the whole is still stored")
        XCTAssertEqual(data, whole)
        XCTAssertEqual(origin.requests(to: "/complete").map { $0.header("Range") }, [nil, "bytes=0-9"])
    }

    func testTheHeuristicPresetLeavesARangeItCannotAnswerToFoundation() async throws {
        installSession(CachingConfiguration(cache: cache, now: clock.read))
        serveRanges("/heuristic")
        var rangeRequest = request("/heuristic")
        rangeRequest.setValue("bytes=0-9", forHTTPHeaderField: "Range")
        XCTAssertFalse(CachingURLProtocol.canInit(with: rangeRequest), "the heuristic preset stores no 206")
        configuration.policy = .rfc9111
        installSession(configuration)
        XCTAssertTrue(CachingURLProtocol.canInit(with: rangeRequest), "the RFC preset does")
    }
}
