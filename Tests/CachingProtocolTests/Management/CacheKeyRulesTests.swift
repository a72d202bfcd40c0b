import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Key rules (`CachingRule.ignoringQueryItems`, `CachingRule.cacheKey`): what the origin sees,
/// what is answered from the cache, what is on disk, and what the `URLCache` face finds.
final class CacheKeyRulesTests: CachingTestCase {
    private static let signature = ["X-Amz-Signature", "X-Amz-Date", "X-Amz-Expires"]

    private func install(_ rules: [CachingRule]) {
        var configuration = makeConfiguration()
        configuration.rules = rules
        installSession(configuration)
    }

    private func localhostURL(_ pathAndQuery: String) -> URL {
        URL(string: "http://localhost:\(origin.port)\(pathAndQuery)")!
    }

    private func text(_ url: URL, headers: [String: String] = [:]) async throws -> (String, HTTPURLResponse) {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await load(request)
        return (String(decoding: data, as: UTF8.self), response)
    }

    /// A photo with an ETag, fresh for ten minutes, answering its validator with a 304.
    private func servePhoto() {
        origin.handle("/photo.jpg") { request in
            if request.header("If-None-Match") == "\"p1\"" {
                return OriginResponse(status: 304, headers: [HTTPField("ETag", "\"p1\"")])
            }
            return .text("photo \(request.query ?? "")", headers: [HTTPField("ETag", "\"p1\""), HTTPField("Cache-Control", "max-age=600")])
        }
    }

    func testSignedURLsReachTheOriginOnceAndTheOriginSeesEachRealURL() async throws {
        // Given a rule that leaves the signature out of the keys of 127.0.0.1 (not of localhost)
        install([.ignoringQueryItems(Self.signature, host: "127.0.0.1")])
        servePhoto()
        let first = "/photo.jpg?id=7&X-Amz-Signature=aaa&X-Amz-Date=1&X-Amz-Expires=60"
        let second = "/photo.jpg?id=7&X-Amz-Date=2&X-Amz-Signature=bbb"
        let third = "/photo.jpg?id=7&X-Amz-Signature=ccc&X-Amz-Date=3"

        // When the photo is asked for with one signature, then another
        let (fetched, _) = try await text(origin.url(first))
        let (hit, hitResponse) = try await text(origin.url(second))
        // Then the origin saw the first URL only, and the second was a hit on the same body,
        // whose Cache-Status names the key
        let key = "GET http://127.0.0.1:\(origin.port)/photo.jpg?id=7"
        XCTAssertEqual(origin.requests(to: "/photo.jpg").map(\.target), [first])
        XCTAssertEqual(hit, fetched)
        XCTAssertEqual(hitResponse.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit; key=\"\(key)\"")
        XCTAssertEqual(events.map(\.key), [key, key])

        // When it is stale and asked for with a third signature
        clock.advance(by: 700)
        let (revalidated, revalidatedResponse) = try await text(origin.url(third))
        // Then the revalidation carried the third URL as it was asked for
        XCTAssertEqual(origin.requests(to: "/photo.jpg").map(\.target), [first, third])
        XCTAssertEqual(origin.requests(to: "/photo.jpg").map(\.method), ["GET", "HEAD"])
        XCTAssertEqual(revalidated, fetched)
        XCTAssertTrue(revalidatedResponse.value(forHTTPHeaderField: "Cache-Status")?.contains("key=\"\(key)\"") == true)

        // And another id is another resource, and on localhost (no rule) every signature is a miss
        _ = try await text(origin.url("/photo.jpg?id=8&X-Amz-Signature=aaa"))
        let (_, plain) = try await text(localhostURL(first))
        _ = try await text(localhostURL(second))
        XCTAssertEqual(origin.requests(to: "/photo.jpg").count, 5)
        XCTAssertEqual(plain.value(forHTTPHeaderField: "Cache-Status")?.contains("key="), false)
        let usage = cache.usageByHost()
        XCTAssertEqual(usage["127.0.0.1"]?.entryCount, 2, "id=7 and id=8")
        XCTAssertEqual(usage["localhost"]?.entryCount, 2, "one per signature")
    }

