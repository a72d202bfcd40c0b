import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app session a request comes from, as the cache must honour it: what its configuration
/// adds to requests, and everything its traffic to the origin must obey (cookie jar and policy,
/// proxies, TLS, cellular and connectivity rules, connection limits).
///
/// A `URLProtocol` never sees its session, only its class, so `CachingURLProtocol.inject(into:using:delegate:)`
/// records the settings of each session configuration it is given (`SessionClasses`) and the
/// protocol reads them back here:
///
/// - **The request.** swift-corelibs-foundation adds `httpAdditionalHeaders` and applies
///   `timeoutIntervalForRequest` only inside its own HTTP protocol, after a protocol was chosen;
///   Apple adds the session's cookies only after the protocol saw the request. `apply(to:)`
///   does both, so the user the request is for and `Vary` see the request as the origin will.
///   The session's `requestCachePolicy` applies to requests that kept the default policy.
/// - **The upstream session.** `upstreamConfiguration(leavingOut:)` is a copy of the app's
///   configuration, so every setting the platform honours applies to the cache's own requests
///   too; only what the cache must own differs (see there).
struct SessionSettings: Sendable, Hashable {
    /// The recorded configuration, its fingerprint and the fingerprint's hash, in one object:
    /// settings are copied and compared on every request (bindings, loads, the keys of upstream
    /// sessions and exchanges), and a copy is then one retain, a hash one integer.
    private let recorded: RecordedConfiguration
    /// What makes two configurations different for the cache: the fields of `Fingerprint`,
    /// compared instead of the configuration object (which compares by identity).
    private var fingerprint: Fingerprint { recorded.fingerprint }

    /// The settings of a session made from `configuration`, whose delegate has `delegate`'s traits.
    /// `configuration.protocolClasses` are the app's own (the caching protocol's left out): the
    /// cache's upstream session consults them in their order (`upstreamConfiguration`).
    init(_ configuration: URLSessionConfiguration, delegate: DelegateTraits = .none) {
        self.init(recording: configuration.copy() as! URLSessionConfiguration, delegate: delegate, readsSharedSessionClasses: false)
    }

    /// Settings that keep `configuration` itself (a copy no one else holds).
    private init(recording configuration: URLSessionConfiguration, delegate: DelegateTraits, readsSharedSessionClasses: Bool) {
        recorded = RecordedConfiguration(configuration: configuration, delegate: delegate,
                                         readsSharedSessionClasses: readsSharedSessionClasses)
    }

    /// What the session's delegate decides that the cache must know of (`DelegateTraits`).
    var delegate: DelegateTraits { fingerprint.delegate }

    /// Whether the session's delegate judges server trust: then no answer reaches its sessions
    /// unless the connection's challenge reached one of their loads (no background revalidation,
    /// no answer shared or stored for sessions judged otherwise; `CacheEngine`).
    var judgesServerTrust: Bool { fingerprint.delegate.trustJudge != nil }

    /// `request` as the store must see it for this session: as it will be sent (with the fields
    /// the platform's loader adds, `fieldsAddedWhenSent`, unless it carries some already), and
    /// for a session whose delegate judges trust, finding only answers fetched for sessions with
    /// the same judge (`CacheRequest.judged(by:)`).
    func partitioned(_ request: CacheRequest) -> CacheRequest {
        let judge = fingerprint.delegate.trustJudge
        // The common case on Linux (no fields added when sent, no trust judge): nothing to copy.
        guard !Self.fieldsAddedWhenSent.isEmpty || judge != nil else { return request }
        var request = request
        if !Self.fieldsAddedWhenSent.isEmpty, request.fieldsAddedWhenSent.isEmpty {
            request = request.sent(with: Self.fieldsAddedWhenSent)
        }
        guard let judge else { return request }
        return request.judged(by: judge)
    }

