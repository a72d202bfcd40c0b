/// What the platform's URL loader does that the layer follows as a plain value rather than as code
/// of one platform: what Apple's loader does (Docs/foundation-facts.md, A6, A14, A19–A21), and what
/// swift-corelibs-foundation's does (L15, L16, L20, L22).
///
/// The process uses one set, its platform's (`native`), fixed at its first use. A test bundle may
/// choose Apple's before that (`choose(_:)`), so the whole suite can run on Linux with every Apple
/// rule that is a value — the fail-closed default for an unnamed delegate among them. The rest of
/// what differs is code that only one platform compiles, or a rule of the loader's client
/// (`ClientDelivery.Rules`), which corelibs' client cannot be driven by: tests run those with
/// Apple's rules at the engine seam (`CachingURLProtocol.deliveryRules`).
package struct LoaderRules: Sendable, Equatable {
    /// Whether the loader raises server-trust challenges to session delegates, so that a delegate
    /// the layer cannot see may pin certificates (`DelegateTraits.unnamed(in:)`): Apple's does
    /// (A14); corelibs' never does (L20).
    package var raisesServerTrust: Bool
    /// Whether the loader adds a session's cookies after a protocol saw the request, and makes each
    /// redirect hop's request anew (`SessionSettings.addsSessionCookies`, `redirectsPerHop`):
    /// Apple's (A6, A19). corelibs adds them when the task is made (L16) and copies every field of
    /// the request to the next hop (L15).
    package var addsCookiesAfterProtocols: Bool
    /// Whether the loader adds `User-Agent` and `Accept-Language` after a protocol saw the request
    /// (`SessionSettings.fieldsAddedWhenSent`): Apple's (A20); corelibs adds its own before (L22).
    package var addsFieldsAfterProtocols: Bool
    /// Whether a protocol may get a request's body as a stream although the app set `httpBody`
    /// (`CachingURLProtocol.everyBodyIsAStream`): on Apple platforms (A21); corelibs hands a
    /// protocol the `httpBody` the app set.
    package var bodiesMayComeAsStreams: Bool

    /// Apple's loader.
    package static let apple = LoaderRules(raisesServerTrust: true, addsCookiesAfterProtocols: true,
                                           addsFieldsAfterProtocols: true, bodiesMayComeAsStreams: true)
    /// swift-corelibs-foundation's loader.
    package static let corelibs = LoaderRules(raisesServerTrust: false, addsCookiesAfterProtocols: false,
                                              addsFieldsAfterProtocols: false, bodiesMayComeAsStreams: false)

    /// The rules of the platform the package was built for.
    #if canImport(FoundationNetworking)
    package static let native = corelibs
    #else
    package static let native = apple
    #endif

    /// The rules in force, fixed at the first read: `native`, or what `choose(_:)` asked for before.
    /// Every value derived from them is a `static let` read once, so a request pays no lock for them.
    package static let current: LoaderRules = choice.withLock { choice in
        choice.isFixed = true
        return choice.rules
    }

    private struct Choice {
        var rules = LoaderRules.native
        var isFixed = false
    }
    private static let choice = Locked(Choice())

    /// Chooses the rules this process runs with: for a test bundle, which calls it before anything
    /// reads them. Returns whether they are in force — false when they were fixed already, with
    /// others. Not public: an app runs with its platform's rules.
    @discardableResult
    package static func choose(_ rules: LoaderRules) -> Bool {
        choice.withLock { choice in
            if !choice.isFixed { choice.rules = rules }
        }
        return current == rules
    }
}
