import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A complete response from the origin: the cache stores and delivers whole bodies.
struct UpstreamResponse: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is immutable after creation but not declared Sendable everywhere.
    let response: HTTPURLResponse
    let body: Data
    /// Statuses of the redirects followed on the way, in order (empty when none).
    let redirectStatuses: [Int]
    let requestDate: Date
    let responseDate: Date
    /// Wall-clock seconds the transfer took, for the bandwidth estimate.
    let transferSeconds: TimeInterval

    var status: Int { response.statusCode }
    var headers: HTTPHeaders { HTTPHeaders(response.allHeaderFields) }
}

/// Sends the cache's own requests to origins through a private `URLSession` whose configuration
/// leaves the caching protocol out (the installer says which classes those are), so the cache
/// never intercepts its own traffic and never needs a marker header (which would reach servers)
/// or a request property (which does not survive on Linux).
///
/// Threading: `send` may be called from any thread except inside a `URLProtocol` callback on
/// Linux (creating a task there deadlocks the shared session queue; the engine always hops to its
/// own queue first). Completions run on the session's delegate queue.
final class UpstreamClient: Sendable {
    private let session: URLSession
    private let router: TransferRouter

    /// A client whose session consults none of the protocol classes `isCachingProtocol` picks.
    init(leavingOut isCachingProtocol: (AnyClass) -> Bool) {
        let configuration = URLSessionConfiguration.default
        configuration.protocolClasses = (configuration.protocolClasses ?? []).filter { !isCachingProtocol($0) }
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        #if canImport(FoundationNetworking)
        // The app's session already put its own jar's cookies on the request (corelibs does it
        // when the task is created), and the credential fingerprint is taken from that request.
        // Adding this session's jar (the shared one) would send cookies the app's session does
        // not have, unseen by the fingerprint. `Set-Cookie`s still go to the shared jar.
        // (Not verified on Apple platforms, where this session keeps adding the shared jar's.)
        configuration.httpShouldSetCookies = false
        #endif
        router = TransferRouter()
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: nil)
    }

    /// Starts `request` and calls `completion` once with the whole response or the error.
    /// `clock` stamps the request and response dates (RFC 9111 `request_time`/`response_time`).
    func send(
        _ request: URLRequest,
        clock: @escaping @Sendable () -> Date,
        completion: @escaping @Sendable (Result<UpstreamResponse, Error>) -> Void
    ) -> UpstreamTask {
        let task = session.dataTask(with: request)
        router.register(task, transfer: Transfer(requestDate: clock(), clock: clock, completion: completion))
        task.resume()
        return UpstreamTask(task: task)
    }

    /// Lets running transfers finish, then releases the session.
    func shutdown() {
        session.finishTasksAndInvalidate()
    }
}

/// A running upstream request; cancelling it ends its transfer with `URLError.cancelled`.
struct UpstreamTask: @unchecked Sendable {
    // @unchecked: URLSessionTask is thread-safe for `cancel()` but not declared Sendable on Linux.
    fileprivate let task: URLSessionTask

    /// Cancels the transfer from another queue, never on the caller's: a load is cancelled from
    /// `stopLoading` on the app session's queue, and on Linux every session's queue targets one
    /// serial queue, so cancelling (a `sync` onto the upstream session's queue) from there
    /// deadlocks.
    func cancel() {
        DispatchQueue.global(qos: .utility).async { [task] in task.cancel() }
    }
}

/// The state of one upstream transfer while it runs.
private struct Transfer {
    let requestDate: Date
    let clock: @Sendable () -> Date
    let completion: @Sendable (Result<UpstreamResponse, Error>) -> Void
    let startedAt = DispatchTime.now()
    var response: HTTPURLResponse?
    var body = Data()
    var redirectStatuses: [Int] = []
    var responseDate: Date?
}

/// The private session's delegate: collects each task's body and hands the whole response over.
private final class TransferRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let transfers = Locked<[Int: Transfer]>([:])

    func register(_ task: URLSessionTask, transfer: Transfer) {
        transfers.withLock { $0[task.taskIdentifier] = transfer }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // Redirects are followed here, inside the cache: the Linux client's redirect callback
        // for URLProtocols is a fatalError, so the app only ever sees the final response.
        transfers.withLock { $0[task.taskIdentifier]?.redirectStatuses.append(response.statusCode) }
        completionHandler(request)
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        transfers.withLock { transfers in
            guard var transfer = transfers[dataTask.taskIdentifier] else { return }
            transfer.response = response as? HTTPURLResponse
            transfer.responseDate = transfer.clock()
            transfers[dataTask.taskIdentifier] = transfer
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        transfers.withLock { $0[dataTask.taskIdentifier]?.body.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            transfer.completion(.failure(error))
            return
        }
        guard let response = transfer.response ?? (task.response as? HTTPURLResponse) else {
            transfer.completion(.failure(URLError(.badServerResponse)))
            return
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - transfer.startedAt.uptimeNanoseconds) / 1e9
        transfer.completion(.success(UpstreamResponse(
            response: response,
            body: transfer.body,
            redirectStatuses: transfer.redirectStatuses,
            requestDate: transfer.requestDate,
            responseDate: transfer.responseDate ?? transfer.clock(),
            transferSeconds: elapsed
        )))
    }
}
