import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a session's configuration adds to its requests that a `URLProtocol` never sees.
///
/// swift-corelibs-foundation adds `httpAdditionalHeaders` and applies `timeoutIntervalForRequest`
/// inside its own HTTP protocol, after the protocol for a request has been chosen, so a request
/// that `CachingURLProtocol` takes arrives without them. Left alone, a session that sets
/// `Authorization` in its configuration would send unauthenticated requests through the cache.
/// ``CachingURLProtocol/inject(into:using:)`` records them here and applies them to every request
/// of that session before anything else looks at it (the credential fingerprint and `Vary`
/// included).
struct SessionSettings: Sendable, Hashable {
    /// Header fields the request gets unless it sets them itself (the request wins, as in
    /// Foundation).
    var additionalHeaders: [String: String]
    /// The session's request timeout, used when the request kept `URLRequest`'s default.
    var timeoutIntervalForRequest: TimeInterval

    /// `URLRequest`'s default `timeoutInterval`, and `URLSessionConfiguration`'s default
    /// `timeoutIntervalForRequest`.
    static let defaultTimeout: TimeInterval = 60

    /// The settings of `configuration`, or nil when it adds nothing to its requests.
    init?(_ configuration: URLSessionConfiguration) {
        var headers: [String: String] = [:]
        for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
            guard let name = name as? String else { continue }
            headers[name] = (value as? String) ?? String(describing: value)
        }
        additionalHeaders = headers
        timeoutIntervalForRequest = configuration.timeoutIntervalForRequest
        if headers.isEmpty, timeoutIntervalForRequest == Self.defaultTimeout { return nil }
    }

    /// `request` as the session would have sent it.
    func apply(to request: URLRequest) -> URLRequest {
        var request = request
        for (name, value) in additionalHeaders where request.value(forHTTPHeaderField: name) == nil {
            request.setValue(value, forHTTPHeaderField: name)
        }
        if request.timeoutInterval == Self.defaultTimeout, timeoutIntervalForRequest > 0 {
            request.timeoutInterval = timeoutIntervalForRequest
        }
        return request
    }
}

/// A `CachingURLProtocol` class of its own for one injected session configuration: the class
/// object is the only thing that reaches the protocol from the session, so each configuration
/// with settings gets a distinct class, and the class finds its settings in `SessionClasses`.
final class SessionCachingURLProtocol<Slot>: CachingURLProtocol {}

/// Type arguments for `SessionCachingURLProtocol`: slot n is `SessionSlot` applied n times to
/// `SessionSlotRoot`, so any number of distinct classes can be made at run time.
enum SessionSlotRoot {}
enum SessionSlot<Inner> {}

/// The per-session classes made so far and their settings.
enum SessionClasses {
    private struct Registry {
        var classes: [SessionSettings: CachingURLProtocol.Type] = [:]
        var settings: [ObjectIdentifier: SessionSettings] = [:]
    }
    private static let registry = Locked(Registry())

    /// The class that applies `settings`: the same class for equal settings, a new one otherwise.
    static func protocolClass(for settings: SessionSettings) -> CachingURLProtocol.Type {
        registry.withLock { registry in
            if let existing = registry.classes[settings] { return existing }
            let made = makeClass(slot: registry.classes.count)
            registry.classes[settings] = made
            registry.settings[ObjectIdentifier(made)] = settings
            return made
        }
    }

    /// The settings of `protocolClass`, or nil for `CachingURLProtocol` itself.
    static func settings(of protocolClass: AnyClass) -> SessionSettings? {
        guard protocolClass != CachingURLProtocol.self else { return nil }
        return registry.withLock { $0.settings[ObjectIdentifier(protocolClass)] }
    }

    private static func makeClass(slot: Int) -> CachingURLProtocol.Type {
        func wrap<Inner>(_: Inner.Type, remaining: Int) -> CachingURLProtocol.Type {
            remaining == 0 ? SessionCachingURLProtocol<Inner>.self : wrap(SessionSlot<Inner>.self, remaining: remaining - 1)
        }
        return wrap(SessionSlotRoot.self, remaining: slot)
    }
}
