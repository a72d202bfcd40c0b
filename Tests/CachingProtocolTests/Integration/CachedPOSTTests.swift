import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Read-only POSTs a rule declares cacheable (`CachingRule.cachePOST`): keyed by URL, body and
/// `Content-Type`, stored and reused like GETs; every other POST as before.
final class CachedPOSTTests: CachingTestCase {
    override func makeConfiguration() -> CachingConfiguration {
        var configuration = super.makeConfiguration()
        configuration.rules = [.cachePOST(pathPrefix: "/graphql")]
        return configuration
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        for path in ["/graphql", "/mutate"] {
            origin.handle(path) { request in
                OriginResponse(status: 200, headers: [HTTPField("Content-Type", "application/json"),
                                                      HTTPField("Cache-Control", "max-age=60"), HTTPField("ETag", "\"r1\"")],
                               body: Data("answer to \(String(decoding: request.body, as: UTF8.self))".utf8))
            }
        }
    }

    private func post(_ path: String, _ body: String, contentType: String = "application/json",
                      headers: [String: String] = [:]) async throws -> (String, HTTPURLResponse) {
        var allHeaders = headers
        allHeaders["Content-Type"] = contentType
        let (data, response) = try await load(request(path, method: "POST", headers: allHeaders, body: Data(body.utf8)))
        return (String(decoding: data, as: UTF8.self), response)
    }

    private var originBodies: [String] {
        origin.requests.map { "\($0.method) \($0.path) \(String(decoding: $0.body, as: UTF8.self))" }
    }

    func testTheSameQueryReachesTheOriginOnceAndAnotherQueryAgain() async throws {
        let query = #"{"query":"{ feed { id } }"}"#
        let (first, firstResponse) = try await post("/graphql", query)
        XCTAssertEqual(first, "answer to \(query)")
        XCTAssertEqual(firstResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=60")
        let (second, secondResponse) = try await post("/graphql", query)
        XCTAssertEqual(second, first, "byte for byte")
        XCTAssertEqual(secondResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(originBodies, ["POST /graphql \(query)"], "the origin saw the one POST, body and all")

        let other = #"{"query":"{ me { name } }"}"#
        let (third, _) = try await post("/graphql", other)
        XCTAssertEqual(third, "answer to \(other)")
        _ = try await post("/graphql", query, contentType: "application/graphql")
        XCTAssertEqual(originBodies, ["POST /graphql \(query)", "POST /graphql \(other)", "POST /graphql \(query)"],
                       "another body, or the same body as another Content-Type, is another query")
    }

    func testAStaleQueryIsRevalidatedWithAConditionalPOST() async throws {
        let query = #"{"query":"{ feed { id } }"}"#
        _ = try await post("/graphql", query)
        clock.advance(by: 120)
        origin.removeRoute("/graphql")
        origin.handle("/graphql") { request in
            guard request.header("If-None-Match") == "\"r1\"" else { return .text("changed") }
            return OriginResponse(status: 304, headers: [HTTPField("ETag", "\"r1\""), HTTPField("Cache-Control", "max-age=60")])
        }
        let (answer, response) = try await post("/graphql", query)
        XCTAssertEqual(answer, "answer to \(query)", "the stored answer, confirmed")
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(origin.requests.map { "\($0.method) \($0.header("If-None-Match") ?? "-") \(String(decoding: $0.body, as: UTF8.self))" },
                       ["POST - \(query)", "POST \"r1\" \(query)"], "a conditional POST with the same body, never a HEAD")
    }

    func testPOSTsWithoutARuleAreNeverAnsweredFromTheCache() async throws {
        // Until the disk index is read, any URL may have something stored, so an unsafe request
        // goes through the layer (to drop it on success); wait for the index to be read.
        cache.waitUntilSettled()
        let (first, firstResponse) = try await post("/mutate", "like 1")
        let (second, _) = try await post("/mutate", "like 1")
        XCTAssertEqual([first, second], ["answer to like 1", "answer to like 1"])
        XCTAssertNil(firstResponse.value(forHTTPHeaderField: "Cache-Status"), "left to Foundation: nothing stored for its URL")
        XCTAssertEqual(originMethods("/mutate"), ["POST", "POST"], "both reached the origin")

        // With a GET of its URL stored, such a POST goes through the layer, still to the origin,
        // and its success drops the stored GET (RFC 9111 §4.4), as before.
        _ = try await get("/mutate")
        let (third, thirdResponse) = try await post("/mutate", "like 1")
        XCTAssertEqual(third, "answer to like 1")
        if CachingURLProtocol.everyBodyIsAStream {
            // Apple's loader rules: a body only Foundation's loader can send again is left to it,
            // and what is stored for its URL is dropped before it leaves.
            XCTAssertNil(thirdResponse.value(forHTTPHeaderField: "Cache-Status"), "left to Foundation")
        } else {
            XCTAssertEqual(thirdResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; fwd=method; fwd-status=200")
        }
        _ = try await get("/mutate")
        XCTAssertEqual(originMethods("/mutate"), ["POST", "POST", "GET", "POST", "GET"])
    }

    func testUsersCredentialedQueriesStayApart() async throws {
        var configuration = makeConfiguration()
        configuration.policy.storesCredentialedResponses = true
        installSession(configuration)
        let query = #"{"query":"{ me { name } }"}"#
        _ = try await post("/graphql", query, headers: ["Authorization": "Bearer alice"])
        _ = try await post("/graphql", query, headers: ["Authorization": "Bearer bob"])
        _ = try await post("/graphql", query, headers: ["Authorization": "Bearer alice"])
        XCTAssertEqual(origin.requests.map { $0.header("Authorization") ?? "-" }, ["Bearer alice", "Bearer bob"],
                       "each user's answer is theirs; alice's second query was hers from the cache")
    }
}
