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
        URLSession.withOnlyProtocol(FloorURLProtocol.self)
    }
}

/// The floor of a miss: the cheapest URLProtocol that can send a request on — it hands the
/// request to a session of its own and the whole answer to its client, with no policy, no
/// lookup and no store. A URLProtocol cannot reach the network on Linux any other way, so what a
/// URLProtocol-based cache costs on a miss above this is its own overhead; what this costs above
/// a direct request is the price of being a URLProtocol at all.
final class ForwardingFloorURLProtocol: URLProtocol {
    private static let upstream: URLSession = {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()

    override class func canInit(with request: URLRequest) -> Bool { true }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let request = self.request
        // No state of its own: Foundation's `client` is only read, once the answer is in.
        nonisolated(unsafe) let instance = self
        // Not from inside this callback: on Linux a task made on the session's queue deadlocks.
        DispatchQueue.global().async {
            Self.upstream.dataTask(with: request) { data, response, error in
                guard let client = instance.client else { return }
                if let response {
                    client.urlProtocol(instance, didReceive: response, cacheStoragePolicy: .notAllowed)
                    if let data { client.urlProtocol(instance, didLoad: data) }
                    client.urlProtocolDidFinishLoading(instance)
                } else {
                    client.urlProtocol(instance, didFailWithError: error ?? URLError(.unknown))
                }
            }.resume()
        }
    }

    override func stopLoading() {}

    static func session() -> URLSession {
        URLSession.withOnlyProtocol(ForwardingFloorURLProtocol.self)
    }
}

extension URLSession {
    /// A session without a URL cache whose requests go to `protocolClass` only.
    static func withOnlyProtocol(_ protocolClass: AnyClass) -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        configuration.protocolClasses = [protocolClass]
        return URLSession(configuration: configuration)
    }
}
