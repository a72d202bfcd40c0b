import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What ``CachingURLProtocol/register(_:)`` found out about `URLSession.shared`.
public enum RegistrationStatus: Sendable, Equatable {
    /// `URLSession.shared` answers through the protocol.
    case active
    /// `URLSession.shared` was created before the protocol was registered and will never
    /// consult it (swift-corelibs-foundation fixes the shared session's protocol list when the
    /// session is created). Register before anything touches `URLSession.shared`, or use
    /// ``CachingURLProtocol/inject(into:using:)`` for a session of your own.
    case registeredTooLate
}

extension CachingURLProtocol {
    /// Installs `configuration` and registers the protocol, so `URLSession.shared` (and, on Apple
    /// platforms, `NSURLConnection`) caches from now on. Call it once, at launch.
    ///
    /// On Linux the shared session only consults classes registered *before* it was created;
    /// this method checks with a probe request that only the protocol answers, logs a warning
    /// through ``CachingConfiguration/log`` and returns ``RegistrationStatus/registeredTooLate``
    /// when registration came too late, instead of silently caching nothing. The probe creates
    /// `URLSession.shared` if nothing had yet. Only one configuration is active per process:
    /// registering again replaces it.
    @discardableResult
    public static func register(_ configuration: CachingConfiguration = CachingConfiguration()) -> RegistrationStatus {
        Installation.install(configuration)
        _ = URLProtocol.registerClass(CachingURLProtocol.self)
        Registration.moveFoundationProtocolsBehindOurs()
        let status = Registration.probeSharedSession()
        if status == .registeredTooLate {
            configuration.log("URLSession.shared existed before CachingURLProtocol.register() and will not cache. "
                + "Register before the first use of URLSession.shared, or use CachingURLProtocol.inject(into:) "
                + "on the configuration of a session you create.")
        }
        return status
    }

    /// Undoes ``register(_:)``: the class is unregistered and the installation removed, so sessions
    /// the protocol was injected into load everything through Foundation again. Loads already
    /// running finish normally.
    public static func unregister() {
        URLProtocol.unregisterClass(CachingURLProtocol.self)
        Installation.uninstall()
    }

    /// Puts the protocol first in `sessionConfiguration.protocolClasses` (removing any other
    /// occurrence), so a session created from it caches. Installs `configuration` when one is
    /// given, or the default configuration when nothing is installed yet; otherwise the
    /// installed configuration serves this session too (one configuration per process).
    ///
    /// The session configuration's `httpAdditionalHeaders` and `timeoutIntervalForRequest` are
    /// applied to the session's requests by the protocol (on Linux Foundation would only add
    /// them after the protocol took the request): inject after setting them. Other session
    /// settings (cookie storage, proxies, TLS, connection limits) are those of the cache's own
    /// upstream session.
    public static func inject(into sessionConfiguration: URLSessionConfiguration, using configuration: CachingConfiguration? = nil) {
        if let configuration {
            Installation.install(configuration)
        } else if Installation.current == nil {
            Installation.install(CachingConfiguration())
        }
        let protocolClass: AnyClass = SessionClasses.protocolClass(for: SessionSettings(sessionConfiguration))
        let others = (sessionConfiguration.protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        sessionConfiguration.protocolClasses = [protocolClass] + others
    }

    /// The installed configuration, or nil when the protocol is not installed.
    public static var configuration: CachingConfiguration? {
        Installation.current?.configuration
    }

    /// Counters since the current configuration was installed (zero when none is).
    public static var statistics: CacheStatistics {
        Installation.current?.statistics ?? CacheStatistics()
    }

    /// Loads `request` in two steps: the stored response at once, marked
    /// ``CachedThenFreshResponse/Source/cache(isStale:)``, then — after asking the origin
    /// (revalidating when the stored response has validators) — the origin's response, marked
    /// ``CachedThenFreshResponse/Source/origin``, only if it differs. The sequence ends after the
    /// origin answered; it throws if the origin failed (after the stored answer, if there was one).
    ///
    /// This is MKNetworkKit's "completion handler called twice" made explicit; plain URLSession
    /// callers never get two answers. It uses the installed configuration (the default one when
    /// nothing is installed) and works without a session. Cancelling the consuming task cancels
    /// the origin request unless another load shares it.
    public static func cachedThenFresh(for request: URLRequest) -> AsyncThrowingStream<CachedThenFreshResponse, Error> {
        if Installation.current == nil {
            Installation.install(CachingConfiguration())
        }
        guard let engine = Installation.current else {
            return AsyncThrowingStream { $0.finish(throwing: CachingError(.notInstalled, "no installation")) }
        }
        return engine.cachedThenFresh(request)
    }

    /// Offline mode: when true, GETs are answered only from the cache (stale answers included,
    /// marked in `Cache-Status`); anything not stored fails with `URLError.resourceUnavailable`.
    /// Default false. Applies to the installed configuration.
    public static var isOffline: Bool {
        get { Installation.current?.isOffline ?? false }
        set { Installation.current?.isOffline = newValue }
    }
}

/// The process-wide installation: at most one engine is active.
enum Installation {
    private static let engine = Locked<CacheEngine?>(nil)

