import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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
    }
    private static let registry = Locked(Registry())

    /// The class that applies `settings` and caches with `engine` (nil: the registered
    /// configuration's): `CachingURLProtocol` itself for standard settings and no engine of
    /// their own, the same class for an equal pair, another one otherwise.
    static func protocolClass(for settings: SessionSettings, engine: CacheEngine?) -> CachingURLProtocol.Type {
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
