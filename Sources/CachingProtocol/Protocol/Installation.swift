import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The installations: the engine of every configuration in use, keyed by the configuration's
/// identity, and the one `URLSession.shared` (and sessions injected without a configuration)
/// use. The registry creates the engines and holds them weakly; the session classes and the
/// registration hold them.
enum Installation {
    private struct Registry {
        /// The engine of `register`'s configuration.
        var current: CacheEngine?
        /// Every engine made, by `ObjectIdentifier` of its configuration's identity. An
        /// identity lives as long as its engine (the engine holds it), so an identifier is never
        /// reused while its engine lives.
        var engines: [ObjectIdentifier: WeakEngine] = [:]
    }

    private struct WeakEngine {
        weak var engine: CacheEngine?
    }

    private static let registry = Locked(Registry())

    static var current: CacheEngine? { registry.withLock { $0.current } }

    static func install(_ configuration: CachingConfiguration) {
        let installed = engine(for: configuration)
        let previous = registry.withLock { registry -> CacheEngine? in
            defer { registry.current = installed }
            return registry.current
        }
        // Its upstream sessions are released; if injected sessions still use it, it makes new ones.
        if let previous, previous !== installed { previous.shutdown() }
    }

    /// The engine of `configuration`: the one its identity already has, or a new one whose
    /// upstream requests never come back through the caching protocol.
    static func engine(for configuration: CachingConfiguration) -> CacheEngine {
        let id = ObjectIdentifier(configuration.identity)
        return registry.withLock { registry in
            if let engine = registry.engines[id]?.engine { return engine }
            registry.engines = registry.engines.filter { $0.value.engine != nil }
            let made = CacheEngine(installing: configuration, leavingOut: { $0 is CachingURLProtocol.Type })
            registry.engines[id] = WeakEngine(engine: made)
            return made
        }
    }

    static func uninstall() {
        registry.withLock { registry -> CacheEngine? in
            defer { registry.current = nil }
            return registry.current
        }?.shutdown()
    }
}

/// A `CachingURLProtocol` class of its own for one injected session configuration: the class
/// object is the only thing that reaches the protocol from the session, so each configuration
/// with settings or a `CachingConfiguration` of its own gets a distinct class, and the class
/// finds its binding in `SessionClasses`.
final class SessionCachingURLProtocol<Slot>: CachingURLProtocol {}

/// Type arguments for `SessionCachingURLProtocol`: slot n is `SessionSlot` applied n times to
/// `SessionSlotRoot`, so any number of distinct classes can be made at run time.
enum SessionSlotRoot {}
enum SessionSlot<Inner> {}

/// The per-session classes made so far and what each is bound to.
enum SessionClasses {
    /// What one class serves: sessions with `settings`, cached by `engine` — or, when nil, by
    /// whatever configuration `register(_:)` installed (`Installation.current`).
    struct Binding {
        let settings: SessionSettings
        let engine: CacheEngine?
    }

    private struct Key: Hashable {
        let settings: SessionSettings
        let engine: ObjectIdentifier?
    }

    private struct Registry {
        var classes: [Key: CachingURLProtocol.Type] = [:]
        var bindings: [ObjectIdentifier: Binding] = [:]
        /// Classes whose binding `unbindAll` dropped, given out again before new ones are made.
        var unused: [CachingURLProtocol.Type] = []
        /// Every class made here (bound or not).
        var made: Set<ObjectIdentifier> = []
        /// The settings of the session configuration injected last with each engine (nil key:
        /// injected without a configuration of its own), for `prefetch`.
        var lastInjected: [ObjectIdentifier?: SessionSettings] = [:]
    }
    private static let registry = Locked(Registry())