    static var current: CacheEngine? { engine.withLock { $0 } }

    static func install(_ configuration: CachingConfiguration) {
        let previous = engine.withLock { engine -> CacheEngine? in
            defer { engine = makeEngine(configuration) }
            return engine
        }
        previous?.shutdown()
    }

    /// An engine whose upstream requests never come back through the caching protocol.
    static func makeEngine(_ configuration: CachingConfiguration) -> CacheEngine {
        CacheEngine(configuration: configuration, leavingOut: { $0 is CachingURLProtocol.Type })
    }

    static func uninstall() {
        engine.withLock { engine -> CacheEngine? in
            defer { engine = nil }
            return engine
        }?.shutdown()
    }
}

/// The registration probe: a request to a URL that only the protocol answers.
enum Registration {
    /// Port 9 (discard) on loopback: if Foundation's own HTTP protocol gets the request instead,
    /// it fails at once with "connection refused", never hangs on DNS.
    static let probeURL = URL(string: "http://127.0.0.1:9/__caching-protocol-probe__")!
    private static let probeHeader = "X-Caching-Protocol-Probe"

    /// swift-corelibs-foundation consults registered classes in registration order, and registers
    /// its own HTTP protocol when the first session of the process is created. If any session
    /// existed before `register()`, Foundation's HTTP protocol would sit ahead of ours in the list
    /// `URLSession.shared` copies when it is created. Re-registering Foundation's classes puts
    /// them behind ours. (Apple platforms consult the newest registration first.)
    static func moveFoundationProtocolsBehindOurs() {
        #if canImport(FoundationNetworking)
        for foundationClass in URLSessionConfiguration.default.protocolClasses ?? [] where foundationClass != CachingURLProtocol.self {
            URLProtocol.unregisterClass(foundationClass)
            _ = URLProtocol.registerClass(foundationClass)
        }
        #endif
    }

    static func isProbe(_ request: URLRequest) -> Bool {
        request.url == probeURL
    }

    static func probeAnswer(for request: URLRequest) -> Answer {
        let response = HTTPURLResponse(url: probeURL, statusCode: 204, httpVersion: "HTTP/1.1",
                                       headerFields: [probeHeader: "1"])!
        return .response(response, Data())
    }

    /// Sends the probe through `URLSession.shared` and waits (at most 5 s) for the answer.
    static func probeSharedSession() -> RegistrationStatus {
        #if canImport(FoundationNetworking)
        let answered = Locked(false)
        let done = DispatchSemaphore(value: 0)
        let task = URLSession.shared.dataTask(with: probeURL) { _, response, _ in
            let http = response as? HTTPURLResponse
            answered.withLock { $0 = http?.statusCode == 204 && http?.value(forHTTPHeaderField: probeHeader) == "1" }
            done.signal()
        }
        task.resume()
        if done.wait(timeout: .now() + 5) == .timedOut { task.cancel() }
        return answered.withLock { $0 } ? .active : .registeredTooLate
        #else
        // Apple's shared session consults registered classes whenever a task starts.
        return .active
        #endif
    }
}
