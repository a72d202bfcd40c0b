import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The whole streaming path (upstream → exchange → protocol → client) with Apple's rule that
/// bodies stream, run on Linux through a delegate task, which corelibs hands every chunk.
final class StreamingDeliveryTests: CachingTestCase {
    /// The protocol with Apple's streaming rule and Linux's others (Linux's client cannot take a
    /// redirect report, and needs the delivery lock).
    final class StreamingProtocol: CachingURLProtocol {
        override class var deliveryRules: ClientDelivery.Rules {
            var rules = ClientDelivery.Rules.platform
            rules.streamsBodies = true
            return rules
        }
    }

    private func load(_ path: String, with protocolClass: AnyClass) throws -> (Data, chunks: Int, cacheStatus: String?) {
        let collector = DelegateCollector()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [protocolClass] + (configuration.protocolClasses ?? [])
        let streaming = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        defer { streaming.finishTasksAndInvalidate() }
        streaming.dataTask(with: origin.url(path)).resume()
        wait(for: [collector.done], timeout: 10)
        let (data, response, error, chunks) = collector.result
        if let error { throw error }
        return (data, chunks, (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"))
    }

    func testAFetchedBodyReachesTheClientInPiecesAndIsStoredWhole() throws {
        let body = Data.pattern(64 << 10, seed: 3)
        origin.handle("/stream") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body,
                           transfer: .chunked(chunkSize: 4 << 10))
        }
        let (streamed, chunks, status) = try load("/stream", with: StreamingProtocol.self)
        XCTAssertEqual(streamed, body, "every piece, in order")
        XCTAssertGreaterThan(chunks, 1, "handed on as it arrived, not in one didLoad")
        XCTAssertEqual(status, "CachingProtocol; fwd=uri-miss; fwd-status=200; stored; ttl=600")

        let (hit, hitChunks, hitStatus) = try load("/stream", with: StreamingProtocol.self)
        XCTAssertEqual(hit, body, "stored whole, byte for byte")
        XCTAssertEqual(hitChunks, 1, "a hit is one piece")
        XCTAssertEqual(hitStatus, "CachingProtocol; hit")
        XCTAssertEqual(originMethods("/stream"), ["GET"])
    }

    func testAnErrorAStaleCopyReplacesIsNotStreamed() throws {
        // No validator: the stale entry is refetched with a GET, whose 503 must not be streamed.
        let resource = OriginResource(body: Data.pattern(8 << 10), etag: nil, lastModified: .none,
                                      headers: [HTTPField("Cache-Control", "max-age=60")])
        origin.serve("/flaky", resource)
        _ = try load("/flaky", with: StreamingProtocol.self)
        clock.advance(by: 120)
        origin.removeRoute("/flaky")
        origin.handle("/flaky") { _ in
            OriginResponse(status: 503, body: Data(repeating: 0x45, count: 8 << 10), transfer: .chunked(chunkSize: 1 << 10))
        }
        let (served, chunks, status) = try load("/flaky", with: StreamingProtocol.self)
        XCTAssertEqual(served, Data.pattern(8 << 10), "the stale copy, not the error's body")
        XCTAssertEqual(chunks, 1)
        XCTAssertTrue(status?.contains("detail=stale-if-error") == true, status ?? "-")
    }

    /// Linux's rules: a task with a delegate gets the body as it arrives (corelibs hands its
    /// delegate every `didLoad`), as without the layer; a completion handler gets it whole, in one
    /// `didLoad` (corelibs keeps only the last piece for it, Docs/foundation-facts.md, L10).
    func testLinuxRulesStreamToADelegateTaskAndHandACompletionHandlerTheWholeBody() throws {
        origin.handle("/whole") { _ in
            OriginResponse(status: 200, body: Data.pattern(32 << 10), transfer: .chunked(chunkSize: 2 << 10))
        }
        let (data, chunks, _) = try load("/whole", with: CachingURLProtocol.self)
        XCTAssertEqual(data, Data.pattern(32 << 10))
        XCTAssertGreaterThan(chunks, 1, "handed on as it arrived")
        origin.resetLog()
        let (whole, _) = try loadWithCompletionHandler(URLRequest(url: origin.url("/whole?again")))
        XCTAssertEqual(whole, Data.pattern(32 << 10), "every byte, though it came in many pieces")
    }
}
