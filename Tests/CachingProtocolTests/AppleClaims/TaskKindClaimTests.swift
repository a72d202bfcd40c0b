#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation facts A3 and A8 on an Apple platform: the system asks a protocol about the task
/// (`canInit(with task:)`), so the layer leaves download and upload tasks to the system even for
/// a URL it would take in a data task; and a background session never consults a protocol.
///
/// A load the layer answered carries `Cache-Status`; one the system loaded does not.
final class TaskKindClaimTests: CachingTestCase {
    private func serveStored(_ path: String, body: Data) {
        origin.handle(path) { request in
            request.method == "GET"
                ? OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body)
                : OriginResponse.text("accepted \(request.body.count) bytes")
        }
    }

    /// A URL the layer has stored, loaded by a download task: the system downloads it from the
    /// origin (no `Cache-Status`, the origin asked again, the file byte for byte).
    func testA3_aDownloadTaskIsLeftToTheSystem() async throws {
        serveStored("/file", body: Data.pattern(40_000))
        let (_, stored) = try await get("/file")
        XCTAssertEqual(stored.value(forHTTPHeaderField: "Cache-Status")?.hasPrefix("CachingProtocol"), true, "a data task: taken")
        let answered = events.count

        let (location, response) = try await session.download(for: request("/file"))
        defer { try? FileManager.default.removeItem(at: location) }
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        XCTAssertNil(http.value(forHTTPHeaderField: "Cache-Status"), "left to the system")
        XCTAssertEqual(try Data(contentsOf: location), Data.pattern(40_000))
        XCTAssertEqual(origin.requestCount(method: "GET", path: "/file"), 2)
        XCTAssertEqual(events.count, answered, "the layer answered nothing more")
    }

    /// An upload task to a URL the layer has stored (a data task with that method would be
    /// taken, to drop what is stored once the origin accepts it): the system sends it, body and
    /// all, and the layer sees nothing of it.
    func testA3_anUploadTaskIsLeftToTheSystem() async throws {
        serveStored("/item", body: Data("item".utf8))
        _ = try await get("/item")
        let answered = events.count

        let (data, response) = try await session.upload(for: request("/item", method: "POST"), from: Data.pattern(9_000))
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        XCTAssertNil(http.value(forHTTPHeaderField: "Cache-Status"), "left to the system")
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "accepted 9000 bytes")
        XCTAssertEqual(origin.requests(to: "/item").last?.body, Data.pattern(9_000), "the body, byte for byte")
        XCTAssertEqual(events.count, answered)
    }

    /// A background download of `path`, through a session whose configuration has the counting
    /// protocol first and, `withLayer`, the layer injected: the body and the error.
    private func backgroundDownload(_ path: String, withLayer: Bool) -> (Data?, Error?) {
        let configuration = URLSessionConfiguration.background(withIdentifier: "CachingProtocolClaims.\(UUID().uuidString)")
        if withLayer { CachingURLProtocol.inject(into: configuration, using: self.configuration) }
        configuration.protocolClasses = [ConsultedProtocol.self] + (configuration.protocolClasses ?? [])
        let delegate = BackgroundDownloadDelegate()
        let background = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { background.invalidateAndCancel() }
        background.downloadTask(with: request(path)).resume()
        wait(for: [delegate.done], timeout: 60)
        return delegate.result
    }

    /// A background session with the layer injected downloads through the system (in another
    /// process): the protocol class is never consulted. Skipped only where the test host cannot
    /// run a background session at all — the same download without the layer fails there too,
    /// with the error given; a download that works without the layer must work with it.
    func testA8_aBackgroundSessionNeverConsultsTheProtocol() throws {
        serveStored("/background", body: Data.pattern(20_000))
        ConsultedProtocol.consulted.withLock { $0 = 0 }
        let (control, controlError) = backgroundDownload("/background", withLayer: false)
        guard controlError == nil, control == Data.pattern(20_000) else {
            throw XCTSkip("this test host cannot run a background session, even without the layer: "
                          + "\(controlError.map { "\($0)" } ?? "\(control?.count ?? 0) bytes")")
        }
        let (body, error) = backgroundDownload("/background", withLayer: true)
        XCTAssertNil(error, "a background download that works without the layer works with it")
        XCTAssertEqual(body, Data.pattern(20_000))
        XCTAssertEqual(ConsultedProtocol.consulted.withLock { $0 }, 0, "no protocol class of either session was consulted")
        XCTAssertEqual(events.count, 0, "the layer answered nothing")
        XCTAssertEqual(origin.requestCount(path: "/background"), 2, "each downloaded from the origin")
    }
}

/// A background session's delegate: keeps the downloaded file's bytes (the file is gone once the
/// method returns) and the task's error.
private final class BackgroundDownloadDelegate: NSObject, URLSessionDownloadDelegate, Sendable {
    private let state = Locked<(body: Data?, error: Error?)>((nil, nil))
    let done = XCTestExpectation(description: "the background download ended")

    var result: (Data?, Error?) { state.withLock { ($0.body, $0.error) } }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let body = try? Data(contentsOf: location)
        state.withLock { $0.body = body }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        state.withLock { $0.error = error }
        done.fulfill()
    }
}
#endif
