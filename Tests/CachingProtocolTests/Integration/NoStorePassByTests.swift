import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// A URL whose response said `no-store` is left to Foundation for ten minutes: the layer could
/// store nothing of it and would only add a miss's cost.
final class NoStorePassByTests: CachingTestCase {
    private func serveNoStore(_ path: String) {
        origin.handle(path) { request in
            .text("private \(request.header("X-N") ?? "")", headers: [HTTPField("Cache-Control", "no-store")])
        }
    }

    private func getNumbered(_ path: String, _ number: Int) async throws -> (String, HTTPURLResponse) {
        let (data, response) = try await get(path, headers: ["X-N": String(number)])
        return (String(decoding: data, as: UTF8.self), response)
    }

    func testAURLThatAnsweredNoStoreIsLeftToFoundationForTenMinutes() async throws {
        serveNoStore("/me")
        let (first, firstResponse) = try await getNumbered("/me", 1)
        XCTAssertEqual(first, "private 1")
        XCTAssertEqual(firstResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=uri-miss; fwd-status=200; detail=noStore")

        let (second, secondResponse) = try await getNumbered("/me", 2)
        XCTAssertEqual(second, "private 2", "the origin's answer, as without the layer")
        XCTAssertNil(secondResponse.value(forHTTPHeaderField: "Cache-Status"), "Foundation loaded it: the layer added nothing")
        XCTAssertEqual(events.count, 1, "only the first GET went through the layer")

        clock.advance(by: NoStoreURLs.lifetime + 1)
        let (third, thirdResponse) = try await getNumbered("/me", 3)
        XCTAssertEqual(third, "private 3")
        XCTAssertNotNil(thirdResponse.value(forHTTPHeaderField: "Cache-Status"), "after ten minutes the layer looks again")
        XCTAssertEqual(events.count, 2)
        XCTAssertEqual(origin.requests(to: "/me").count, 3)
    }

    func testOtherURLsAndOfflineModeAreNotAffected() async throws {
        serveNoStore("/me")
        origin.handle("/feed") { _ in .text("feed", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        _ = try await getNumbered("/me", 1)
        _ = try await get("/feed")
        _ = try await get("/feed")
        XCTAssertEqual(origin.requests(to: "/feed").count, 1, "a stored URL is still answered from the cache")

        // Offline, every GET is the cache's: the learned URL fails as not stored, with no request.
        configuration.isOffline = true
        defer { configuration.isOffline = false }
        do {
            _ = try await getNumbered("/me", 2)
            XCTFail("offline and nothing stored must fail")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .resourceUnavailable)
        }
        XCTAssertEqual(origin.requests(to: "/me").count, 1)
    }

    /// A request whose policy forbids the network never reaches it, whatever the layer learned
    /// of its URL (Foundation on Linux ignores `.returnCacheDataDontLoad` and would load it).
    func testALearnedURLAskedOnlyFromTheCacheNeverReachesTheNetwork() async throws {
        serveNoStore("/me")
        _ = try await getNumbered("/me", 1)
        XCTAssertEqual(origin.requests(to: "/me").count, 1)
        do {
            _ = try await get("/me", headers: ["X-N": "2"], cachePolicy: .returnCacheDataDontLoad)
            XCTFail("nothing is stored for a no-store URL, and the network is forbidden")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .resourceUnavailable)
        }
        XCTAssertEqual(origin.requests(to: "/me").count, 1, "the forbidden request never left")
        XCTAssertEqual(events.last?.outcome, .notInCache)
    }

    func testAStoredResponseIsNeverLearnedAsNoStore() async throws {
        // must-understand with a status the cache understands overrides no-store (RFC 9111
        // §5.2.2.3): stored, so the URL stays the layer's.
        origin.handle("/understood") { _ in
            .text("u", headers: [HTTPField("Cache-Control", "max-age=600, must-understand, no-store")])
        }
        var rfc = makeConfiguration()
        rfc.policy = .rfc9111
        installSession(rfc)
        _ = try await get("/understood")
        let (_, response) = try await get("/understood")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(origin.requests(to: "/understood").count, 1)
    }

    func testTheMemoryIsBounded() {
        var urls = NoStoreURLs()
        let now = Date(timeIntervalSince1970: 1_000_000)
        for number in 0..<NoStoreURLs.capacity { urls.insert("GET http://h/\(number)", at: now) }
        XCTAssertTrue(urls.contains("GET http://h/0", at: now))
        urls.insert("GET http://h/new", at: now)   // full, nothing expired: it starts over
        XCTAssertFalse(urls.contains("GET http://h/0", at: now))
        XCTAssertTrue(urls.contains("GET http://h/new", at: now))
        XCTAssertFalse(urls.contains("GET http://h/new", at: now.addingTimeInterval(NoStoreURLs.lifetime)))
    }
}
