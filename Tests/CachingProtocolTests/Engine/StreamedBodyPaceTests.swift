import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import CachingProtocol

/// Whether a body the engine writes to its entry file as it arrives waits for the disk
/// (`StreamedEntryFile.append(_:bodyIsKept:)`): not when a load needs it whole, since the body is
/// kept in memory for that answer anyway; past `StreamedEntryFile.maximumPendingBytes` when the
/// loads only take its pieces, so that memory stays bounded. The store's disk stalls until the
/// test releases it.
final class StreamedBodyPaceTests: EngineTestCase {
    private let url = URL(string: "https://example.com/large")!
    private let disk = StalledDisk()
    private let body = Data.pattern(6 << 20, seed: 11)
    private var files: Locked<[StreamedEntryFile]>!
    private var entries: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        entries = FileManager.default.temporaryDirectory.appendingPathComponent("StreamedBodyPaceTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: entries, withIntermediateDirectories: true)
        let (disk, entries, files) = (disk, entries!, Locked<[StreamedEntryFile]>([]))
        self.files = files
        store.makesStreamedFile.withLock {
            $0 = { key in
                let file = disk.file(forKey: key, in: entries)
                files.withLock { $0.append(file) }
                return file
            }
        }
    }

    override func tearDownWithError() throws {
        disk.release()
        files.withLock { $0 }.forEach { $0.discard() }
        try? FileManager.default.removeItem(at: entries)
        try super.tearDownWithError()
    }

    private var key: String { CacheKey.make(method: "GET", url: url) }

    /// Starts a load of the URL; `streams`: it takes the body as it arrives (a task with a delegate).
    private func load(streams: Bool) -> RecordingLoadClient {
        let client = RecordingLoadClient(streams: streams)
        engine.startLoad(CacheRequest(URLRequest(url: url), key: key), from: .standard, client: client)
        upstream.waitForRequests(1)
        return client
    }

    private var headers: [String: String] {
        ["Cache-Control": "max-age=600", "Content-Length": "\(body.count)"]
    }

    /// Hands the body to request 0's listener in pieces of 16 KB on another thread, as the
    /// upstream session's callbacks do.
    private func sendBodyElsewhere() -> BackgroundWork {
        let (upstream, pieces) = (upstream!, body.pieces(of: 16 << 10))
        return BackgroundWork { for piece in pieces { upstream.sendBody(0, piece) } }
    }

    func testABodyALoadNeedsWholeIsNotHeldBackByADiskThatStalls() throws {
        // Given a load that needs the body whole (a completion handler) and a disk that stalls
        let client = load(streams: false)
        // When a large storable body arrives
        let handling = upstream.sendHead(0, status: 200, headers: headers)
        XCTAssertEqual(handling, BodyHandling(relays: true, keepsUpTo: nil), "kept whole, and written to a file")
        let sending = sendBodyElsewhere()
        // Then every piece is taken at once, and the load is answered, while nothing is written
        wait(for: [sending.done], timeout: 10)
        upstream.respond(0, status: 200, headers: headers, body: body)
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.body, body)
        XCTAssertEqual(files.withLock { $0.map(\.appendedBytes) }, [body.count])
        // And once the disk takes it, the file holds the body byte for byte
        disk.release()
        XCTAssertEqual(try files.withLock { $0 }.first?.readBody(), body)
    }

    func testABodyLoadsOnlyTakeInPiecesWaitsForADiskThatStalls() throws {
        // Given a load that takes the body piece by piece (a delegate) and a disk that stalls
        _ = load(streams: true)
        // When a large storable body arrives
        let handling = upstream.sendHead(0, status: 200, headers: headers)
        XCTAssertEqual(handling, BodyHandling(relays: true, keepsUpTo: 0), "kept only in its file")
        let sending = sendBodyElsewhere()
        // Then the transfer waits for the disk once the bytes not written pass the bound
        let bound = StreamedEntryFile.maximumPendingBytes
        let file = try XCTUnwrap(files.withLock { $0.first })
        wait(for: [ConditionExpectation("more than the bound appended") { file.appendedBytes > bound }], timeout: 10)
        XCTAssertEqual(XCTWaiter().wait(for: [sending.early], timeout: 0.3), .timedOut, "a piece waits for the disk")
        XCTAssertEqual(file.appendedBytes, bound + (16 << 10))
        // And goes on once the disk takes the bytes
        disk.release()
        wait(for: [sending.done], timeout: 10)
        XCTAssertEqual(try file.readBody(), body)
    }
}
