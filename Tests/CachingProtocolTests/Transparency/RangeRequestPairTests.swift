import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// With a policy that stores partial content, a range request the store cannot answer goes
/// through the layer instead of passing it by: the app sees what it sees without the layer.
final class RangeRequestPairTests: CachingTestCase {
    func testARangeRequestThatIsRedirectedLooksTheSameThroughALayerThatStoresParts() async throws {
        let body = Data.pattern(64)
        origin.handle("/media/latest") { _ in OriginResponse(status: 302, headers: [HTTPField("Location", "/media/v7")]) }
        origin.handle("/media/v7") { request in
            guard let bounds = request.header("Range").flatMap(ByteRange.init)?.bounds(in: body.count) else {
                return OriginResponse(status: 200, body: body)
            }
            return OriginResponse(status: 206, headers: [
                HTTPField("Cache-Control", "max-age=600"), HTTPField("ETag", "\"v7\""),
                HTTPField("Content-Range", "bytes \(bounds.lowerBound)-\(bounds.upperBound)/\(body.count)"),
            ], body: body.subdata(in: bounds.lowerBound..<(bounds.upperBound + 1)))
        }
        var caching = makeConfiguration()
        caching.policy = .rfc9111
        var rangeRequest = URLRequest(url: origin.url("/media/latest"))
        rangeRequest.setValue("bytes=8-15", forHTTPHeaderField: "Range")
        let pair = TransparencyPair(origin: origin, loggedHeaders: ["Range"])
        let (without, with) = try await pair.observe(caching: caching) { session, delegate in
            let response = await runDelegateTask(rangeRequest, in: session, delegate: delegate)
            return "\(response?.statusCode ?? 0) \(response?.url?.path ?? "-") "
                + "\(response?.value(forHTTPHeaderField: "Content-Range") ?? "-") \(delegate.received == body.subdata(in: 8..<16))"
        }
        XCTAssertEqual(without.result, "206 /media/v7 bytes 8-15/64 true", "\(without)")
        XCTAssertTrue(without.delegateCalls.contains { $0.hasPrefix("redirect 302") }, "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 2, "the range's 302 and the target's 206 went through the layer")
    }
}
