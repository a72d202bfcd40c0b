import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A rule for some of a configuration's requests, chosen by host, path prefix or a predicate,
/// like an nginx `location`: leave them alone, judge them with another policy, keep their
/// responses for a lifetime the origin did not send, or cache POSTs that only read.
///
/// A configuration's ``CachingConfiguration/rules`` are tried in order for every request the
/// protocol is asked about; **the first rule that matches wins**, and a request no rule matches
/// follows the configuration's ``CachingConfiguration/policy``.
///
/// ```swift
/// CachingConfiguration(cache: cache, policy: .heuristic(), rules: [
///     .bypass(host: "analytics.example.com"),
///     .bypass(pathPrefix: "/api/stream"),
///     .freshFor(300, host: "api.example.com", pathPrefix: "/api/catalog"),
///     .policy(.rfc9111, host: "api.example.com"),
///     .bypass(where: { request in request.url?.query?.contains("nocache") == true }),
/// ])
/// ```
///
/// Matching: a host is compared without regard to case, exactly, or as `*.example.com`, which
/// matches every subdomain of `example.com` but not `example.com` itself. A path prefix is
/// compared with the URL's path, case-sensitively (`/api` matches `/api` and `/api/x`, and also
/// `/apis`: end it with `/` to mean a directory). A rule with both needs both.
///
/// A rule's policy feeds the same decisions as the configuration's: it changes numbers, never
/// the code path. Rules are values (`Sendable`); a `where:` predicate runs on the thread that
/// asks (Foundation's or the engine's), so it must be fast and thread-safe.
public struct CachingRule: Sendable {
    /// What a matching request gets.
    enum Action: Sendable {
        /// The protocol declines the request: Foundation loads it as without the layer (the body
        /// streams to the app as it arrives); nothing is looked up, stored or invalidated.
        case bypass
        /// Judged with this policy instead of the configuration's.
        case policy(CachingPolicy)
        /// Judged with the configuration's policy, except that a stored response is fresh for
        /// this many seconds.
        case freshFor(TimeInterval)
        /// A POST the app declares read-only (a GraphQL query, a search): stored and reused under
        /// the configuration's policy like a GET, keyed by its URL, its body and `Content-Type`.
        /// Matches POST requests only.
        case cachePOST
        /// Stored and looked up under a key made this way (`CachingRule+CacheKey.swift`). Key
        /// rules are a chain of their own: the first matching key rule makes the key, and the
        /// first matching rule of the other kinds says what happens to the request.
        case key(KeyTransform)
    }

    let action: Action
    private let host: HostPattern?
    private let pathPrefix: String?
    private let predicate: (@Sendable (URLRequest) -> Bool)?

    init(_ action: Action, host: String?, pathPrefix: String?, predicate: (@Sendable (URLRequest) -> Bool)? = nil) {
        self.action = action
        self.host = host.map(HostPattern.init)
        self.pathPrefix = pathPrefix
        self.predicate = predicate
    }

    /// Requests to `host` (`"api.example.com"` or `"*.example.com"`) are left to Foundation:
    /// never answered from the cache, never stored, and their bodies reach the app as they arrive.
    public static func bypass(host: String) -> CachingRule {
        CachingRule(.bypass, host: host, pathPrefix: nil)
    }

    /// Requests whose path starts with `pathPrefix` (on any host, or only on `host`) are left to
    /// Foundation, as ``bypass(host:)``.
    public static func bypass(pathPrefix: String, host: String? = nil) -> CachingRule {
        CachingRule(.bypass, host: host, pathPrefix: pathPrefix)
    }

    /// Requests for which `predicate` returns true are left to Foundation, as ``bypass(host:)``.
    /// It sees the request as the app made it (before the session's additional headers).
    public static func bypass(where predicate: @escaping @Sendable (URLRequest) -> Bool) -> CachingRule {
        CachingRule(.bypass, host: nil, pathPrefix: nil, predicate: predicate)
    }