    /// The header fields the platform's loader adds to a request after a protocol saw it, unless
    /// the request has them, by lowercased name: what `Vary` must see (`CacheRequest.header`).
    /// Apple's loader adds `User-Agent` and `Accept-Language` when it sends a request
    /// (Docs/foundation-facts.md, A20): so a variant stored for one language is not served after
    /// the user changed it, nor one stored for an app version after an update. The values stand
    /// for the loader's (the app's preferred languages, as `Accept-Language` lists them; the app's
    /// and the system's versions) and are never sent: the upstream session adds its own. Computed
    /// once: iOS relaunches an app whose languages change. On Linux none: corelibs adds both too
    /// (L22), and the layer keeps matching there as it did (`LoaderRules`).
    static let fieldsAddedWhenSent: [String: String] = LoaderRules.current.addsFieldsAfterProtocols ? [
        "accept-language": acceptLanguage(for: Locale.preferredLanguages),
        "user-agent": loaderUserAgent(),
    ] : [:]

    /// The `User-Agent` Apple's loader sends by default, as widely reported: the app's name and
    /// version, then CFNetwork's and Darwin's versions.
    private static func loaderUserAgent() -> String {
        let info = Bundle.main.infoDictionary ?? [:]
        let name = (info["CFBundleName"] as? String) ?? ProcessInfo.processInfo.processName
        let version = (info["CFBundleVersion"] as? String) ?? "-"
        let network = (Bundle(identifier: "com.apple.CFNetwork")?.infoDictionary?["CFBundleVersion"] as? String) ?? "-"
        var system = utsname()
        uname(&system)
        let release = withUnsafeBytes(of: &system.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "\(name)/\(version) CFNetwork/\(network) Darwin/\(release)"
    }

    /// An `Accept-Language` value for `languages`, most preferred first, as loaders send it: the
    /// first six, weighted 1, 0.9, 0.8…
    static func acceptLanguage(for languages: [String]) -> String {
        languages.prefix(6).enumerated().map { index, language in
            index == 0 ? language : "\(language);q=\(String(format: "%.1f", 1.0 - Double(index) / 10))"
        }.joined(separator: ", ")
    }

    /// The settings of `URLSessionConfiguration.default`: those of every injected configuration
    /// that changes none of them, and of loads no app session makes (prefetch, cached-then-fresh).
    static let standard = SessionSettings(URLSessionConfiguration.default)

    /// The settings of `URLSession.shared`, which ``CachingURLProtocol/register(_:)`` serves: those
    /// of `URLSessionConfiguration.default`, except for the protocol classes its upstream session
    /// consults. Those are the shared session's own, read when that upstream session is made
    /// (`upstreamConfiguration`): on Linux the shared session copies the classes registered when
    /// it is created (Docs/foundation-facts.md, L1, L12), so a protocol the app registered before
    /// its first use answers the cache's requests as it would the app's. Not read before: reading
    /// `URLSession.shared` creates it.
    static let sharedSession = SessionSettings(recording: URLSessionConfiguration.default, delegate: .none, readsSharedSessionClasses: true)

    /// `URLRequest`'s default `timeoutInterval`, and `URLSessionConfiguration`'s default
    /// `timeoutIntervalForRequest`.
    static let defaultTimeout: TimeInterval = 60

    /// Whether this layer must put the session's cookies on a request itself: Apple's loader
    /// adds them after the protocol saw the request (Docs/foundation-facts.md, A6); corelibs adds
    /// them when the task is created, before (Docs/foundation-facts.md, L16).
    static let addsSessionCookies = LoaderRules.current.addsCookiesAfterProtocols

    // MARK: The request

    /// `request` as the session would have sent it: its additional headers (the request's own
    /// win, as in Foundation), its timeout when the request kept the default, its cache policy
    /// when the request kept the default, and (on Apple) its cookies — unless the app set a
    /// `Cookie` field on the request itself, which Apple's loader sends instead of the jar's
    /// (Docs/foundation-facts.md, A25). The jar's cookies do replace a `Cookie` in the
    /// session's additional headers, as they do without the layer (A25).
    func apply(to request: URLRequest, addingCookies: Bool = addsSessionCookies) -> URLRequest {
        // A request without a URL is not the cache's; corelibs traps when one is changed.
        guard request.url != nil else { return request }
        let configuration = recorded.configuration
        // The common case, `URLSession.shared` and every configuration that keeps these defaults:
        // nothing to add (on Linux, where cookies are corelibs' to add, for every request).
        if recorded.keepsRequestDefaults, !(addingCookies && configuration.httpShouldSetCookies) { return request }
        // Read before the additional headers are added: only the app's own field wins.
        let addsJarCookies = addingCookies && request.httpShouldHandleCookies
            && request.value(forHTTPHeaderField: "Cookie") == nil
        var request = request
        for (name, value) in fingerprint.additionalHeaders where request.value(forHTTPHeaderField: name) == nil {
            request.setValue(value, forHTTPHeaderField: name)
        }
        // Set only when they change: each setter copies the whole request on Linux.
        if request.timeoutInterval == Self.defaultTimeout, fingerprint.timeoutIntervalForRequest > 0,
           fingerprint.timeoutIntervalForRequest != request.timeoutInterval {
            request.timeoutInterval = fingerprint.timeoutIntervalForRequest
        }
        if request.cachePolicy == .useProtocolCachePolicy, configuration.requestCachePolicy != .useProtocolCachePolicy {
            request.cachePolicy = configuration.requestCachePolicy
        }
        if addsJarCookies {
            request = Self.addingCookies(of: configuration, to: request)
        }
        return request
    }

    /// Whether the `Cookie` field of `sent`, which `apply(to:addingCookies:)` made from the app's
    /// `request`, is the session's (its jar's cookies, or its additional header fields) rather
    /// than the app's own: a field the app's request did not carry, where this layer adds the
    /// session's cookies. Apple's loader adds the session's anew for each redirect hop, and
    /// copies the app's own like its other fields (`redirected(_:from:perHop:)`).
    static func cookieIsSessions(in sent: URLRequest, madeFrom request: URLRequest, addingCookies: Bool = addsSessionCookies) -> Bool {
        addingCookies && request.value(forHTTPHeaderField: "Cookie") == nil && sent.value(forHTTPHeaderField: "Cookie") != nil
    }

    /// `request` with a `Cookie` field holding the cookies `configuration`'s jar has for its URL,
    /// when the configuration sets cookies: what Foundation adds to a session's requests (and,
    /// in corelibs, to a redirect it follows for a task without a delegate,
    /// `URLSession._Configuration.configure`).
    static func addingCookies(of configuration: URLSessionConfiguration, to request: URLRequest) -> URLRequest {
        guard configuration.httpShouldSetCookies, let jar = configuration.httpCookieStorage, let url = request.url,
              let cookie = HTTPCookie.requestHeaderFields(with: jar.cookies(for: url) ?? [])["Cookie"], !cookie.isEmpty
        else { return request }
        var request = request
        request.setValue(cookie, forHTTPHeaderField: "Cookie")
        return request
    }

    /// `request`, the target of a redirect followed for a load nobody in the app is asked about,
    /// as Foundation sends it: with the jar's cookies for its URL (corelibs'
    /// `URLSession._Configuration.configure`, run for such a redirect, replaces any `Cookie`
    /// field), so a cookie set on the way is sent on the next hop. With `perHop` (Apple's loader)
    /// a `Cookie` field still on the request is the app's own, which wins over the jar's
    /// (Docs/foundation-facts.md, A25). Make it with `redirected(_:from:perHop:)` first.
    func followingRedirect(_ request: URLRequest, perHop: Bool = Self.redirectsPerHop) -> URLRequest {
        if perHop, request.value(forHTTPHeaderField: "Cookie") != nil { return request }
        return Self.addingCookies(of: recorded.configuration, to: request)
    }

    /// Whether the platform's loader makes each redirect hop's request anew (Apple) rather than
    /// copying every header field of the request before it (corelibs, Docs/foundation-facts.md,
    /// L15). The same loader adds cookies only as a request is sent (A6).
    static let redirectsPerHop = addsSessionCookies

    /// `target`, the request a redirect of `request` leads to (`CachingPolicy.redirectTarget`
    /// copies every header field of `request`), as the platform's loader makes it. With
    /// `perHop` (Apple's loader, Docs/foundation-facts.md, A6, A19, A25): without the `Cookie`
    /// field this layer put on `request` for the session (`CacheRequest.cookieIsSessions`; the
    /// next hop gets the jar's for its own URL when it is loaded, or from `followingRedirect`) —
    /// a `Cookie` the app set itself is copied like its other fields — and without
    /// `Authorization` when `target` goes to another origin (scheme, host or port) — so a
    /// presigned storage URL an API redirects to never gets the API's credentials. Otherwise
    /// (corelibs, L15) `target` as it is: corelibs copies the fields, and the layer does the same.
    func redirected(_ target: URLRequest, from request: CacheRequest, perHop: Bool = Self.redirectsPerHop) -> URLRequest {
        redirected(target, from: request.urlRequest, cookieIsSessions: request.cookieIsSessions, perHop: perHop)
    }

    /// `redirected(_:from:perHop:)` for a request the layer does not look up (`PassThroughLoad`):
    /// `cookieIsSessions` as `CacheRequest.cookieIsSessions` says it.
    func redirected(_ target: URLRequest, from request: URLRequest, cookieIsSessions: Bool,
                    perHop: Bool = Self.redirectsPerHop) -> URLRequest {
        guard perHop else { return target }
        let dropsCookie = cookieIsSessions && target.value(forHTTPHeaderField: "Cookie") != nil
        let dropsAuthorization = target.value(forHTTPHeaderField: "Authorization") != nil
            && request.url.flatMap(CredentialUse.origin(of:)) != target.url.flatMap(CredentialUse.origin(of:))
        guard dropsCookie || dropsAuthorization else { return target }
        var hop = target
        if dropsCookie { hop.setValue(nil, forHTTPHeaderField: "Cookie") }
        if dropsAuthorization { hop.setValue(nil, forHTTPHeaderField: "Authorization") }
        return hop
    }

    /// These settings for requests that must go upstream exactly as given: the request an app's
    /// delegate gives back for a redirect, to which corelibs adds no cookies
    /// (`didCompleteRedirectCallback` starts it as it is). corelibs adds the jar's cookies to
    /// every task a session makes, so on Linux such requests go through an upstream session that
    /// adds none; elsewhere the upstream session adds none anyway (`upstreamConfiguration`).
    var forRequestsAsGiven: SessionSettings {
        guard !Self.addsSessionCookies, recorded.configuration.httpShouldSetCookies else { return self }
        let configuration = recorded.configuration.copy() as! URLSessionConfiguration
        configuration.httpShouldSetCookies = false
        return SessionSettings(recording: configuration, delegate: delegate, readsSharedSessionClasses: recorded.readsSharedSessionClasses)
    }

    /// These settings for a session whose delegate the cache cannot see (`DelegateTraits.unnamed(in:)`).
    var withUnnamedDelegate: SessionSettings {
        SessionSettings(recorded.configuration, delegate: .unnamed(in: recorded.configuration))
    }

    // MARK: The upstream session

    /// The configuration of the cache's own session for this app session: a copy of the app's,
    /// so its cookie jar and accept policy, proxies, TLS versions, cellular, expensive and
    /// constrained network rules, `waitsForConnectivity` and connection limits apply to the
    /// cache's requests as they would to the app's. What differs, and why:
    /// - `protocolClasses` leave the caching protocol out (`isCachingProtocol`): the cache never
    ///   intercepts its own traffic. The app's other classes stay, in their order, so a stub or
    ///   a logger of the app's answers or sees the cache's requests as it would the app's; when
    ///   none of Foundation's own classes is among them (an app that lists only its own, as
    ///   Mocker has it), Foundation's follow, so the cache's requests never fall through to the
    ///   registered classes, the caching protocol among them;
    /// - no `urlCache`, and `reloadIgnoringLocalCacheData`: the cache is this layer;
    /// - the app's `urlCredentialStorage` is kept: a challenge the app answers with default
    ///   handling finds the credentials its own session would find, the challenge forwarded to it
    ///   proposes the same stored credential, and a credential used is saved where the app's
    ///   session would save it. Answers fetched with a credential on the way are never stored nor
    ///   shared (`UpstreamClient`: `ResponseRoute.answeredWithCredential`);
    /// - no `httpAdditionalHeaders`: `apply(to:)` put them on the request already;
    /// - on Apple, `httpShouldSetCookies` off: `apply(to:)` put the cookies on the request, and
    ///   each redirect hop comes back through the protocol, which adds the jar's cookies again.
    ///   On Linux the upstream session sets the jar's cookies on every request it sends, as the
    ///   app's session does (the first request's are the ones the app's session already set),
    ///   except for the `forRequestsAsGiven` settings.
    func upstreamConfiguration(leavingOut isCachingProtocol: (AnyClass) -> Bool) -> URLSessionConfiguration {
        let configuration = recorded.configuration.copy() as! URLSessionConfiguration
        let appClasses = recorded.readsSharedSessionClasses ? Self.sharedSessionProtocolClasses() : (configuration.protocolClasses ?? [])
        configuration.protocolClasses = Self.endingWithFoundationProtocols(appClasses.filter { !isCachingProtocol($0) })
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpAdditionalHeaders = nil
        if Self.addsSessionCookies { configuration.httpShouldSetCookies = false }
        return configuration
    }

    /// What tells upstream sessions apart: the settings minus those `apply(to:)` carries on each
    /// request (additional header fields, the cache policy, which the upstream session overrides).
    /// Sessions that differ only there (a fresh `Authorization` in `httpAdditionalHeaders` for
    /// each token refresh) share one upstream session; their exchanges and stored answers stay
    /// apart (`Exchange.ID` compares the whole settings and the request's fields).
    var upstreamKey: UpstreamKey { recorded.upstreamKey }

    struct UpstreamKey: Hashable, Sendable {
        fileprivate let fingerprint: Fingerprint
    }

    /// Foundation's own protocol classes, as a new session configuration lists them (HTTP, FTP and
    /// WebSocket on Linux).
    static var foundationProtocolClasses: [AnyClass] {
        URLSessionConfiguration.default.protocolClasses ?? []
    }

    /// Where the first of Foundation's own classes is in `classes`: where Foundation's HTTP
    /// loading sits among an app's protocol classes. Nil when none of them is there.
    static func firstFoundationProtocolIndex(in classes: [AnyClass]) -> Int? {
        let foundation = Set(foundationProtocolClasses.map(ObjectIdentifier.init))
        return classes.firstIndex { foundation.contains(ObjectIdentifier($0)) }
    }

    /// `classes`, followed by Foundation's own classes when none of them is among them.
    static func endingWithFoundationProtocols(_ classes: [AnyClass]) -> [AnyClass] {
        firstFoundationProtocolIndex(in: classes) == nil ? classes + foundationProtocolClasses : classes
    }

    /// The classes `URLSession.shared` consults. On Linux its configuration lists them (the
    /// classes registered when it was made; it falls back to those registered since only for a
    /// request none of them takes). Apple's shared session consults the registered classes at
    /// every task, newest first, and lists only the system's: those are the upstream's there.
    private static func sharedSessionProtocolClasses() -> [AnyClass] {
        #if canImport(FoundationNetworking)
        URLSession.shared.configuration.protocolClasses ?? []
        #else
        foundationProtocolClasses
        #endif
    }

    static func == (lhs: SessionSettings, rhs: SessionSettings) -> Bool {
        lhs.recorded === rhs.recorded
            || (lhs.recorded.fingerprintHash == rhs.recorded.fingerprintHash && lhs.fingerprint == rhs.fingerprint)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(recorded.fingerprintHash)
    }
}

/// A copy of an app's session configuration, held but never mutated, with what is derived
/// from it once.
private final class RecordedConfiguration: @unchecked Sendable {
    // @unchecked: URLSessionConfiguration is not Sendable; this copy is only read (and copied).
    let configuration: URLSessionConfiguration
    let fingerprint: Fingerprint
    let fingerprintHash: Int
    let upstreamKey: SessionSettings.UpstreamKey
    /// Whether the upstream session consults `URLSession.shared`'s protocol classes
    /// (`SessionSettings.sharedSession`) rather than the configuration's.
    let readsSharedSessionClasses: Bool
    /// Whether the configuration adds no header fields, keeps the default request timeout and
    /// the default cache policy: then `apply(to:)` has nothing to change but cookies.
    let keepsRequestDefaults: Bool

