import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What ``CachingURLProtocol/register(_:)`` found out about `URLSession.shared`.
public enum RegistrationStatus: Sendable, Equatable {
    /// `URLSession.shared` answers through the protocol (Apple platforms: the shared session
    /// consults registered classes whenever a task starts).
    case active
    /// `URLSession.shared` was created before the protocol was registered and will never
    /// consult it (swift-corelibs-foundation fixes the shared session's protocol list when the
    /// session is created). ``CachingURLProtocol/register(_:)`` no longer returns it: on Linux it
    /// cannot tell without creating the shared session (see ``unverified``).
    case registeredTooLate
    /// Registered, and not checked (Linux). `URLSession.shared` consults the protocol when the
    /// process made no `URLSession` before ``CachingURLProtocol/register(_:)``:
    /// swift-corelibs-foundation registers its own protocols when the first session is made,
    /// behind those registered by then, and the shared session consults them in that order
    /// (`Docs/foundation-facts.md`, L24).
    /// Whether a session was made cannot be seen without making one, which would put
    /// Foundation's HTTP protocol ahead of every protocol the app registers afterwards (a stub, a
    /// logger), so `register()` does not look. Register at launch, before anything makes a
    /// session, or use ``CachingURLProtocol/inject(into:using:delegate:)`` for a session of your own.
    case unverified
}

extension CachingURLProtocol {
    /// Makes `configuration` the configuration of `URLSession.shared` and registers the
    /// protocol, so the shared session (and, on Apple platforms, `NSURLConnection`) caches from
    /// now on. Call it once, at launch, before anything makes a `URLSession`. Sessions given a
    /// configuration of their own with ``inject(into:using:delegate:)`` are not affected; those
    /// injected without one follow this one.
    ///
    /// Protocols the app registers keep working: on Linux the shared session consults registered
    /// classes in the order they were registered, and Foundation's own come after those
    /// registered before the first session was made. One registered before `register()` is asked
    /// first and loads what it takes; one registered after it is asked for what the layer leaves
    /// to Foundation, and answers the cache's own requests for the shared session, as it would
    /// the app's (Apple consults the newest registration first: there it is asked first).
    ///
    /// It neither makes a session nor sends anything, so it cannot see on Linux whether
    /// `URLSession.shared` existed already, and returns ``RegistrationStatus/unverified`` there
    /// (``RegistrationStatus/active`` on Apple platforms). Registering again replaces the shared
    /// session's configuration for requests that start afterwards. Returns quickly
    /// (`Docs/benchmarks.md`, launch): the disk index loads on the cache's own worker.
    @discardableResult
    public static func register(_ configuration: CachingConfiguration = CachingConfiguration()) -> RegistrationStatus {
        Installation.install(configuration)
        _ = URLProtocol.registerClass(CachingURLProtocol.self)
        #if canImport(FoundationNetworking)
        return .unverified
        #else
        return .active
        #endif
    }

    /// Undoes ``register(_:)`` and every ``inject(into:using:delegate:)``: the class is unregistered and
    /// every configuration unbound, so all sessions the protocol was injected into load
    /// everything through Foundation from now on. Loads already running finish normally.
    /// Invalidate those sessions and make new ones after injecting again: the protocol classes
    /// they hold are reused by later injections, so a session kept across `unregister()` may
    /// take up a configuration injected afterwards.
    public static func unregister() {
        URLProtocol.unregisterClass(CachingURLProtocol.self)
        Installation.uninstall()
        SessionClasses.unbindAll()
    }

