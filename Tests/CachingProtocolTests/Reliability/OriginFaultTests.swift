import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An origin that misbehaves on the wire: the connection closes mid-body, the declared length
/// is a lie, the origin stalls past the timeout, or closes without answering. In each case
/// nothing half-received is stored, the app gets an error (or a whole stale copy, where the
/// policy allows one), and the next request goes to the origin again.
///
/// (FoundationTrapsTests.testOriginDyingMidBodyStoresNothingAndTheNextRequestRefetches covers
/// the plain mid-body case; these add the disk, chunked framing, and stored-entry variants.)
final class OriginFaultTests: CachingTestCase {
    private let full = Data.pattern(64_000, seed: 9)
    private let cacheable = [HTTPField("Cache-Control", "max-age=600")]

    /// Loads `request` and returns the error it failed with; fails the test if it succeeded.
    private func loadError(_ request: URLRequest, file: StaticString = #filePath, line: UInt = #line) async -> URLError? {
        do {
            let (data, response) = try await load(request)
            XCTFail("expected an error, got \(response.statusCode) with \(data.count) bytes", file: file, line: line)
            return nil
        } catch let error as URLError {
            return error
        } catch {
            XCTFail("expected a URLError, got \(error)", file: file, line: line)
            return nil
        }
    }

    /// Nothing stored for `path`, in memory or on disk, once writes settle.
    private func assertNothingStored(_ path: String, file: StaticString = #filePath, line: UInt = #line) {
        cache.waitUntilSettled()
        XCTAssertNil(cache.cachedResponse(for: request(path)), "nothing stored for \(path)", file: file, line: line)
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [], "no entry file", file: file, line: line)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: full.prefix(4096)), [], "no body bytes on disk", file: file, line: line)
    }

    func testConnectionClosedMidBodyStoresNothingAndTheNextRequestRefetches() async throws {
        for (path, transfer) in [("/dies-length", OriginResponse.Transfer.contentLength), ("/dies-chunked", .chunked(chunkSize: 4096))] {
            // Given an origin that sends 10,000 of 64,000 bytes and closes
            let full = self.full, cacheable = self.cacheable
            origin.handle(path) { _ in
                OriginResponse(headers: cacheable, body: full, transfer: transfer, fault: .closeAfterBodyBytes(10_000))
            }
            // When the app loads it
            let error = await loadError(request(path))
            // Then it gets an error, and nothing is stored
            XCTAssertNotNil(error, path)
            assertNothingStored(path)
            // And once the origin behaves, the next request goes to it and gets the whole body
            origin.handle(path) { _ in OriginResponse(headers: cacheable, body: full, transfer: transfer) }
            let (data, _) = try await get(path)
            XCTAssertEqual(data, full, path)
            XCTAssertEqual(originMethods(path), ["GET", "GET"], path)
            cache.removeAll()
        }
        XCTAssertEqual(events.filter { $0.outcome == .failed }.count, 2)
    }

    func testContentLengthLargerThanTheBodyIsAnErrorAndNotStored() async throws {
        // Given an origin that declares 100,000 bytes, sends 64,000 and closes
        let full = self.full, cacheable = self.cacheable
        origin.handle("/short") { _ in OriginResponse(headers: cacheable, body: full, fault: .declaredLength(100_000)) }
        // When the app loads it
        let error = await loadError(request("/short"))
        // Then it is an error (the body is incomplete), and nothing is stored
        XCTAssertNotNil(error)
        assertNothingStored("/short")
        // And the next request refetches
        origin.handle("/short") { _ in OriginResponse(headers: cacheable, body: full) }
        let (data, _) = try await get("/short")
        XCTAssertEqual(data, full)
        XCTAssertEqual(originMethods("/short"), ["GET", "GET"])
    }

    func testOriginStallingPastTheTimeoutTimesOutAndStoresNothing() async throws {
        // Given an origin that waits 8 s before answering, and a request with a 1 s timeout
        let full = self.full, cacheable = self.cacheable
        origin.handle("/stall") { _ in OriginResponse(headers: cacheable, body: full, fault: .stall(8)) }
        var slow = request("/stall")
        slow.timeoutInterval = 1
        // When the app loads it
        let started = Date()
        let error = await loadError(slow)
        let elapsed = Date().timeIntervalSince(started)
        // Then it times out after about the request's timeout, not the stall, and stores nothing
        XCTAssertEqual(error?.code, .timedOut, "\(String(describing: error))")
        XCTAssertLessThan(elapsed, 6, "the timeout applies to the upstream request")
        assertNothingStored("/stall")
        // And the next request goes to the origin again
        origin.handle("/stall") { _ in OriginResponse(headers: cacheable, body: full) }
        let (data, _) = try await get("/stall")
        XCTAssertEqual(data, full)
        XCTAssertEqual(originMethods("/stall"), ["GET", "GET"])
    }

    func testStallDuringRevalidationServesTheWholeStoredCopy() async throws {
        // Given a stored response with an ETag, past its window
        let full = self.full
        origin.handle("/etag") { _ in OriginResponse(headers: [HTTPField("ETag", "\"v1\"")], body: full) }
        _ = try await get("/etag")
        clock.advance(by: 86_400 + 1)
        // When the revalidation stalls past the request's timeout
        origin.handle("/etag") { _ in OriginResponse(status: 304, headers: [HTTPField("ETag", "\"v1\"")], fault: .stall(8)) }
        var slow = request("/etag")
        slow.timeoutInterval = 1
        let (data, response) = try await load(slow)
        // Then the stored copy is served whole, marked stale (stale-if-error within the policy's allowance)
        XCTAssertEqual(data, full)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status")?.contains("stale-if-error"), true)
        XCTAssertEqual(originMethods("/etag"), ["GET", "HEAD"])
        XCTAssertEqual(events.last?.outcome, .staleAfterError)
    }

    func testBodyDyingDuringAChangedRevalidationKeepsTheOldEntryWhole() async throws {
        // Given a stored response with an ETag, past its window
        let old = Data.pattern(30_000, seed: 1)
        let new = Data.pattern(60_000, seed: 2)
        origin.handle("/doc") { request in
            OriginResponse(headers: [HTTPField("ETag", "\"v1\"")], body: request.method == "HEAD" ? Data() : old)
        }
        _ = try await get("/doc")
        cache.waitUntilSettled()
        clock.advance(by: 86_400 + 1)
        // When the HEAD says it changed and the GET for the new body dies half-way
        origin.handle("/doc") { request in
            OriginResponse(headers: [HTTPField("ETag", "\"v2\"")], body: new,
                           fault: request.method == "HEAD" ? nil : .closeAfterBodyBytes(20_000))
        }
        let (data, _) = try await get("/doc")
        // Then the app gets the old body whole (stale-if-error), never part of the new one
        XCTAssertEqual(data, old)
        XCTAssertEqual(originMethods("/doc"), ["GET", "HEAD", "GET"])
        // And the old entry is still stored whole, on disk too
        cache.waitUntilSettled()
        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        XCTAssertEqual(reopened.cachedResponse(for: request("/doc"))?.data, old)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: new.prefix(4096)), [])
    }

    func testClosingWithoutAResponseIsAnErrorAndNotStored() async throws {
        let full = self.full, cacheable = self.cacheable
        origin.handle("/silent") { _ in OriginResponse(headers: cacheable, body: full, fault: .closeWithoutResponse) }
        let error = await loadError(request("/silent"))
        XCTAssertNotNil(error)
        assertNothingStored("/silent")
        origin.handle("/silent") { _ in OriginResponse(headers: cacheable, body: full) }
        let (data, _) = try await get("/silent")
        XCTAssertEqual(data, full)
    }
}