    init(configuration: URLSessionConfiguration, delegate: DelegateTraits, readsSharedSessionClasses: Bool) {
        self.configuration = configuration
        self.readsSharedSessionClasses = readsSharedSessionClasses
        fingerprint = Fingerprint(configuration, delegate: delegate, sharedSession: readsSharedSessionClasses)
        fingerprintHash = fingerprint.hashValue
        var upstream = fingerprint
        upstream.additionalHeaders = [:]
        upstream.requestCachePolicy = 0
        upstreamKey = SessionSettings.UpstreamKey(fingerprint: upstream)
        keepsRequestDefaults = fingerprint.additionalHeaders.isEmpty
            && (fingerprint.timeoutIntervalForRequest <= 0 || fingerprint.timeoutIntervalForRequest == SessionSettings.defaultTimeout)
            && configuration.requestCachePolicy == .useProtocolCachePolicy
    }
}

/// The settings that tell two session configurations apart, as values.
private struct Fingerprint: Hashable, Sendable {
    var additionalHeaders: [String: String] = [:]
    /// The protocol classes, in order: which of the app's own come before the layer decides what
    /// the layer sees, and the upstream session consults them (`upstreamConfiguration`).
    var protocolClasses: [ObjectIdentifier]
    /// `SessionSettings.sharedSession`: the classes are the shared session's, read later.
    var sharedSession: Bool
    var timeoutIntervalForRequest: TimeInterval
    var timeoutIntervalForResource: TimeInterval
    var requestCachePolicy: UInt
    var cookieStorage: ObjectIdentifier?
    /// The credential storage the upstream session shares with the app's (`upstreamConfiguration`).
    var credentialStorage: ObjectIdentifier?
    var cookieAcceptPolicy: UInt
    var shouldSetCookies: Bool
    var allowsCellularAccess: Bool
    var networkServiceType: UInt
    var maximumConnectionsPerHost: Int
    /// `connectionProxyDictionary`, described (its values are `Any`).
    var proxies: String
    /// Apple-only settings, described.
    var platform: String
    /// What the session's delegate decides (trust, redirects).
    var delegate: DelegateTraits