    /// Puts the protocol into `sessionConfiguration.protocolClasses` where Foundation's own HTTP
    /// loading sits — just before the first of Foundation's classes, or last when the list has
    /// none of them (as Mocker has it) — removing any other occurrence, so the sessions created
    /// from it cache:
    ///
    /// - with `configuration`: with that configuration — its cache, policy and rules, counters
    ///   and offline switch — independently of every other session and of ``register(_:)``;
    ///   injecting the same configuration into several session configurations shares it;
    /// - without: with the configuration ``register(_:)`` installed, whichever it is when a
    ///   request starts (the default configuration is installed when there is none yet).
    ///
    /// The app's own protocol classes keep their place: one listed before Foundation's (a stub,
    /// a logger) is asked first and loads what it takes without the layer ever seeing it, as it
    /// would without the layer. The cache's own requests go through the app's classes too, in
    /// their order, then Foundation's.
    ///
    /// The binding is made when this is called: sessions created from `sessionConfiguration`
    /// *before* it, like sessions made from a copy taken before, never see the protocol. Classes
    /// the app adds to `sessionConfiguration` afterwards are consulted by its sessions, but not
    /// by the cache's own requests: add them first. The 32 configurations injected (or used) most
    /// recently stay bound; sessions of an older one load through Foundation, uncached — an app
    /// that makes a session for each token refresh does not keep every token it ever had.
    ///
    /// The session configuration's `httpAdditionalHeaders` and `timeoutIntervalForRequest` are
    /// applied to the session's requests by the protocol (on Linux Foundation would only add
    /// them after the protocol took the request): inject after setting them. Other session
    /// settings (cookie and credential storage, proxies, TLS, connection limits) are those of the
    /// cache's own upstream session, which sessions differing only in their header fields share.
    ///
    /// Name the sessions' delegate with ``inject(into:using:delegate:)`` — nil when they have
    /// none — since a protocol never sees its session's delegate. Without it, on Apple platforms,
    /// the sessions' delegate is unknown and may pin certificates, so it is treated as judging
    /// server trust (see there): the sessions get an upstream session, exchanges and stored
    /// answers apart from `URLSession.shared` and from sessions of other settings, a stale
    /// stored answer waits for its revalidation, and ``CachingConfiguration/prefetch(_:maximumConcurrent:)``
    /// through them reaches no `https` origin (no load of theirs is there to judge the
    /// certificate; the server-trust challenge is cancelled). Redirects are reported and the load
    /// then ends as cancelled, as for a delegate that decides none. On Linux this changes
    /// nothing: swift-corelibs-foundation raises no server-trust challenge to a delegate.
    public static func inject(into sessionConfiguration: URLSessionConfiguration, using configuration: CachingConfiguration? = nil) {
        inject(into: sessionConfiguration, using: configuration, traits: .unnamed(in: sessionConfiguration))
    }

    /// ``inject(into:using:)`` for sessions made with `delegate` (nil: sessions without one). On
    /// Apple platforms:
    ///
    /// - **A delegate that implements a challenge method** (`urlSession(_:didReceive:completionHandler:)`
    ///   or the task-level one) judges server trust — certificate pinning, for one. Its sessions
    ///   then get answers only from connections whose server-trust challenge reached it through
    ///   one of their loads: an upstream session and exchanges of their own, stored answers kept
    ///   apart from every other session's (by the delegate's type), no stale-while-revalidate in
    ///   the background (the load waits for the revalidation instead), and a server-trust
    ///   challenge no load of theirs can take is cancelled, never given default handling.
    /// - **A delegate that implements `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)`**
    ///   may refuse a redirect: the protocol reports each redirect and hands the session the 3xx
    ///   with its body right after, which the session delivers as the task's answer when the
    ///   delegate refuses. Without it, a redirect is reported and the load then ends as cancelled
    ///   (as in Apple's CustomHTTPProtocol sample), which a refusal would turn into an error.
    ///
    /// A delegate that implements neither, and `nil`, say the system judges trust and nobody
    /// refuses a redirect: the sessions share the upstream session, exchanges and stored answers
    /// of every session with the same settings (`URLSession.shared`'s, for a default
    /// configuration), and get stale-while-revalidate answers at once (a task's own delegate is
    /// still looked at). On Linux `delegate` changes nothing: swift-corelibs-foundation raises no
    /// server-trust challenge to a delegate, and the protocol asks the task's delegate about
    /// redirects itself.
    public static func inject(into sessionConfiguration: URLSessionConfiguration, using configuration: CachingConfiguration? = nil,
                              delegate: (any URLSessionDelegate)?) {
        inject(into: sessionConfiguration, using: configuration, traits: .of(delegate))
    }

