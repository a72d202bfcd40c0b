import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// URLProtocols of the kinds apps carry, written the way the libraries apps use write them, to
/// test that the layer leaves them working: a stub that answers some paths itself (OHHTTPStubs,
/// Mocker) and a logger that records every request it takes and forwards it through a session of
/// its own (netfox). The tests use them in their own process (in `protocolClasses`) and in this
/// tool's (registered with `URLProtocol.registerClass`). Their records are per process.
enum AppProtocols {
    /// A stub: answers the requests whose path it has a canned response for, and declines the
    /// others. As the only class of a session (Mocker's way), it answers everything it knows.
    final class Stub: URLProtocol {
        /// A canned response.
        struct Canned: Sendable {
            var status = 200
            var headers: [String: String] = [:]
            var body: Data
        }

        /// The canned responses, by path.
        static let routes = Record<[String: Canned]>([:])
        /// "METHOD path" of every request it answered, in order.
        static let answered = Record<[String]>([])

        override class func canInit(with request: URLRequest) -> Bool {
            guard let path = request.url?.path else { return false }
            return routes.read { $0[path] != nil }
        }

        override class func canonicalRequest(for request: URLRequest) -> URLRequest {
            request
        }

        override func startLoading() {
            guard let url = request.url, let canned = Self.routes.read({ $0[url.path] }),
                  let response = HTTPURLResponse(url: url, statusCode: canned.status, httpVersion: "HTTP/1.1",
                                                 headerFields: canned.headers.merging(["Content-Length": "\(canned.body.count)"]) { own, _ in own })
            else { return client?.urlProtocol(self, didFailWithError: URLError(.badURL)) ?? () }
            Self.answered.change { $0.append("\(request.httpMethod ?? "GET") \(url.path)") }
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: canned.body)
            client?.urlProtocolDidFinishLoading(self)
        }

        override func stopLoading() {}
    }

    /// A logger: takes every http(s) request, records it, and forwards it through a session of its
    /// own made from the default configuration (as netfox does), handing the response and each
    /// piece of its body on as they arrive. With `cutsBodyAfter` set it keeps the body and hands
    /// on only its first bytes, in one piece, ending cleanly (a forwarder that loses the rest: a
    /// truncated transfer).
    final class Logger: URLProtocol {
        /// "METHOD path" of every request it took, in order.
        static let seen = Record<[String]>([])
        /// Bytes after which it ends a body (nil: the whole body).
        static let cutsBodyAfter = Record<Int?>(nil)

        private let forwarding = Record<Forwarding?>(nil)

        override class func canInit(with request: URLRequest) -> Bool {
            ["http", "https"].contains(request.url?.scheme?.lowercased() ?? "")
        }

        override class func canonicalRequest(for request: URLRequest) -> URLRequest {
            request
        }

        override func startLoading() {
            let request = self.request
            Self.seen.change { $0.append("\(request.httpMethod ?? "GET") \(request.url?.path ?? "")") }
            // Hand-over of the protocol instance to another thread: corelibs deadlocks when a task is
            // made inside `startLoading` (Docs/foundation-facts.md, L3), so the forwarding starts
            // on a global queue; the instance is only used to call its client from there.
            nonisolated(unsafe) let owner = self
            let forwarding = self.forwarding
            DispatchQueue.global().async {
                let forwarder = Forwarding(owner: owner, limit: Self.cutsBodyAfter.read { $0 })
                forwarding.change { $0 = forwarder }
                forwarder.start(request)
            }
        }

        override func stopLoading() {
            forwarding.read { $0 }?.cancel()
        }
    }

    /// One request a `Logger` forwards: its session's delegate, handing everything to the
    /// logger's client.
    final class Forwarding: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        // @unchecked: `owner` is a URLProtocol (never Sendable), used only to reach its client;
        // the other state is under `state`'s lock.
        private weak var owner: URLProtocol?
        private let limit: Int?
        private let state = Record<(session: URLSession?, task: URLSessionTask?, forwarded: Data, ended: Bool)>((nil, nil, Data(), false))

        init(owner: URLProtocol, limit: Int?) {
            self.owner = owner
            self.limit = limit
        }

        func start(_ request: URLRequest) {
            let session = URLSession(configuration: .default, delegate: self, delegateQueue: nil)
            let task = session.dataTask(with: request)
            state.change { $0.session = session; $0.task = task }
            task.resume()
        }

        func cancel() {
            state.change { $0.ended = true }
            state.read { $0.task }?.cancel()
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
            completionHandler(request)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
            if let owner, !state.read({ $0.ended }) {
                owner.client?.urlProtocol(owner, didReceive: response, cacheStoragePolicy: .notAllowed)
            }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            guard let limit else {
                if let owner, !state.read({ $0.ended }) { owner.client?.urlProtocol(owner, didLoad: data) }
                return
            }
            let cut = state.change { state -> Data? in
                guard !state.ended else { return nil }
                state.forwarded.append(data.prefix(max(0, limit - state.forwarded.count)))
                guard state.forwarded.count >= limit else { return nil }
                state.ended = true
                return state.forwarded
            }
            guard let cut, let owner else { return }
            // Cut: the first bytes in one piece, and the body ends here, cleanly, as far as the
            // client can tell.
            owner.client?.urlProtocol(owner, didLoad: cut)
            owner.client?.urlProtocolDidFinishLoading(owner)
            dataTask.cancel()
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            session.finishTasksAndInvalidate()
            let alreadyEnded = state.change { state -> Bool in
                defer { state.ended = true }
                return state.ended
            }
            guard let owner, !alreadyEnded else { return }
            if let error {
                owner.client?.urlProtocol(owner, didFailWithError: error)
            } else {
                owner.client?.urlProtocolDidFinishLoading(owner)
            }
        }
    }

    /// A value behind a lock, for the fakes' records (they are written from protocol instances on
    /// Foundation's threads and read by the test).
    final class Record<Value>: @unchecked Sendable {
        // @unchecked: `value` is only touched under `lock`.
        private let lock = NSLock()
        private var value: Value

        init(_ value: Value) {
            self.value = value
        }

        func read<Result>(_ body: (Value) -> Result) -> Result {
            lock.lock()
            defer { lock.unlock() }
            return body(value)
        }

        @discardableResult
        func change<Result>(_ body: (inout Value) -> Result) -> Result {
            lock.lock()
            defer { lock.unlock() }
            return body(&value)
        }
    }
}
