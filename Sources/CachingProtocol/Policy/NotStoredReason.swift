/// Why a response fetched from the origin was handed to the app without being stored, as
/// ``CacheEvent/notStoredReason`` reports it and the answer's `Cache-Status` names it
/// (`detail=` followed by ``description``, e.g. `detail=noStore`).
///
/// A struct with named values rather than an enum, like ``CachingError/Code``: new reasons can
/// be added without breaking an app's `switch`. Compare with the static members
/// (`event.notStoredReason == .noStore`); `description` is the name.
///
/// There is no reason for `Cache-Control: private`: this is a private cache (one app, each
/// user's answers kept apart), which RFC 9111 §5.2.2.7 lets store such responses.
public struct NotStoredReason: Sendable, Hashable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }

    /// The reason's name, e.g. `noStore`.
    public var description: String { name }

    /// The response said `Cache-Control: no-store`.
    public static let noStore = NotStoredReason("noStore")
    /// The request said `Cache-Control: no-store`.
    public static let requestNoStore = NotStoredReason("requestNoStore")
    /// The status is not one the policy stores (``CachingPolicy/cacheableStatusCodes``; for the
    /// RFC 9111 preset, a status that is not cacheable by default and had no explicit freshness).
    public static let status = NotStoredReason("status")
    /// The response is larger than ``CachingURLCache/maximumEntrySize``.
    public static let tooLarge = NotStoredReason("tooLarge")
    /// The response said `Vary: *`: no later request can be known to match it.
    public static let varyAll = NotStoredReason("varyAll")
    /// The request carried `Authorization` or `Cookie`, the response did not say `public`, and
    /// the policy keeps such answers out (``CachingPolicy/storesCredentialedResponses`` false;
    /// by default they are stored, for their user).
    public static let credentials = NotStoredReason("credentials")
    /// The response had no freshness (or arrived stale) and no validator to revalidate it with:
    /// stored, it could only ever be fetched again.
    public static let noFreshness = NotStoredReason("noFreshness")
    /// A temporary redirect (302, 303, 307) without explicit freshness (`max-age`, `Expires`): it
    /// may lead elsewhere next time.
    public static let temporaryRedirect = NotStoredReason("temporaryRedirect")
    /// A redirect, and the policy stores none (``CachingPolicy/storesRedirects`` is off).
    public static let redirect = NotStoredReason("redirect")
    /// A redirect that sets a cookie: replayed from the cache it would set none, and where it
    /// leads may depend on it.
    public static let cookieSetOnRedirect = NotStoredReason("cookieSetOnRedirect")
    /// The app answered an authentication challenge with a credential on the way: the response
    /// belongs to that credential.
    public static let challengeCredential = NotStoredReason("challengeCredential")
    /// A partial (`206`) response that cannot be stored or adds nothing to what is stored.
    public static let partialContent = NotStoredReason("partialContent")
    /// The response said `must-understand` with a status the cache does not understand.
    public static let mustUnderstand = NotStoredReason("mustUnderstand")
    /// The body did not arrive whole: its length is not the `Content-Length` the response
    /// declared (the transfer ended early without an error), or the body was only handed on as it
    /// arrived. The app got what it would have got without the cache.
    public static let incompleteBody = NotStoredReason("incompleteBody")
    /// An event stream (`Content-Type: text/event-stream`): its events are news when they come.
    public static let eventStream = NotStoredReason("eventStream")
    /// A reason without a name of its own (for decisions made outside the policy's checks).
    public static let other = NotStoredReason("other")
}