    private static func inject(into sessionConfiguration: URLSessionConfiguration, using configuration: CachingConfiguration?,
                               traits: DelegateTraits) {
        let engine = configuration.map(Installation.engine(for:))
        if configuration == nil, Installation.current == nil {
            Installation.install(CachingConfiguration())
        }
        let appClasses = (sessionConfiguration.protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        let recorded = sessionConfiguration.copy() as! URLSessionConfiguration
        recorded.protocolClasses = appClasses
        let settings = SessionSettings(recorded, delegate: traits)
        let protocolClass: AnyClass = SessionClasses.protocolClass(for: settings, engine: engine)
        let place = SessionSettings.firstFoundationProtocolIndex(in: appClasses) ?? appClasses.endIndex
        var placed = appClasses
        placed.insert(protocolClass, at: place)
        sessionConfiguration.protocolClasses = placed
    }

    /// The configuration ``register(_:)`` installed (or ``inject(into:using:delegate:)`` without a
    /// configuration installed for want of one), or nil.
    public static var configuration: CachingConfiguration? {
        Installation.current?.configuration
    }

    /// Counters of the registered configuration (zero when none is): its
    /// ``CachingConfiguration/statistics``. A session with a configuration of its own counts there.
    public static var statistics: CacheStatistics {
        Installation.current?.configuration.statistics ?? CacheStatistics()
    }

    /// Loads `request` in two steps: the stored response at once, marked
    /// ``CachedThenFreshResponse/Source/cache(isStale:)``, then — after asking the origin
    /// (revalidating when the stored response has validators) — the origin's response, marked
    /// ``CachedThenFreshResponse/Source/origin``, only if it differs. The sequence ends after the
    /// origin answered; it throws if the origin failed (after the stored answer, if there was one).
    ///
    /// This is MKNetworkKit's "completion handler called twice" made explicit; plain URLSession
    /// callers never get two answers. It uses the installed configuration (the default one when
    /// nothing is installed) and works without a session: the request is made, and the stored
    /// answer found, as `URLSession.shared`'s (for the user the configuration's
    /// ``CachingConfiguration/userIdentity`` says it is for). Cancelling the consuming task cancels
    /// the origin request unless another load shares it.
    public static func cachedThenFresh(for request: URLRequest) -> AsyncThrowingStream<CachedThenFreshResponse, Error> {
        if Installation.current == nil {
            Installation.install(CachingConfiguration())
        }
        guard let engine = Installation.current else {
            return AsyncThrowingStream { $0.finish(throwing: CachingError(.notInstalled, "no installation")) }
        }
        return engine.cachedThenFresh(request, from: .sharedSession)
    }

    /// ``CachingConfiguration/prefetch(_:maximumConcurrent:)`` with the configuration
    /// ``register(_:)`` installed (the default configuration when nothing is installed): fills the
    /// cache `URLSession.shared` answers from, with requests made as `URLSession.shared` makes
    /// them. For a session of your own, inject a configuration of its own and call its `prefetch`.
    public static func prefetch(_ urls: [URL], maximumConcurrent: Int = 4) async -> PrefetchSummary {
        if Installation.current == nil { Installation.install(CachingConfiguration()) }
        guard let engine = Installation.current else { return PrefetchSummary(failed: urls.count) }
        return await engine.prefetch(urls, from: .sharedSession, maximumConcurrent: maximumConcurrent)
    }

    /// Offline mode of the registered configuration (its ``CachingConfiguration/isOffline``);
    /// false, and setting it does nothing, when none is registered. Default false.
    public static var isOffline: Bool {
        get { Installation.current?.configuration.isOffline ?? false }
        set { Installation.current?.configuration.isOffline = newValue }
    }
}

extension CachingConfiguration {
    /// Fills this configuration's cache ahead of time with the responses to GETs of `urls`, so
    /// that the app's loads of them are answered from the cache — for example the images of the
    /// next screen, or what an app needs offline.
    ///
    /// Each URL goes through the same path as an app's load, with this configuration's rules,
    /// policy and limits (`maximumEntrySize`): a URL with a fresh stored response sends nothing, a
    /// stale one is revalidated, a URL a rule bypasses is skipped, and a load of the same URL that
    /// runs meanwhile — the app's or another prefetch's — shares one upstream request with it.
    /// The requests are made as the session configuration this configuration was last injected
    /// into makes them (its additional header fields, cookies, timeout and the rest of its
    /// settings; `URLSession.shared`'s when it was registered since), and what they
    /// store is what that session's loads find: for the user they are for
    /// (``userIdentity``), and on Apple platforms under that session's trust judge and with the
    /// fields its loader adds. A session injected without naming its delegate is its own judge
    /// there: its prefetch reaches no `https` origin (nobody of it can judge the certificate).
    /// No body is delivered to anyone. At most `maximumConcurrent` requests (default 4, at least
    /// 1) run at once.
    ///
    /// Cancelling the calling task stops it: no new request is sent, and the ones running are
    /// cancelled (unless an app's load waits on the same request); they count as failed.
    ///
    /// The configuration need not be injected anywhere: its installation is made on first use.
    /// Threading: call it from any task; it suspends until every URL is settled.
    public func prefetch(_ urls: [URL], maximumConcurrent: Int = 4) async -> PrefetchSummary {
        let engine = Installation.engine(for: self)
        return await engine.prefetch(urls, from: engine.sessionlessSettings, maximumConcurrent: maximumConcurrent)
    }

    /// ``CachingURLProtocol/cachedThenFresh(for:)`` with this configuration — its cache, policy,
    /// rules, identity and counters — rather than the registered one, made and looked up as the
    /// session configuration it was last injected into makes and reads requests (as
    /// ``prefetch(_:maximumConcurrent:)``). It need not be injected anywhere.
    public func cachedThenFresh(for request: URLRequest) -> AsyncThrowingStream<CachedThenFreshResponse, Error> {
        let engine = Installation.engine(for: self)
        return engine.cachedThenFresh(request, from: engine.sessionlessSettings)
    }
}
