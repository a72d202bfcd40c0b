#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation fact A7 on an Apple platform: every `didLoad` piece reaches every kind of task —
/// completion handlers and `async` calls as well as delegates — so the layer streams a body to
/// the client as it arrives (on Linux only the last piece would reach them, fact L10).
final class StreamingClaimTests: CachingTestCase {
    private let body = Data.pattern(512 << 10, seed: 7)

    /// A 512 KiB body in 8 KiB chunks, no-store, so that every load is a fetch streamed through the layer.
    private func servePieces() {
        origin.handle("/pieces") { [body] _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "no-store")], body: body,
                           transfer: .chunked(chunkSize: 8 << 10))
        }
    }

    /// A completion handler and a delegate each get the whole body, byte for byte; the delegate
    /// in pieces (the layer streamed it).
    func testA7_everyPieceReachesCompletionHandlersAndDelegates() throws {
        servePieces()
        let (handled, handledResponse) = try loadWithCompletionHandler(request("/pieces?by=handler"))
        XCTAssertEqual(handled, body, "completion handler: every piece")
        XCTAssertNotNil(handledResponse.value(forHTTPHeaderField: "Cache-Status"), "through the layer")

        let (delegated, _, chunks) = try loadWithDelegate(request("/pieces?by=delegate"))
        XCTAssertEqual(delegated, body, "delegate: every piece")
        XCTAssertGreaterThan(chunks, 1, "handed on as it arrived")
    }

    /// `async data(for:)` gets the whole body, byte for byte.
    func testA7_everyPieceReachesAsyncCalls() async throws {
        servePieces()
        let (awaited, response) = try await get("/pieces?by=async")
        XCTAssertEqual(awaited, body, "async data(for:): every piece")
        XCTAssertNotNil(response.value(forHTTPHeaderField: "Cache-Status"), "through the layer")
    }

    /// `bytes(for:)` gets the first bytes while the origin is still sending (it sends a chunk,
    /// then pauses, ten times): the layer passed them on as they came.
    func testA7_asyncBytesGetTheFirstBytesBeforeTheOriginHasSentTheRest() async throws {
        let body = Data.pattern(40 << 10, seed: 9)
        origin.handle("/paced") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "no-store")], body: body,
                           transfer: .paced(chunkSize: 4 << 10, interval: 0.1))
        }
        let (bytes, response) = try await session.bytes(for: request("/paced"))
        XCTAssertNotNil((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"), "through the layer")
        var received = Data()
        var sentWhenFirstArrived: Int?
        for try await byte in bytes {
            if sentWhenFirstArrived == nil { sentWhenFirstArrived = origin.bodyBytesSent }
            received.append(byte)
        }
        XCTAssertEqual(received, body)
        XCTAssertLessThan(try XCTUnwrap(sentWhenFirstArrived), body.count, "the first bytes came before the origin sent the last")
    }
}
#endif
