import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Streaming clients without and with the layer: an origin sends a body piece by piece, with
/// gaps, to a task of the session's delegate and to the delegate of an `async` call. Each piece
/// reaches the delegate as the origin sends it — the first before the origin sent the last — the
/// same pieces in the same order as without the layer, and a storable body is stored whole on
/// the side. (Before this round, through the layer, such a delegate got the whole body in one
/// piece at its end.)
final class DelegateStreamingPairTests: CachingTestCase {
    /// Four JSON payloads, one per line (NDJSON), each sent as one chunk 0.15 s after the one before.
    private let payloads = (1...4).map { Data("{\"event\":\($0),\"text\":\"payload \($0)\"}\n".utf8) }
    private var stream: Data { payloads.reduce(Data(), +) }
    private let bytes = Data("abcdefgh".utf8)

    override func setUpWithError() throws {
        try super.setUpWithError()
        let body = stream
        let pieceSize = payloads[0].count
        origin.handle("/events") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Content-Type", "application/x-ndjson"), HTTPField("Cache-Control", "max-age=600")],
                           body: body, transfer: .paced(chunkSize: pieceSize, interval: 0.15))
        }
        let bytes = self.bytes
        origin.handle("/bytes") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: bytes,
                           transfer: .paced(chunkSize: 1, interval: 0.05))
        }
    }

    private var pair: TransparencyPair { TransparencyPair(origin: origin) }

    /// A delegate that records every piece and notes, on the first, whether the origin had sent
    /// the whole body by then (it must not have: the piece came as it was sent); `cancels`: it
    /// then cancels the task.
    private func streamingDelegate(total: Int, cancels: Bool = false, notes: Locked<[String]>) -> AppDelegate {
        let origin = self.origin!
        return AppDelegate(recordsBody: true) { task in
            let sent = origin.bodyBytesSent
            notes.withLock { $0.append("first piece when the origin had sent \(sent < total ? "part" : "all") of the body") }
            if cancels { task.cancel() }
        }
    }

    private struct Event: Decodable {
        let event: Int
        let text: String
    }

    /// Decodes each piece on its own, as a streaming client does: glued payloads fail.
    private func decodeEachPiece(_ pieces: [Data]) -> String {
        let events = pieces.compactMap { try? JSONDecoder().decode(Event.self, from: $0) }
        return "\(events.count) of \(pieces.count) pieces decode: events \(events.map(\.event))"
    }

    func testADelegateGetsEachPieceAsTheOriginSendsIt() async throws {
        let notes = Locked<[String]>([])
        let (without, with) = try await pair.observe(delegate: { streamingDelegate(total: stream.count, notes: notes) },
                                                     caching: configuration) { session, delegate in
            _ = await runDelegateTask(URLRequest(url: origin.url("/events")), in: session, delegate: delegate)
            return "\(delegate.received == stream ? "the whole stream" : "other bytes"); \(decodeEachPiece(delegate.pieces))"
        }
        XCTAssertEqual(without.delegateCalls, ["response 200"] + payloads.map { "data \($0.count)" } + ["complete ok"], "\(without)")
        XCTAssertEqual(without.result, "the whole stream; 4 of 4 pieces decode: events [1, 2, 3, 4]")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 1)
        XCTAssertEqual(notes.withLock { $0 }, Array(repeating: "first piece when the origin had sent part of the body", count: 2))
        XCTAssertEqual(storedBody("/events"), stream, "stored whole on the side")
    }

    /// One byte at a time: every byte reaches the delegate before the completion.
    func testAByteByByteStreamGetsEachByteBeforeItsCompletion() async throws {
        let notes = Locked<[String]>([])
        let (without, with) = try await pair.observe(delegate: { streamingDelegate(total: bytes.count, notes: notes) },
                                                     caching: configuration) { session, delegate in
            _ = await runDelegateTask(URLRequest(url: origin.url("/bytes")), in: session, delegate: delegate)
            return String(decoding: delegate.received, as: UTF8.self)
        }
        XCTAssertEqual(without.delegateCalls, ["response 200"] + Array(repeating: "data 1", count: 8) + ["complete ok"], "\(without)")
        XCTAssertEqual(without.result, "abcdefgh")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 1)
        XCTAssertEqual(notes.withLock { $0 }, Array(repeating: "first piece when the origin had sent part of the body", count: 2))
    }

    /// The app cancels the stream after its first piece: it ends there, with the cancellation
    /// error; the origin's response is abandoned; nothing is stored.
    func testAStreamTheAppCancelsAfterItsFirstPieceEndsThere() async throws {
        let notes = Locked<[String]>([])
        let (without, with) = try await pair.observe(delegate: { streamingDelegate(total: stream.count, cancels: true, notes: notes) },
                                                     caching: configuration) { session, delegate in
            let origin = self.origin!
            let total = stream.count
            notes.withLock { $0.append("through the layer: \(session.layerTakes(origin.url("/events")))") }
            _ = await runDelegateTask(URLRequest(url: origin.url("/events")), in: session, delegate: delegate)
            await fulfillment(of: [expectation(until: "the origin's response ended") {
                origin.responsesAbandoned > 0 || origin.bodyBytesSent >= total
            }], timeout: 10)
            let stored = storedBody("/events")
            return "\(decodeEachPiece(delegate.pieces)); origin: \(origin.responsesAbandoned) abandoned, "
                + "\(origin.bodyBytesSent < total ? "part" : "all") of the body sent; stored: \(stored.map { "\($0.count) bytes" } ?? "nothing")"
        }
        XCTAssertEqual(without.delegateCalls, ["response 200", "data \(payloads[0].count)", "complete error -999"], "\(without)")
        XCTAssertEqual(without.result, "1 of 1 pieces decode: events [1]; origin: 1 abandoned, part of the body sent; stored: nothing")
        XCTAssertEqual(with, without)
        XCTAssertEqual(notes.withLock { $0 }, ["through the layer: false", "first piece when the origin had sent part of the body",
                                               "through the layer: true", "first piece when the origin had sent part of the body"])
    }

    /// The delegate of an `async` call (`data(from:delegate:)`) gets each piece as it is sent; the
    /// call returns the whole body.
    func testAnAsyncCallsDelegateGetsEachPieceAsTheOriginSendsIt() async throws {
        let notes = Locked<[String]>([])
        let (without, with) = try await pair.observe(caching: configuration) { session, _ in
            let callDelegate = streamingDelegate(total: stream.count, notes: notes)
            let (data, _) = try await session.data(from: origin.url("/events"), delegate: callDelegate)
            // The call's delegate is called on the session's (serial) delegate queue: one more
            // operation there runs after those calls.
            await withCheckedContinuation { done in session.delegateQueue.addOperation { done.resume() } }
            return "\(data == stream ? "the whole stream" : "\(data.count) bytes"); delegate: \(callDelegate.calls); "
                + decodeEachPiece(callDelegate.pieces)
        }
        XCTAssertEqual(without.result, "the whole stream; delegate: \(["response 200"] + payloads.map { "data \($0.count)" }); "
                       + "4 of 4 pieces decode: events [1, 2, 3, 4]")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 1)
        XCTAssertEqual(notes.withLock { $0 }, Array(repeating: "first piece when the origin had sent part of the body", count: 2))
    }
}
