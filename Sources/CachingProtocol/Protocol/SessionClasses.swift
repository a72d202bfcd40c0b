import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `CachingURLProtocol` class of its own for one injected session configuration: the class
/// object is the only thing that reaches the protocol from the session, so each configuration
/// with settings of its own gets a distinct class, and the class finds its settings in
/// `SessionClasses`.
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

    /// The class that applies `settings`: `CachingURLProtocol` itself for the standard
    /// settings, the same class for equal settings, a new one otherwise.
    static func protocolClass(for settings: SessionSettings) -> CachingURLProtocol.Type {
        if settings.isStandard { return CachingURLProtocol.self }
        return registry.withLock { registry in
            if let existing = registry.classes[settings] { return existing }
            let made = makeClass(slot: registry.classes.count)
            registry.classes[settings] = made
            registry.settings[ObjectIdentifier(made)] = settings
            return made
        }
    }

    /// The settings of `protocolClass`: the standard ones for `CachingURLProtocol` itself.
    static func settings(of protocolClass: AnyClass) -> SessionSettings {
        guard protocolClass != CachingURLProtocol.self else { return .standard }
        return registry.withLock { $0.settings[ObjectIdentifier(protocolClass)] } ?? .standard
    }

    private static func makeClass(slot: Int) -> CachingURLProtocol.Type {
        func wrap<Inner>(_: Inner.Type, remaining: Int) -> CachingURLProtocol.Type {
            remaining == 0 ? SessionCachingURLProtocol<Inner>.self : wrap(SessionSlot<Inner>.self, remaining: remaining - 1)
        }
        return wrap(SessionSlotRoot.self, remaining: slot)
    }
}