    func testAnAppFunctionMakesTheKey() async throws {
        // Given a rule under /img that drops the width parameter
        install([.cacheKey(pathPrefix: "/img") { url in
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            components.queryItems = components.queryItems?.filter { $0.name != "w" }
            return components.url!
        }])
        for path in ["/img/a", "/other"] {
            origin.handle(path) { request in .text("\(request.target)", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        }
        // When each is asked for in two widths
        let (small, _) = try await text(origin.url("/img/a?w=100"))
        let (large, _) = try await text(origin.url("/img/a?w=200"))
        _ = try await text(origin.url("/other?w=100"))
        _ = try await text(origin.url("/other?w=200"))
        // Then the image reached the origin once, the path without the rule twice
        XCTAssertEqual(origin.requests(to: "/img/a").map(\.target), ["/img/a?w=100"])
        XCTAssertEqual(large, small)
        XCTAssertEqual(origin.requests(to: "/other").count, 2)
    }

    func testTwoUsersUnderOneNormalisedKeyStayApart() async throws {
        // Given a rule ignoring `sig`, and answers the origin lets a cache keep per user
        install([.ignoringQueryItems(["sig"])])
        origin.handle("/inbox") { request in
            .text("for \(request.header("Authorization") ?? "nobody")", headers: [HTTPField("Cache-Control", "public, max-age=600")])
        }
        let alice = ["Authorization": "Bearer alice"]
        let bob = ["Authorization": "Bearer bob"]
        // When Alice and Bob each ask twice, with a new signature every time
        let (aliceFirst, _) = try await text(origin.url("/inbox?sig=1"), headers: alice)
        let (bobFirst, _) = try await text(origin.url("/inbox?sig=2"), headers: bob)
        let (aliceAgain, aliceHit) = try await text(origin.url("/inbox?sig=3"), headers: alice)
        let (bobAgain, _) = try await text(origin.url("/inbox?sig=4"), headers: bob)
        // Then each got their own answer, the origin was asked once per user, and the repeats were hits
        XCTAssertEqual([aliceFirst, aliceAgain], ["for Bearer alice", "for Bearer alice"])
        XCTAssertEqual([bobFirst, bobAgain], ["for Bearer bob", "for Bearer bob"])
        XCTAssertEqual(origin.requests(to: "/inbox").map(\.target), ["/inbox?sig=1", "/inbox?sig=2"])
        XCTAssertTrue(aliceHit.value(forHTTPHeaderField: "Cache-Status")?.hasPrefix("CachingProtocol; hit") == true)
        XCTAssertEqual(events.map(\.outcome), [.fetched, .fetched, .hit, .hit])
        // And anonymous requests get neither user's answer
        let (anonymous, _) = try await text(origin.url("/inbox?sig=5"))
        XCTAssertEqual(anonymous, "for nobody")
        XCTAssertEqual(origin.requests(to: "/inbox").count, 3)
    }

    func testRemovalAndTheURLCacheFaceNormaliseTheSameWay() async throws {
        // Given a photo stored under a signed URL
        install([.ignoringQueryItems(Self.signature, host: "127.0.0.1")])
        servePhoto()
        _ = try await text(origin.url("/photo.jpg?id=1&X-Amz-Signature=a"))
        // Then the URLCache face finds it under another signature, and not under another id
        let other = URLRequest(url: origin.url("/photo.jpg?id=1&X-Amz-Signature=z"))
        XCTAssertEqual(cache.cachedResponse(for: other).map { String(decoding: $0.data, as: UTF8.self) },
                       "photo id=1&X-Amz-Signature=a")
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: origin.url("/photo.jpg?id=2&X-Amz-Signature=a"))))

        // When it is purged by a third signature
        cache.purge(url: origin.url("/photo.jpg?id=1&X-Amz-Signature=b"))
        // Then nothing is stored for it, and the next request goes to the origin
        XCTAssertNil(cache.cachedResponse(for: other))
        _ = try await text(origin.url("/photo.jpg?id=1&X-Amz-Signature=c"))
        XCTAssertEqual(origin.requests(to: "/photo.jpg").count, 2)

        // When removeCachedResponse is given yet another signature
        cache.removeCachedResponse(for: URLRequest(url: origin.url("/photo.jpg?id=1&X-Amz-Signature=d")))
        XCTAssertNil(cache.cachedResponse(for: other))

        // And a POST the origin accepts, to a signed URL, drops what another signature stored
        origin.handle("/doc") { request in
            request.method == "POST" ? .text("accepted") : .text("doc", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        _ = try await text(origin.url("/doc?X-Amz-Signature=1"))
        _ = try await load(request("/doc?X-Amz-Signature=2", method: "POST", body: Data("x".utf8)))
        _ = try await text(origin.url("/doc?X-Amz-Signature=3"))
        XCTAssertEqual(origin.requests(to: "/doc").map(\.method), ["GET", "POST", "GET"])
    }

    func testQueryItemsAreRemovedFromKeysExactly() {
        let names: Set<String> = ["sig", "t"]
        let cases: [(String, String)] = [
            ("GET https://a.example/p?sig=1", "GET https://a.example/p"),
            ("GET https://a.example/p?x=1&sig=2&y=3", "GET https://a.example/p?x=1&y=3"),
            ("GET https://a.example/p?%73ig=1&y=3", "GET https://a.example/p?y=3"),   // percent-encoded name
            ("GET https://a.example/p?SIG=1&t", "GET https://a.example/p?SIG=1"),      // case-sensitive; no value
            ("GET https://a.example/p?signal=1", "GET https://a.example/p?signal=1"),  // a longer name is another item
            ("GET https://a.example/p", "GET https://a.example/p"),
        ]
        for (key, expected) in cases {
            XCTAssertEqual(CacheKey.removingQueryItems(named: names, from: key), expected, key)
        }
    }
}
