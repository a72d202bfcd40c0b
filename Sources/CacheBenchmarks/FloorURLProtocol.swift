import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The floor: the cheapest URLProtocol that can answer a request — a prebuilt response and body
/// from a dictionary, no policy, no cache lookup, no copying. Whatever a URLProtocol-based cache
/// costs above this is its own overhead.
final class FloorURLProtocol: URLProtocol {
    /// Filled before a run and only read while it runs.
    nonisolated(unsafe) static var answers: [URL: (response: HTTPURLResponse, body: Data)] = [:]

    override class func canInit(with request: URLRequest) -> Bool { true }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let url = request.url, let answer = Self.answers[url] else {
            client?.urlProtocol(self, didFailWithError: URLError(.fileDoesNotExist))
            return
        }
        client?.urlProtocol(self, didReceive: answer.response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: answer.body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}

    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        configuration.protocolClasses = [FloorURLProtocol.self]
        return URLSession(configuration: configuration)
    }
}
