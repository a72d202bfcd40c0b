import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Cancelling and resuming tasks the layer hands to Foundation, or loads itself: the same app code
/// without and with the layer sees the same delegate calls and origin traffic, and never crashes.
final class TaskCancellationPairTests: CachingTestCase {
    /// A body that arrives over about a second, in 16 pieces: long enough to cancel in the middle.
    private let slowBody = Data.pattern(16 << 10, seed: 9)

    override func setUpWithError() throws {
        try super.setUpWithError()
        let body = slowBody
        origin.handle("/slow") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body,
                           transfer: .paced(chunkSize: 1 << 10, interval: 0.06))
        }
        let arrivals = lateArrivals
        origin.handle("/late") { _ in
            arrivals.withLock { $0?.fulfill() }
            return OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body, fault: .stall(2))
        }
    }

    /// Fulfilled when a request for `/late` reaches the origin, which then holds its response back.
    private let lateArrivals = Locked<XCTestExpectation?>(nil)

    /// How the app cancels its download.
    private enum Cancel {
        /// `cancel()` once the request reached the origin, before any response.
        case beforeTheResponse
        /// `resume()` then `cancel()` on the first bytes written, as Alamofire cancels (it resumes
        /// every task it cancels, to gather metrics).
        case midBody
        /// `cancel(byProducingResumeData:)` on the first bytes written.
        case midBodyProducingResumeData
    }

    /// Runs one download with `cancel` on a delegate session, without or with the layer; returns
    /// what the app saw and the requests the origin got.
    private func download(_ path: String, cancel: Cancel, withLayer: Bool) async -> String {
        origin.resetLog()
        let configuration = URLSessionConfiguration.ephemeral
        if withLayer { CachingURLProtocol.inject(into: configuration, using: self.configuration) }
        let delegate = DownloadDelegate()
        let downloads = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { downloads.finishTasksAndInvalidate() }
        let task = downloads.downloadTask(with: origin.url(path))
        switch cancel {
        case .beforeTheResponse:
            let arrived = XCTestExpectation(description: "the request reached the origin")
            lateArrivals.withLock { $0 = arrived }
            task.resume()
            await fulfillment(of: [arrived], timeout: 10)
            task.cancel()
        case .midBody:
            delegate.onFirstWrite = { task in
                task.resume()
                task.cancel()
            }
            task.resume()
        case .midBodyProducingResumeData:
            delegate.onFirstWrite = { task in task.cancel(byProducingResumeData: { data in delegate.record("resume data \(data?.count ?? 0)") }) }
            task.resume()
        }
        await fulfillment(of: [delegate.done], timeout: 20)
        return "\(delegate.calls) origin: \(origin.requests.map { "\($0.method) \($0.path)" })"
    }

    func testCancellingADownloadBeforeItsResponseIsAsWithoutTheLayer() async throws {
        let without = await download("/late", cancel: .beforeTheResponse, withLayer: false)
        let with = await download("/late", cancel: .beforeTheResponse, withLayer: true)
        XCTAssertTrue(without.contains("complete error -999"), without)
        XCTAssertEqual(with, without)
    }

    /// Crashed the test process before `startLoading` ignored a second call: the second resume
    /// handed the task to a second Foundation protocol, the cancellation stopped only that one,
    /// and the first one's next piece of body trapped in corelibs' task registry.
    func testCancellingADownloadMidBodyAsAlamofireDoesIsAsWithoutTheLayer() async throws {
        let without = await download("/slow", cancel: .midBody, withLayer: false)
        let with = await download("/slow", cancel: .midBody, withLayer: true)
        XCTAssertTrue(without.contains("complete error -999"), without)
        XCTAssertFalse(without.contains("finished"), without)
        XCTAssertEqual(with, without)
    }

    func testCancellingADownloadForResumeDataIsAsWithoutTheLayer() async throws {
        let without = await download("/slow", cancel: .midBodyProducingResumeData, withLayer: false)
        let with = await download("/slow", cancel: .midBodyProducingResumeData, withLayer: true)
        XCTAssertTrue(without.contains("complete error -999"), without)
        XCTAssertEqual(with, without)
    }

    /// A data task the app resumes again while it runs is sent once, as without the layer (each
    /// extra `resume()` started another load through the layer before).
    func testResumingARunningDataTaskAgainSendsItOnce() async throws {
        let expected = slowBody
        let observed = await withoutAndWithTheLayer(caching: configuration) { tasks in
            let outcome: String = await withCheckedContinuation { continuation in
                let task = tasks.dataTask(with: origin.url("/slow")) { data, response, error in
                    continuation.resume(returning: "\((response as? HTTPURLResponse)?.statusCode ?? 0) "
                                        + "\(data == expected ? "same bytes" : "other bytes") \(error.map { "\($0)" } ?? "no error")")
                }
                task.resume()
                task.resume()
                task.resume()
            }
            return "\(outcome) origin: \(originMethods("/slow"))"
        }
        XCTAssertEqual(observed.without, "200 same bytes no error origin: [\"GET\"]")
        XCTAssertEqual(observed.with, observed.without)
        // One load through the layer: each extra one joined the first's upstream request, so the
        // origin alone could not tell; a cancellation reached only the last of them.
        XCTAssertEqual(configuration.statistics.fetched, 1)
        XCTAssertEqual(configuration.statistics.collapsed, 0)
    }
}

/// A download delegate that records what the app is told, in order.
private final class DownloadDelegate: NSObject, URLSessionDownloadDelegate, Sendable {
    private struct State {
        var calls: [String] = []
        var wrote = false
        var onFirstWrite: (@Sendable (URLSessionDownloadTask) -> Void)?
    }
    private let state = Locked(State())
    let done = XCTestExpectation(description: "download completed")

    var calls: [String] { state.withLock { $0.calls } }

    var onFirstWrite: (@Sendable (URLSessionDownloadTask) -> Void)? {
        get { state.withLock { $0.onFirstWrite } }
        set { state.withLock { $0.onFirstWrite = newValue } }
    }

    func record(_ call: String) {
        state.withLock { $0.calls.append(call) }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        let first = state.withLock { state -> (@Sendable (URLSessionDownloadTask) -> Void)? in
            guard !state.wrote else { return nil }
            state.wrote = true
            state.calls.append("wrote")
            return state.onFirstWrite
        }
        first?(downloadTask)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        record("finished")
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        record("complete \(error.map { "error \(($0 as? URLError)?.code.rawValue ?? -1)" } ?? "ok")")
        done.fulfill()
    }
}