    /// The class that applies `settings` and caches with `engine` (nil: the registered
    /// configuration's): `CachingURLProtocol` itself for standard settings and no engine of
    /// their own, the same class for an equal pair, another one otherwise.
    static func protocolClass(for settings: SessionSettings, engine: CacheEngine?) -> CachingURLProtocol.Type {
        registry.withLock { $0.lastInjected[engine.map(ObjectIdentifier.init)] = settings }
        if settings.isStandard, engine == nil { return CachingURLProtocol.self }
        let key = Key(settings: settings, engine: engine.map(ObjectIdentifier.init))
        return registry.withLock { registry in
            if let existing = registry.classes[key] { return existing }
            let made: CachingURLProtocol.Type
            if let recycled = registry.unused.popLast() {
                made = recycled
            } else {
                made = makeClass(slot: registry.made.count)
                registry.made.insert(ObjectIdentifier(made))
            }
            registry.classes[key] = made
            registry.bindings[ObjectIdentifier(made)] = Binding(settings: settings, engine: engine)
            return made
        }
    }

    /// The settings of the session configuration injected last with `engine` (nil: injected
    /// without a configuration of its own, so caching with `register`'s), or nil when none was.
    static func lastInjectedSettings(for engine: CacheEngine?) -> SessionSettings? {
        registry.withLock { $0.lastInjected[engine.map(ObjectIdentifier.init)] }
    }

    /// What `protocolClass` is bound to; nil for a class made here whose binding was dropped.
    /// `CachingURLProtocol` itself, and subclasses not made here (an app's or a test's), have
    /// the standard settings and the registered configuration.
    static func binding(of protocolClass: AnyClass) -> Binding? {
        let standard = Binding(settings: .standard, engine: nil)
        guard protocolClass != CachingURLProtocol.self else { return standard }
        let id = ObjectIdentifier(protocolClass)
        return registry.withLock { registry in
            registry.bindings[id] ?? (registry.made.contains(id) ? nil : standard)
        }
    }

    /// Drops every binding (`unregister()`): sessions of those classes load through Foundation
    /// from now on, their engines shut down when nothing else holds them, and the classes are
    /// reused for later injections.
    static func unbindAll() {
        let engines = registry.withLock { registry -> [CacheEngine] in
            defer {
                registry.unused += registry.classes.values
                registry.classes = [:]
                registry.bindings = [:]
                registry.lastInjected = [:]
            }
            return registry.bindings.values.compactMap(\.engine)
        }
        for engine in engines { engine.shutdown() }
    }

    private static func makeClass(slot: Int) -> CachingURLProtocol.Type {
        func wrap<Inner>(_: Inner.Type, remaining: Int) -> CachingURLProtocol.Type {
            remaining == 0 ? SessionCachingURLProtocol<Inner>.self : wrap(SessionSlot<Inner>.self, remaining: remaining - 1)
        }
        return wrap(SessionSlotRoot.self, remaining: slot)
    }
}

/// The registration check: a request only this protocol accepts, put to the shared session's
/// protocol classes.
enum Registration {
    /// Port 9 (discard) on loopback: never sent, but if it were, Foundation's HTTP protocol would
    /// fail at once with "connection refused", never hang on DNS.
    static let probeURL = URL(string: "http://127.0.0.1:9/__caching-protocol-probe__")!

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

    /// Whether `URLSession.shared` would load a request through this protocol: corelibs gives a
    /// task the first of its session's protocol classes that accepts the request
    /// (`URLSessionTask._protocolClass`), and only when none does, the first registered class
    /// that does. The probe is accepted by this protocol (`canInit`) and by Foundation's HTTP
    /// protocol, so the answer is whichever comes first in the shared session's list. Nothing
    /// is sent, and nothing waits: sending the probe would cost a launch a round of thread
    /// hand-offs competing with the disk index loading on the cache's worker.
    static func probeSharedSession() -> RegistrationStatus {
        #if canImport(FoundationNetworking)
        let probe = URLRequest(url: probeURL)
        let chosen: AnyClass? = (URLSession.shared.configuration.protocolClasses ?? []).first { candidate in
            (candidate as? URLProtocol.Type)?.canInit(with: probe) == true
        }
        guard let chosen else { return .active }   // the registered classes decide, ours among them
        return ObjectIdentifier(chosen) == ObjectIdentifier(CachingURLProtocol.self) ? .active : .registeredTooLate
        #else
        // Apple's shared session consults registered classes whenever a task starts.
        return .active
        #endif
    }
}
