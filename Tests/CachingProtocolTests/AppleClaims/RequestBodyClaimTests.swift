#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import ObjectiveC
import XCTest
@testable import CachingProtocol

/// Foundation fact A21 on an Apple platform: a protocol may get a request's body as
/// `httpBodyStream` although the app set `httpBody`, and no `URLProtocolClient` call asks the
/// app for a new body stream or reports upload progress. That is why the layer leaves every
/// unsafe request with a body to the system (`CachingURLProtocol.leavesBodyToFoundation`). So
/// through the layer an upload reaches the origin byte for byte and the app's delegate hears of
/// its progress, as without the layer.
///
/// What the tests cannot show: that every body arrives as a stream. Only a 100,000-byte POST
/// through a data task is tried, and "may" cannot be run. The client protocol is read as it is
/// declared: the runtime's list of the methods declared for `NSURLProtocolClient`. A method the
/// system's client implements without declaring it would not show there, and a protocol could
/// not call it as public API anyway. That the system asks the app's delegate for a new stream
/// when a challenged upload must go again is not tried here. Linux has the pair
/// (`UnsafeRequestPairTests`), and through the layer the request is the system's own once
/// `canInit` has declined it.
final class RequestBodyClaimTests: CachingTestCase {
    private let body = Data.pattern(100_000, seed: 21)

    /// A plain session with a protocol that loads the POST itself. It is given the request
    /// without `httpBody`, with a stream that holds the app's body byte for byte, and answers
    /// with what it read.
    func testA21_aProtocolGetsAnHTTPBodyAsAStream() async throws {
        EchoProtocol.reset()
        let session = sessionAskingFirst(EchoProtocol.self)
        defer { session.finishTasksAndInvalidate() }
        let (data, _) = try await session.data(for: request("/echo/upload", method: "POST", body: body))

        let received = try XCTUnwrap(EchoProtocol.received.first, "loaded by the protocol")
        XCTAssertNil(received.httpBody, "the app's httpBody did not reach the protocol as httpBody")
        XCTAssertNotNil(received.streamed, "the protocol was given a body stream")
        XCTAssertEqual(data.count, body.count)
        XCTAssertTrue(received.streamed == body && data == body, "the stream held the app's body, byte for byte")
    }

    /// `NSURLProtocolClient`'s methods, as the runtime holds them: the eight that deliver a load,
    /// and none that asks for a body stream or reports bytes sent.
    func testA21_noClientCallAsksForABodyStreamOrReportsUploadProgress() {
        let declared = Self.instanceMethods(of: URLProtocolClient.self)
        let delivering: Set<String> = [
            "URLProtocol:wasRedirectedToRequest:redirectResponse:", "URLProtocol:cachedResponseIsValid:",
            "URLProtocol:didReceiveResponse:cacheStoragePolicy:", "URLProtocol:didLoadData:", "URLProtocolDidFinishLoading:",
            "URLProtocol:didFailWithError:", "URLProtocol:didReceiveAuthenticationChallenge:",
            "URLProtocol:didCancelAuthenticationChallenge:",
        ]
        XCTAssertTrue(delivering.isSubset(of: declared), "the method list was read: \(declared.sorted())")
        let upload = declared.filter { name in
            ["body", "stream", "send", "sent", "progress", "upload"].contains { name.lowercased().contains($0) }
        }
        XCTAssertEqual(upload, [], "a client call about the request's body")
    }

    /// The instance methods `proto` declares, required and optional, by selector name.
    private static func instanceMethods(of proto: Protocol) -> Set<String> {
        var names: Set<String> = []
        for required in [true, false] {
            var count: UInt32 = 0
            guard let list = protocol_copyMethodDescriptionList(proto, required, true, &count) else { continue }
            defer { free(list) }
            for index in 0..<Int(count) {
                if let name = list[index].name { names.insert(NSStringFromSelector(name)) }
            }
        }
        return names
    }

    /// The same app code without and with the layer, on a session whose delegate was named to
    /// `inject`. The app GETs `/account` (stored, with the layer), POSTs 100,000 bytes to it,
    /// then GETs it again. The origin receives GET, POST, GET and the body byte for byte. The
    /// delegate hears the upload's progress up to the last byte, and the answers are the same.
    /// With the layer, the POST left to the system also dropped the stored GET, so the second
    /// GET was fetched again.
    func testA21_throughTheLayerAnUploadIsSentAndReportedAsWithoutIt() async throws {
        origin.handle("/account") { request in
            request.method == "POST"
                ? .text("saved \(request.body.count)", headers: [HTTPField("Cache-Control", "no-store")])
                : .text("account", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        var observed: [[String]] = []
        var fetchedByTheLayer = 0
        for withLayer in [false, true] {
            origin.resetLog()
            cache.removeAll()
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 10
            configuration.urlCache = nil
            let caching = makeConfiguration()
            let delegate = UploadDelegate()
            if withLayer { CachingURLProtocol.inject(into: configuration, using: caching, delegate: delegate) }
            let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }
            var results: [String] = []
            for (method, payload) in [("GET", nil), ("POST", body), ("GET", nil)] as [(String, Data?)] {
                let (status, answer, progress) = await run(request("/account", method: method, body: payload), in: session, delegate: delegate)
                results.append("\(method) \(status) \(answer) \(progress)")
            }
            let received = origin.requests(to: "/account")
            results.append("origin: \(received.map(\.method))")
            results.append("posted byte for byte: \(received.filter { $0.method == "POST" }.map(\.body) == [body])")
            observed.append(results)
            if withLayer { fetchedByTheLayer = caching.statistics.fetched }
        }
        let plain = observed[0]
        XCTAssertEqual(plain.count, 5, "\(plain)")
        XCTAssertEqual(plain.first, "GET 200 account no upload")
        XCTAssertTrue(plain.dropFirst().first?.hasPrefix("POST 200 saved 100000 sent 100000 of ") == true, "\(plain)")
        XCTAssertEqual(Array(plain.suffix(2)), ["origin: [\"GET\", \"POST\", \"GET\"]", "posted byte for byte: true"])
        XCTAssertEqual(observed[1], observed[0], "with the layer")
        XCTAssertEqual(fetchedByTheLayer, 2, "the layer fetched both GETs: the POST dropped what it stored")
    }

    /// Runs `request` as a data task of `session` and waits until `delegate` saw it complete.
    /// Returns the status, the answer's text and the last upload progress the delegate heard.
    private func run(_ request: URLRequest, in session: URLSession, delegate: UploadDelegate) async -> (Int, String, String) {
        let done = XCTestExpectation(description: "the task completed")
        delegate.begin(done)
        let task = session.dataTask(with: request)
        task.resume()
        await fulfillment(of: [done], timeout: 20)
        let (data, progress) = delegate.result
        return ((task.response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self), progress)
    }
}

/// A session delegate for one task at a time. It collects the body and the last upload progress,
/// and fulfils the expectation given to `begin` when the task completes.
private final class UploadDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var data = Data()
        var progress = "no upload"
        var done: XCTestExpectation?
    }
    private let state = Locked(State())

    func begin(_ done: XCTestExpectation) {
        state.withLock {
            $0.data = Data()
            $0.progress = "no upload"
            $0.done = done
        }
    }

    var result: (Data, String) { state.withLock { ($0.data, $0.progress) } }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
                    totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        state.withLock { $0.progress = "sent \(totalBytesSent) of \(totalBytesExpectedToSend)" }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock { $0.data.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        state.withLock { $0.done }?.fulfill()
    }
}
#endif