    /// Requests to `host` (and under `pathPrefix`, when given) are judged with `policy`, for
    /// example ``CachingPolicy/rfc9111`` for an API whose answers must stay exactly as fresh as
    /// its origin says. With neither, the rule matches every request.
    public static func policy(_ policy: CachingPolicy, host: String? = nil, pathPrefix: String? = nil) -> CachingRule {
        CachingRule(.policy(policy), host: host, pathPrefix: pathPrefix)
    }

    /// Responses to requests to `host` (and under `pathPrefix`, when given) are fresh for
    /// `seconds` from when they arrived, whatever their `max-age`, `Expires`, `no-cache` or the
    /// heuristics would say: a lifetime the origin did not send. Everything else stays the
    /// configuration policy's: `no-store`, `Vary: *`, responses to requests with credentials and
    /// the statuses it does not store are still not stored, and a reload from the app still
    /// revalidates. A negative `seconds` counts as 0: revalidated on every use (so stored only
    /// with a validator).
    public static func freshFor(_ seconds: TimeInterval, host: String? = nil, pathPrefix: String? = nil) -> CachingRule {
        CachingRule(.freshFor(seconds.isFinite ? max(0, seconds) : 0), host: host, pathPrefix: pathPrefix)
    }

    /// POSTs to `host` (and under `pathPrefix`, when given) are read-only queries the cache may
    /// answer: each is keyed by its URL plus a digest of its body and `Content-Type`, and its
    /// response is stored and reused under the configuration's policy exactly like a GET's
    /// (freshness, validation with a conditional POST, `Vary`, credentials kept apart). The same
    /// query answered once is answered from the cache until it goes stale; another body is
    /// another entry. Only for APIs whose POSTs change nothing (GraphQL queries, searches): a
    /// POST that changes something must not match. With neither argument, every POST matches.
    /// Other POSTs behave as without the rule (sent as they are; one the origin accepts drops
    /// what is stored for its URL).
    public static func cachePOST(host: String? = nil, pathPrefix: String? = nil) -> CachingRule {
        CachingRule(.cachePOST, host: host, pathPrefix: pathPrefix)
    }

    /// POSTs for which `predicate` returns true are read-only queries the cache may answer, as
    /// ``cachePOST(host:pathPrefix:)``; for example those whose GraphQL operation is a query.
    /// It sees the request as the app made it; its body may be in `httpBodyStream` on Apple
    /// platforms, which the predicate must not read.
    public static func cachePOST(where predicate: @escaping @Sendable (URLRequest) -> Bool) -> CachingRule {
        CachingRule(.cachePOST, host: nil, pathPrefix: nil, predicate: predicate)
    }

    /// Whether the rule applies to `request`.
    func matches(_ request: URLRequest) -> Bool {
        if case .cachePOST = action, !(request.httpMethod ?? "GET").isEqualIgnoringASCIICase("POST") { return false }
        if let predicate { return predicate(request) }
        guard let url = request.url else { return false }
        return matches(url: url)
    }

    /// Whether the rule's host and path prefix match `url` (a rule with a predicate never does).
    func matches(url: URL) -> Bool {
        guard predicate == nil else { return false }
        if let host, !host.matches(url.host ?? "") { return false }
        if let pathPrefix, !url.path.hasPrefix(pathPrefix) { return false }
        return true
    }

    /// An exact host, or `*.` and a domain whose subdomains match.
    private struct HostPattern: Sendable {
        let suffix: String
        let isWildcard: Bool

        init(_ pattern: String) {
            let lowered = pattern.lowercased()
            isWildcard = lowered.hasPrefix("*.")
            suffix = isWildcard ? String(lowered.dropFirst(1)) : lowered   // keeps the dot: ".example.com"
        }

        func matches(_ host: String) -> Bool {
            let host = host.lowercased()
            return isWildcard ? host.hasSuffix(suffix) && host.count > suffix.count : host == suffix
        }
    }
}

extension Array where Element == CachingRule {
    /// What the first rule matching `request` says, or nil when none matches. Key rules are not
    /// asked: they only make keys (`cacheKey(for:)`).
    func action(for request: URLRequest) -> CachingRule.Action? {
        for rule in self where !rule.isKeyRule && rule.matches(request) { return rule.action }
        return nil
    }
}
