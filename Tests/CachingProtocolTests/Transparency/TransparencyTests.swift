import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// What the app sees is what the origin sent; what the cache must not touch, it does not touch.
final class TransparencyTests: CachingTestCase {
    func testUnsafeMethodsPassThroughUntouchedAndAreNeverStored() async throws {
        let echo: LoopbackOrigin.Handler = { request in
            OriginResponse(status: 201, headers: [HTTPField("Content-Type", "application/octet-stream"),
                                                  HTTPField("Cache-Control", "max-age=3600")],
                           body: request.body)
        }
        origin.handle("/items", echo)
        let payload = Data.pattern(70_000, seed: 9)
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            origin.resetLog()
            for _ in 0..<2 {
                let (data, response) = try await load(request("/items", method: method, headers: ["X-Trace": method], body: payload))
                XCTAssertEqual(response.statusCode, 201, method)
                XCTAssertEqual(data, payload, "\(method): response body byte for byte")
                XCTAssertNil(response.value(forHTTPHeaderField: "Cache-Status"), "\(method) is Foundation's own answer")
            }
            let received = origin.requests(to: "/items")
            XCTAssertEqual(received.map(\.method), [method, method], "\(method) is never served from the cache")
            for request in received {
                XCTAssertEqual(request.body, payload, "\(method): request body arrives intact")
                XCTAssertEqual(request.header("X-Trace"), method)
            }
        }
    }

    func testUploadTaskBodyArrivesIntact() throws {
        origin.handle("/upload") { request in OriginResponse(status: 200, body: request.body) }
        let payload = Data.pattern(40_000, seed: 1)
        let done = expectation(description: "upload")
        let received = Locked<Data?>(nil)
        session.uploadTask(with: request("/upload", method: "POST"), from: payload) { data, _, _ in
            received.withLock { $0 = data }
            done.fulfill()
        }.resume()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(origin.requests(to: "/upload").first?.body, payload)
        XCTAssertEqual(received.withLock { $0 }, payload)
    }

    func testHeadPassesThroughAndIsNotStored() async throws {
        origin.serve("/doc", OriginResource(body: Data.pattern(1000), etag: "\"h\"", lastModified: .none,
                                            headers: [HTTPField("Cache-Control", "max-age=600")]))
        for _ in 0..<2 {
            let (data, response) = try await load(request("/doc", method: "HEAD"))
            XCTAssertEqual(response.statusCode, 200)
            XCTAssertTrue(data.isEmpty)
        }
        XCTAssertEqual(originMethods("/doc"), ["HEAD", "HEAD"])
        _ = try await get("/doc")
        XCTAssertEqual(originMethods("/doc"), ["HEAD", "HEAD", "GET"], "a HEAD never fills the cache for GET")
    }

    func testSuccessfulPostInvalidatesTheStoredGet() async throws {
        let version = Locked(1)
        origin.handle("/profile") { request in
            if request.method == "POST" {
                version.withLock { $0 += 1 }
                return OriginResponse(status: 204)
            }
            return .text("v\(version.withLock { $0 })", headers: [HTTPField("Cache-Control", "max-age=3600")])
        }
        _ = try await get("/profile")
        _ = try await load(request("/profile", method: "POST", body: Data("x".utf8)))
        let (data, _) = try await get("/profile")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "v2")
        XCTAssertEqual(originMethods("/profile"), ["GET", "POST", "GET"])
    }

    func testStatusHeadersAndBodyAreTheOrigins() async throws {
        let body = Data.pattern(2_345)
        origin.handle("/headers") { _ in
            OriginResponse(status: 203, headers: [HTTPField("Content-Type", "application/x-custom"),
                                                  HTTPField("X-Custom", "a value"),
                                                  HTTPField("Cache-Control", "max-age=100")], body: body)
        }
        let (fetched, first) = try await get("/headers")
        let (hit, second) = try await get("/headers")
        for (data, response) in [(fetched, first), (hit, second)] {
            XCTAssertEqual(data, body)
            XCTAssertEqual(response.statusCode, 203)
            XCTAssertEqual(response.value(forHTTPHeaderField: "X-Custom"), "a value")
            XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Type"), "application/x-custom")
            XCTAssertEqual(response.url, origin.url("/headers"))
        }
        XCTAssertEqual(first.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=uri-miss; fwd-status=203; stored; ttl=100")
        XCTAssertEqual(second.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(second.value(forHTTPHeaderField: "Age"), "0", "a stored response states its age (RFC 9111 §5.1)")
        var originHeaders = first.allHeaderFields as? [String: String] ?? [:]
        var hitHeaders = second.allHeaderFields as? [String: String] ?? [:]
        originHeaders["Cache-Status"] = nil
        hitHeaders["Cache-Status"] = nil
        hitHeaders["Age"] = nil
        XCTAssertEqual(hitHeaders, originHeaders, "a hit carries the origin's headers, plus Age and Cache-Status")
    }

    func testReloadIgnoringLocalCacheDataGoesToTheOrigin() async throws {
        let counter = Locked(0)
        origin.handle("/reload") { _ in
            .text("\(counter.withLock { $0 += 1; return $0 })", headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("ETag", "\"r\"")])
        }
        _ = try await get("/reload")
        let (data, _) = try await get("/reload", cachePolicy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "2")
        XCTAssertEqual(originMethods("/reload"), ["GET", "GET"])
        XCTAssertNil(origin.requests(to: "/reload").last?.header("If-None-Match"), "a reload is not a revalidation")
        let (cached, _) = try await get("/reload")
        XCTAssertEqual(String(decoding: cached, as: UTF8.self), "2", "the reloaded answer replaced the stored one")
        XCTAssertEqual(originMethods("/reload"), ["GET", "GET"])
    }

    func testConditionalRequestsFromTheAppPassThroughUntouched() async throws {
        origin.serve("/validated", OriginResource(body: Data("abc".utf8), etag: "\"e\"", lastModified: .none))
        _ = try await get("/validated")
        let (data, response) = try await get("/validated", headers: ["If-None-Match": "\"e\""])
        XCTAssertEqual(response.statusCode, 304, "the app asked for a 304, it gets it")
        XCTAssertTrue(data.isEmpty)
        XCTAssertEqual(originMethods("/validated"), ["GET", "GET"])
        XCTAssertEqual(origin.requests(to: "/validated").last?.header("If-None-Match"), "\"e\"")
    }

    func testQueryStringsAreDistinctEntries() async throws {
        origin.handle("/list") { request in
            .text("items of \(request.query ?? "none")", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        let (first, _) = try await get("/list?page=1")
        let (second, _) = try await get("/list?page=2")
        let (firstAgain, _) = try await get("/list?page=1")
        XCTAssertEqual(String(decoding: first, as: UTF8.self), "items of page=1")
        XCTAssertEqual(String(decoding: second, as: UTF8.self), "items of page=2")
        XCTAssertEqual(firstAgain, first)
        XCTAssertEqual(origin.requests(to: "/list").map(\.target), ["/list?page=1", "/list?page=2"])
    }

    func testTheCacheNeverInterceptsItsOwnTrafficAndAddsNoMarker() async throws {
        // Registered globally as well as injected: the upstream session must still bypass it.
        CachingURLProtocol.register(makeConfiguration())
        installSession(makeConfiguration())
        origin.handle("/once") { _ in .text("one", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        let (data, _) = try await get("/once", headers: ["X-App": "1"])
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "one")
        XCTAssertEqual(originMethods("/once"), ["GET"], "one miss, one origin request")
        let names = Set(try XCTUnwrap(origin.requests(to: "/once").first).headers.map { $0.name.lowercased() })
        let allowed: Set<String> = ["host", "accept", "accept-encoding", "accept-language", "user-agent", "connection", "x-app"]
        XCTAssertTrue(names.isSubset(of: allowed), "unexpected headers upstream: \(names.subtracting(allowed))")
    }

    func testConnectionRefusedReachesTheAppAsAnError() async throws {
        origin.stop()
        do {
            _ = try await get("/anything")
            XCTFail("expected an error")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .cannotConnectToHost)
        }
        XCTAssertEqual(events.last?.outcome, .failed)
    }
}
