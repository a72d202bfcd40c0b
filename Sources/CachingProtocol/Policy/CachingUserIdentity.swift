import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Who a request is for: how the cache tells the users of an app apart, so that an answer stored
/// for one user is served to that user only — never to another, nor to a request for nobody in
/// particular — fresh, stale, or after a revalidation.
///
/// The cache is a private cache, like a browser's: answers to requests with credentials
/// (`Authorization`, cookies) are stored under the same rules as any other, each kept for the
/// user the request was for. Set one in ``CachingConfiguration/userIdentity``:
///
/// ```swift
/// // The session cookie names the user; a load balancer's cookie does not.
/// CachingConfiguration(userIdentity: .cookie(named: "session"))
/// // The app knows who is signed in; a refreshed token is the same user.
/// CachingConfiguration(userIdentity: .custom { _ in Account.current?.id })
/// ```
///
/// - ``credentials`` (the default) needs nothing from the app and is always safe: every
///   credential is a user of its own, so a refreshed token, or a cookie that changes on every
///   response, starts that user's answers again (each URL is fetched once more).
/// - ``cookie(named:)``, ``header(_:)`` and ``custom(_:)`` name the user, so an answer stays a
///   hit across a token refresh and across cookies that change on every response, and a user
///   switch is still a miss. When they name nobody, the request's `Authorization`, if it has
///   one, is the user (a token is never served another token's answers unless the app said
///   they are one user); its cookies then count for nothing.
///
/// Only a digest of what identifies the user is kept, in memory and in the cache's files; the
/// credential, cookie or name itself never is. The identity sees the request as the session
/// sends it: with the session's `httpAdditionalHeaders`, and its cookie jar's cookies.
///
/// A response the origin sends with `Vary: Authorization` or `Vary: Cookie` is matched on that
/// field's value as well, as RFC 9111 §4.1 requires, whatever the identity says: a refreshed
/// token (or a changed cookie) is then a miss for it.
///
/// Threading: the identity is asked on the thread that loads or looks up the request
/// (Foundation's, the engine's, or the caller of the `URLCache` API), for every request the
/// cache takes, hits included: a ``custom(_:)`` closure must be fast, thread-safe and give the
/// same answer for the same request.
public struct CachingUserIdentity: Sendable {
    enum Source: Sendable {
        case credentials
        case header(String)
        case cookie(String)
        case custom(@Sendable (URLRequest) -> String?)
    }

    let source: Source

    /// Every credential is a user of its own: the request's `Authorization` and its whole
    /// `Cookie` field (every cookie on it, whichever the origin reads) together. The default.
    public static let credentials = CachingUserIdentity(source: .credentials)

    /// The value of the request header field `name` names the user (for example an account
    /// header the app sends); a request without it (or with it empty) is for the user its
    /// `Authorization` names, if it has one, and otherwise for nobody in particular.
    public static func header(_ name: String) -> CachingUserIdentity {
        CachingUserIdentity(source: .header(name))
    }

    /// The cookie `name` (compared case-sensitively, as cookie names are) names the user: other
    /// cookies on the request — a load balancer's stickiness cookie, analytics — never count. A
    /// request without it (or with it empty, as after a logout) is for the user its
    /// `Authorization` names, if it has one, and otherwise for nobody in particular.
    public static func cookie(named name: String) -> CachingUserIdentity {
        CachingUserIdentity(source: .cookie(name))
    }

    /// `identify` names the user of a request, or returns nil (or an empty string) for a
    /// request that is for nobody in particular — which is then for the user its
    /// `Authorization` names, if it has one. Called for every request the cache takes, on the
    /// thread that loads it: keep it fast, thread-safe and pure.
    public static func custom(_ identify: @escaping @Sendable (URLRequest) -> String?) -> CachingUserIdentity {
        CachingUserIdentity(source: .custom(identify))
    }

    /// Whether this is ``credentials``, which `CacheRequest` applies as it reads the request.
    var isCredentials: Bool {
        if case .credentials = source { return true }
        return false
    }

    /// The digest of the user `request` is for (`Partition.user`), given its `Authorization` and
    /// `Cookie` fields; nil when it is for nobody in particular.
    func user(of request: URLRequest, authorization: String?, cookie: String?) -> UInt64? {
        let named: String?
        switch source {
        case .credentials:
            return Self.digest(authorization: authorization, cookie: cookie)
        case .header(let name):
            named = request.value(forHTTPHeaderField: name)
        case .cookie(let name):
            named = cookie.flatMap { Self.value(ofCookie: name, in: $0) }
        case .custom(let identify):
            named = identify(request)
        }
        if let named, !named.isEmpty { return Self.digest(ofUser: named) }
        return authorization.flatMap { Self.digest(authorization: $0, cookie: nil) }
    }

    /// The digest of the user an identity names `name` (``header(_:)``, ``cookie(named:)``,
    /// ``custom(_:)``).
    static func digest(ofUser name: String) -> UInt64 {
        StableHash.hash("user\u{0}\(name)")
    }

    /// The digest of the credentials `authorization` and `cookie` (``credentials``), or nil when
    /// there are none.
    static func digest(authorization: String?, cookie: String?) -> UInt64? {
        guard authorization != nil || cookie != nil else { return nil }
        return StableHash.hash("authorization\u{0}\(authorization ?? "")\u{0}cookie\u{0}\(cookie ?? "")")
    }

    /// The value of the cookie `name` in a `Cookie` field value (`a=1; b=2`), or nil. Read byte by
    /// byte: it runs on every hit of an installation that names a cookie.
    static func value(ofCookie name: String, in field: String) -> String? {
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        for pair in field.utf8.split(separator: UInt8(ascii: ";")) {
            let trimmed = pair.drop(while: isSpace)
            guard let equals = trimmed.firstIndex(of: UInt8(ascii: "=")), trimmed[..<equals].elementsEqual(name.utf8) else { continue }
            var value = trimmed[trimmed.index(after: equals)...]
            while let last = value.last, isSpace(last) { value = value.dropLast() }
            return String(decoding: value, as: UTF8.self)
        }
        return nil
    }
}
