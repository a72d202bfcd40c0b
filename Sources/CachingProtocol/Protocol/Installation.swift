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
        installed.sessionlessSettings = .sharedSession
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

    /// The upstream of the loads a class unbound since `canInit` took them sends as they are
    /// (`PassThroughLoad`): made when the first such load comes, never consulting the caching
    /// protocol's classes.
    static let passThroughUpstream = URLSessionUpstream(clock: Date.init, leavingOut: { $0 is CachingURLProtocol.Type })

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
///
/// A class is bound for as long as it is among the `maximumBindings` used most recently (by a
/// load's `canInit` or `startLoading`, or by an injection): an app that makes a session of its
/// own for every token refresh would otherwise keep every configuration (and every token) it
/// ever injected. A class whose binding was dropped is never bound again — a session may still
/// hold it — and its sessions load through Foundation from then on, as without the layer.
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

    /// A class's binding, its key and when it was last used (a tick of `Registry.clock`).
    private struct Bound {
        let binding: Binding
        let key: Key
        var lastUse: UInt64
    }

    private struct Registry {
        var classes: [Key: CachingURLProtocol.Type] = [:]
        var bindings: [ObjectIdentifier: Bound] = [:]
        /// Classes whose binding `unbindAll` dropped, given out again before new ones are made.
        var unused: [CachingURLProtocol.Type] = []
        /// Every class made here (bound or not).
        var made: Set<ObjectIdentifier> = []
        /// The settings of the classes whose binding was dropped most recently, at most
        /// `maximumBindings` of them, oldest first: what a load that passed `canInit` just before
        /// is sent with (`ClassBinding.unbound`).
        var dropped: [(id: ObjectIdentifier, settings: SessionSettings)] = []
        /// Counts uses, to find the binding used least recently.
        var clock: UInt64 = 0

        mutating func tick() -> UInt64 {
            clock += 1
            return clock
        }

        /// Keeps the settings of `id`'s binding, which was just dropped.
        mutating func drop(_ id: ObjectIdentifier, settings: SessionSettings) {
            dropped.removeAll { $0.id == id }
            dropped.append((id, settings))
            if dropped.count > SessionClasses.maximumBindings { dropped.removeFirst(dropped.count - SessionClasses.maximumBindings) }
        }
    }
    private static let registry = Locked(Registry())

    /// How many classes stay bound (see `SessionClasses`). An app whose sessions with distinct
    /// settings outnumber it loses caching on those used least recently, never a load.
    static let maximumBindings = 32

    /// The class that applies `settings` and caches with `engine` (nil: the registered
    /// configuration's): the same class for an equal pair, another one otherwise. Never
    /// `CachingURLProtocol` itself, which serves `URLSession.shared` (`SessionSettings.sharedSession`).
    /// `engine`'s loads without a session are made as this session's from now on
    /// (`CacheEngine.sessionlessSettings`).
    static func protocolClass(for settings: SessionSettings, engine: CacheEngine?) -> CachingURLProtocol.Type {
        let key = Key(settings: settings, engine: engine.map(ObjectIdentifier.init))
        engine?.sessionlessSettings = settings
        return registry.withLock { registry in
            let now = registry.tick()
            if let existing = registry.classes[key] {
                registry.bindings[ObjectIdentifier(existing)]?.lastUse = now
                return existing
            }
            let made: CachingURLProtocol.Type
            if let recycled = registry.unused.popLast() {
                made = recycled
            } else {
                made = makeClass(slot: registry.made.count)
                registry.made.insert(ObjectIdentifier(made))
            }
            registry.classes[key] = made
            registry.bindings[ObjectIdentifier(made)] = Bound(binding: Binding(settings: settings, engine: engine), key: key, lastUse: now)
            registry.dropped.removeAll { $0.id == ObjectIdentifier(made) }
            if registry.bindings.count > maximumBindings,
               let oldest = registry.bindings.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                registry.bindings[oldest.key] = nil
                registry.classes[oldest.value.key] = nil
                registry.drop(oldest.key, settings: oldest.value.binding.settings)
            }
            return made
        }
    }

    /// What `protocolClass` is bound to (and marks it used); nil for a class made here whose
    /// binding was dropped. `CachingURLProtocol` itself serves `URLSession.shared`; subclasses
    /// not made here (an app's or a test's) have the standard settings and the registered
    /// configuration.
    static func binding(of protocolClass: AnyClass) -> Binding? {
        guard protocolClass != CachingURLProtocol.self else { return Binding(settings: .sharedSession, engine: nil) }
        let id = ObjectIdentifier(protocolClass)
        return registry.withLock { registry in
            let now = registry.tick()
            guard let binding = registry.bindings[id]?.binding else {
                return registry.made.contains(id) ? nil : Binding(settings: .standard, engine: nil)
            }
            registry.bindings[id]?.lastUse = now
            return binding
        }
    }

    /// Drops every binding (`unregister()`): sessions of those classes load through Foundation
    /// from now on, their engines shut down when nothing else holds them, and the classes are
    /// reused for later injections.
    static func unbindAll() {
        let engines = registry.withLock { registry -> [CacheEngine] in
            defer {
                for (id, bound) in registry.bindings.sorted(by: { $0.value.lastUse < $1.value.lastUse }) {
                    registry.drop(id, settings: bound.binding.settings)
                }
                registry.unused += registry.classes.values
                registry.classes = [:]
                registry.bindings = [:]
            }
            return registry.bindings.values.compactMap(\.binding.engine)
        }
        for engine in engines { engine.shutdown() }
    }

    /// What a protocol class serves when a load of it starts.
    enum ClassBinding {
        /// Sessions with these settings, cached by this engine.
        case bound(SessionSettings, CacheEngine)
        /// Nothing any more: the class's binding was dropped (`unregister()`, or it was the one
        /// used least recently), or nothing is installed for it. `lastSettings` are those it served
        /// when it was bound (nil once forgotten, after `maximumBindings` more were dropped): a
        /// load that `canInit` took just before is sent with them, uncached.
        case unbound(lastSettings: SessionSettings?)
    }

    /// What `protocolClass` serves now (see `binding(of:)`), its engine resolved: its own, or the
    /// one `register(_:)` installed.
    static func classBinding(of protocolClass: AnyClass) -> ClassBinding {
        guard let binding = binding(of: protocolClass) else {
            let id = ObjectIdentifier(protocolClass)
            return .unbound(lastSettings: registry.withLock { $0.dropped.last { $0.id == id }?.settings })
        }
        guard let engine = binding.engine ?? Installation.current else { return .unbound(lastSettings: binding.settings) }
        return .bound(binding.settings, engine)
    }

    private static func makeClass(slot: Int) -> CachingURLProtocol.Type {
        func wrap<Inner>(_: Inner.Type, remaining: Int) -> CachingURLProtocol.Type {
            remaining == 0 ? SessionCachingURLProtocol<Inner>.self : wrap(SessionSlot<Inner>.self, remaining: remaining - 1)
        }
        return wrap(SessionSlotRoot.self, remaining: slot)
    }
}
