import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `URLProtocol` that gives URLSession transparent, MKNetworkKit-style HTTP caching.
///
/// Install it once at launch, with ``register(_:)`` for `URLSession.shared` or with
/// ``inject(into:using:)`` for sessions the app builds; from then on every GET those sessions
/// make is answered from ``CachingURLCache`` when the ``CachingPolicy`` allows, revalidated with
/// a conditional request when it must be, and fetched otherwise. The app's completion handlers,
/// delegates and `async` calls see ordinary responses with the origin's status and headers.
///
/// What the protocol leaves to Foundation untouched: methods other than GET (an unsafe method
/// first drops what is stored for its URL), requests the app made conditional or partial
/// itself, `Cache-Control: no-store` requests, and schemes other than http and https.
///
/// Foundation creates and drives the instances; apps never do. (Sessions configured with
/// ``inject(into:using:)`` may get a subclass of their own that carries the configuration's
/// additional headers and timeout; see `SessionSettings`.)
public class CachingURLProtocol: URLProtocol {

    private struct LoadingState {
        /// Set by `stopLoading` and by the delivery of the answer: the client is never called
        /// afterwards (on Linux that crashes the process).
        var isStopped = false
        var handle: LoadHandle?
    }
    private let loading = Locked(LoadingState())

    // MARK: URLProtocol

    /// `request` with what this class's session configuration adds to it (see `SessionSettings`).
    class func sessionRequest(_ request: URLRequest) -> URLRequest {
        SessionClasses.settings(of: self)?.apply(to: request) ?? request
    }

    public override class func canInit(with request: URLRequest) -> Bool {
        if Registration.isProbe(request) { return true }
        guard let engine = Installation.current else { return false }
        let request = sessionRequest(request)
        switch RequestDisposition(request) {
        case .cacheable:
            return true
        case .passThrough:
            return false
        case .invalidate:
            // The one side effect in this predicate, on purpose: the protocol declines unsafe
            // methods so Foundation sends them untouched (upload bodies, streams and files
            // intact), which makes this call the only moment the cache sees them. The stored GET
            // is dropped before the request leaves. If Foundation asks about a task that never
            // starts, an entry is dropped for nothing: a later miss, never a wrong answer.
            if let key = CacheKey.make(for: request) { engine.store.removeRecord(forKey: key) }
            return false
        }
    }

    #if !canImport(FoundationNetworking)
    /// Download and stream tasks are left to Foundation: their bodies go to files and streams,
    /// which a cache in front of them would have to buffer.
    public override class func canInit(with task: URLSessionTask) -> Bool {
        guard task is URLSessionDataTask, let request = task.currentRequest else { return false }
        return canInit(with: request)
    }
    #endif

    public override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    public override func startLoading() {
        loading.withLock { $0 = LoadingState() }
        if Registration.isProbe(request) {
            return deliver(Registration.probeAnswer(for: request))
        }
        #if canImport(FoundationNetworking)
        if task is URLSessionDownloadTask {
            // corelibs reads a download's file location from a property only its own protocol can
            // set, and crashes without it: refuse clearly instead.
            let reason = CachingError(.unsupportedTask, "download tasks cannot go through a URLProtocol on Linux; "
                                      + "use a session without CachingURLProtocol for downloads")
            return deliver(.failure(URLError(.unsupportedURL, userInfo: [NSUnderlyingErrorKey: reason,
                                                                          NSLocalizedDescriptionKey: reason.description])))
        }
        #endif
        // `canInit` accepted the request, so it is a cacheable GET.
        let request = Self.sessionRequest(self.request)
        guard let engine = Installation.current, let key = CacheKey.make(for: request) else {
            let reason = CachingError(.notInstalled, "CachingURLProtocol was uninstalled while a request was starting")
            return deliver(.failure(URLError(.cancelled, userInfo: [NSUnderlyingErrorKey: reason,
                                                                     NSLocalizedDescriptionKey: reason.description])))
        }
        switch engine.load(CacheRequest(request, key: key), receiver: Receiver(owner: self)) {
        case .answered(let answer):
            deliver(answer)
        case .pending(let handle):
            let stoppedMeanwhile = loading.withLock { state -> Bool in
                state.handle = handle
                return state.isStopped
            }
            if stoppedMeanwhile { handle.cancel() }
        }
    }

    public override func stopLoading() {
        let handle = loading.withLock { state -> LoadHandle? in
            state.isStopped = true
            defer { state.handle = nil }
            return state.handle
        }
        handle?.cancel()
    }

    // MARK: Delivery

    private struct Receiver: AnswerReceiver, @unchecked Sendable {
        // @unchecked: URLProtocol is not Sendable; `deliver` only touches the instance's Locked
        // state and its client, which Foundation allows from any thread.
        let owner: CachingURLProtocol

        func receive(_ answer: Answer, outcome: CacheEvent.Outcome) {
            owner.deliver(answer)
        }
    }

    /// Hands the answer to Foundation: the response, the whole body in one `didLoad` (Linux
    /// completion handlers and `async` callers only see the last chunk), then the end.
    ///
    /// The lock is held across the client calls on purpose: `stopLoading` takes the same lock,
    /// so it either comes first (and nothing is delivered) or waits until delivery is complete.
    /// None of the client calls re-enters the protocol.
    private func deliver(_ answer: Answer) {
        loading.withLock { state in
            guard !state.isStopped else { return }
            state.isStopped = true
            state.handle = nil
            guard let client else { return }
            switch answer {
            case .response(let response, let body):
                client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
                if !body.isEmpty {
                    client.urlProtocol(self, didLoad: body)
                }
                client.urlProtocolDidFinishLoading(self)
            case .failure(let error):
                client.urlProtocol(self, didFailWithError: error)
            }
        }
    }
}
