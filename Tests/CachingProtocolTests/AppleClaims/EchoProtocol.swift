#if canImport(Darwin)
import Foundation
@testable import CachingProtocol

/// A protocol for the claim tests that loads requests to paths under `/echo/` itself, without
/// the network. It records the request as it is given in `startLoading` (`Received`), and
/// answers 200 with the bytes it read from the request's body stream (none without one). Put it
/// in a configuration's `protocolClasses` and call `reset()` before the loads.
final class EchoProtocol: URLProtocol {
    /// A request as the protocol was given it.
    struct Received: Sendable {
        /// Its header fields.
        var fields: [String: String]
        /// Its `httpBody`.
        var httpBody: Data?
        /// What its `httpBodyStream` held, read to the end; nil without a stream.
        var streamed: Data?

        /// Its value of the field `name`, or nil.
        func value(of name: String) -> String? {
            fields.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    private static let log = Locked<[Received]>([])

    static func reset() {
        log.withLock { $0 = [] }
    }

    /// Every request loaded since `reset()`, in order.
    static var received: [Received] { log.withLock { $0 } }

    override class func canInit(with request: URLRequest) -> Bool {
        request.url?.path.hasPrefix("/echo/") == true
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    override func startLoading() {
        let request = self.request
        let received = Received(fields: request.allHTTPHeaderFields ?? [:], httpBody: request.httpBody,
                                streamed: request.httpBodyStream.map(Self.readAll))
        Self.log.withLock { $0.append(received) }
        let body = received.streamed ?? Data()
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Length": "\(body.count)"])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}

    /// Everything `stream` holds, read on the loading thread: a body stream made from data has
    /// it all at hand, so a read never waits.
    private static func readAll(_ stream: InputStream) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        stream.open()
        defer { stream.close() }
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            data.append(buffer, count: count)
        }
        return data
    }
}
#endif
