import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// RFC 9111 §4.4: an unsafe request the origin accepted invalidates the stored response for its
/// URL, and for its answer's `Location` and `Content-Location` on the same origin; one it refused,
/// or never answered, invalidates nothing. Bodies of every kind arrive intact.
final class UnsafeInvalidationTests: CachingTestCase {
    private let payload = Data.pattern(70_000, seed: 4)

    /// Serves `path`: GETs get a fresh, versioned text; other methods get `status` (and bump the
    /// version when it is below 400), echoing the request body, with `headers`.
    private func serveResource(_ path: String, status: Int = 200, headers: [HTTPField] = []) {
        let version = Locked(1)
        origin.handle(path) { request in
            if request.method == "GET" {
                return .text("v\(version.withLock { $0 })", headers: [HTTPField("Cache-Control", "max-age=3600")])
            }
            if status < 400 { version.withLock { $0 += 1 } }
            return OriginResponse(status: status, headers: headers, body: request.body)
        }
    }

    /// Whether an unsafe request with a body goes to Foundation's loader rather than through the
    /// layer: with Apple's loader rules (`CachingURLProtocol.leavesBodyToFoundation`), which drops
    /// what is stored for its URL before it leaves — a later miss, never a wrong answer — and
    /// never sees the answer (nor its `Location`).
    private var bodiesGoToFoundation: Bool { CachingURLProtocol.everyBodyIsAStream }

    /// The body the app gets for a GET of `path`, and whether it came from the cache.
    private func current(_ path: String) async throws -> (String, fromCache: Bool) {
        let (data, response) = try await get(path)
        return (String(decoding: data, as: UTF8.self),
                response.value(forHTTPHeaderField: "Cache-Status")?.hasSuffix("; hit") == true)
    }