    init(_ configuration: URLSessionConfiguration, delegate: DelegateTraits, sharedSession: Bool) {
        self.delegate = delegate
        self.sharedSession = sharedSession
        protocolClasses = (configuration.protocolClasses ?? []).map(ObjectIdentifier.init)
        for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
            guard let name = name as? String else { continue }
            additionalHeaders[name] = (value as? String) ?? String(describing: value)
        }
        timeoutIntervalForRequest = configuration.timeoutIntervalForRequest
        timeoutIntervalForResource = configuration.timeoutIntervalForResource
        requestCachePolicy = configuration.requestCachePolicy.rawValue
        cookieStorage = configuration.httpCookieStorage.map(ObjectIdentifier.init)
        credentialStorage = configuration.urlCredentialStorage.map(ObjectIdentifier.init)
        cookieAcceptPolicy = configuration.httpCookieAcceptPolicy.rawValue
        shouldSetCookies = configuration.httpShouldSetCookies
        allowsCellularAccess = configuration.allowsCellularAccess
        networkServiceType = configuration.networkServiceType.rawValue
        maximumConnectionsPerHost = configuration.httpMaximumConnectionsPerHost
        proxies = (configuration.connectionProxyDictionary ?? [:])
            .map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "\n")
        #if canImport(FoundationNetworking)
        platform = ""
        #else
        var platform = [
            "\(configuration.waitsForConnectivity)", "\(configuration.allowsExpensiveNetworkAccess)",
            "\(configuration.allowsConstrainedNetworkAccess)", "\(configuration.tlsMinimumSupportedProtocolVersion.rawValue)",
            "\(configuration.tlsMaximumSupportedProtocolVersion.rawValue)", "\(configuration.httpShouldUsePipelining)",
        ]
        #if os(iOS)
        // Multipath TCP is an iOS setting: the property is unavailable on macOS and tvOS.
        platform.append("\(configuration.multipathServiceType.rawValue)")
        #endif
        self.platform = platform.joined(separator: " ")
        #endif
    }
}