    func testAnAcceptedPostWithABodyInvalidatesAndTheBodyArrivesIntact() async throws {
        serveResource("/profile")
        _ = try await current("/profile")
        let (data, response) = try await load(request("/profile", method: "POST", headers: ["X-Trace": "t"], body: payload))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(data, payload, "the origin's answer, byte for byte")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), bodiesGoToFoundation ? nil : "CachingProtocol; fwd=method; fwd-status=200")
        let post = try XCTUnwrap(origin.requests(to: "/profile").last)
        XCTAssertEqual([post.method, post.header("X-Trace")], ["POST", "t"])
        XCTAssertEqual(post.body, payload, "the request body arrives intact")
        let after = try await current("/profile")
        XCTAssertEqual(after.0, "v2")
        XCTAssertFalse(after.fromCache)
        XCTAssertEqual(originMethods("/profile"), ["GET", "POST", "GET"])
    }

    func testARefusedPostInvalidatesNothing() async throws {
        serveResource("/profile", status: 500)
        _ = try await current("/profile")
        let (_, response) = try await load(request("/profile", method: "POST", body: payload))
        XCTAssertEqual(response.statusCode, 500, "the origin's error reaches the app")
        let after = try await current("/profile")
        XCTAssertEqual(after.0, "v1")
        if bodiesGoToFoundation {
            XCTAssertFalse(after.fromCache, "dropped before the POST left")
            XCTAssertEqual(originMethods("/profile"), ["GET", "POST", "GET"])
        } else {
            XCTAssertTrue(after.fromCache, "an error status leaves the stored response")
            XCTAssertEqual(originMethods("/profile"), ["GET", "POST"])
        }
    }

    /// The origin is gone (connection refused): the app gets the error, the store stays. (An
    /// origin that closes a reused connection without answering a POST makes corelibs wait for
    /// the request timeout, with or without the layer: not used here.)
    func testAPostThatGetsNoAnswerInvalidatesNothing() async throws {
        serveResource("/profile")
        _ = try await current("/profile")
        origin.stop()
        do {
            _ = try await load(request("/profile", method: "POST", body: payload))
            XCTFail("the origin is gone")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .cannotConnectToHost)
        }
        guard !bodiesGoToFoundation else {
            // Dropped before the POST left: nothing is stored, and the origin is gone.
            let stored = storedEntry("/profile")
            return XCTAssertNil(stored, "dropped before the POST left")
        }
        let after = try await current("/profile")
        XCTAssertEqual(after.0, "v1", "the app still gets what is stored")
        XCTAssertTrue(after.fromCache)
    }

    func testAPutWithABodyStreamArrivesIntactAndInvalidates() async throws {
        serveResource("/doc")
        _ = try await current("/doc")
        var put = request("/doc", method: "PUT")
        put.httpBodyStream = InputStream(data: payload)
        put.setValue(String(payload.count), forHTTPHeaderField: "Content-Length")
        let (_, response) = try await load(put)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(origin.requests(to: "/doc").last?.body, payload)
        let after = try await current("/doc")
        XCTAssertEqual(after.0, "v2")
        XCTAssertFalse(after.fromCache)
    }

    func testUploadTasksFromDataAndFromAFileArriveIntactAndInvalidate() async throws {
        serveResource("/upload")
        let file = directory.appendingPathComponent("upload.bin")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try payload.write(to: file)
        for fromFile in [false, true] {
            origin.resetLog()
            _ = try await current("/upload")
            let done = expectation(description: "upload")
            let received = Locked<Data?>(nil)
            let completion: @Sendable (Data?, URLResponse?, Error?) -> Void = { data, _, _ in
                received.withLock { $0 = data }
                done.fulfill()
            }
            if fromFile {
                session.uploadTask(with: request("/upload", method: "POST"), fromFile: file, completionHandler: completion).resume()
            } else {
                session.uploadTask(with: request("/upload", method: "POST"), from: payload, completionHandler: completion).resume()
            }
            await fulfillment(of: [done], timeout: 10)
            XCTAssertEqual(origin.requests(to: "/upload").first(where: { $0.method == "POST" })?.body, payload,
                           fromFile ? "from a file" : "from data")
            XCTAssertEqual(received.withLock { $0 }, payload)
            let after = try await current("/upload")
            XCTAssertFalse(after.fromCache, "invalidated")
        }
    }

    func testLocationAndContentLocationOnTheSameOriginAreInvalidated() async throws {
        let other = "http://localhost:\(origin.port)/items/other"
        serveResource("/items", status: 201, headers: [HTTPField("Location", "/items/7"),
                                                       HTTPField("Content-Location", "list")])
        serveResource("/items/7")
        serveResource("/list")
        // Given the collection, the created item's URL and the Content-Location target stored
        for path in ["/items", "/items/7", "/list"] { _ = try await current(path) }
        // When a POST to the collection is accepted (without a body, which Apple's loader rules
        // would leave to Foundation: the layer would never see the answer's fields)
        let (_, response) = try await load(request("/items", method: "POST"))
        XCTAssertEqual(response.statusCode, 201)
        // Then all three are fetched again ("list" resolves against /items to /list)
        for path in ["/items", "/items/7", "/list"] {
            let after = try await current(path)
            XCTAssertFalse(after.fromCache, path)
        }
        // And a Location on another origin (localhost is not 127.0.0.1) is left alone
        serveResource("/items/cross", status: 201, headers: [HTTPField("Location", other)])
        serveResource("/items/other")
        _ = try await current("/items/cross")
        let otherURL = try XCTUnwrap(URL(string: other))
        _ = try await session.data(from: otherURL)
        _ = try await load(request("/items/cross", method: "POST"))
        let (_, otherResponse) = try await session.data(from: otherURL)
        XCTAssertEqual((otherResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
    }

    func testAnUnsafeRequestForAURLWithNothingStoredPassesByTheLayer() async throws {
        serveResource("/fresh-post")
        cache.waitUntilSettled()   // the disk index is in: until then anything may be stored
        var post = request("/fresh-post", method: "POST", body: payload)
        post.setValue("1", forHTTPHeaderField: "X-Trace")
        XCTAssertFalse(CachingURLProtocol.canInit(with: post), "nothing stored: Foundation sends it")
        let (data, response) = try await load(post)
        XCTAssertEqual(data, payload)
        XCTAssertNil(response.value(forHTTPHeaderField: "Cache-Status"))
        _ = try await current("/fresh-post")
        if bodiesGoToFoundation {
            XCTAssertFalse(CachingURLProtocol.canInit(with: post), "stored now, but its body is Foundation's to send")
            XCTAssertNil(storedEntry("/fresh-post"), "and what is stored is dropped before it leaves")
        } else {
            XCTAssertTrue(CachingURLProtocol.canInit(with: post), "stored now: the layer takes it")
        }
    }

    func testADeleteInvalidates() async throws {
        serveResource("/gone")
        _ = try await current("/gone")
        let (_, response) = try await load(request("/gone", method: "DELETE"))
        XCTAssertEqual(response.statusCode, 200)
        let after = try await current("/gone")
        XCTAssertEqual(after.0, "v2")
        XCTAssertEqual(originMethods("/gone"), ["GET", "DELETE", "GET"])
    }
}
