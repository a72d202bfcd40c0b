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

// MARK: - Key rules

/// Key rules: the cache key of the matching requests is made from their URL with some of it
/// left out, so that URLs that differ only in what changes on every request — a CDN's signature,
/// a timestamp, a tracking parameter — are one stored response.
///
/// The key is what the cache stores and looks up under, what identical concurrent requests are
/// collapsed by, what `Vary` is matched within, and what purges and usage count. The request
/// itself is never changed: the origin always gets the URL the app asked for. Credentials stay
/// apart: a key rule never lets one user's response answer another (each stored variant keeps
/// the fingerprint of the `Authorization` and `Cookie` it was fetched with).
extension CachingRule {
    /// How a key rule makes the key of a URL.
    enum KeyTransform: Sendable {
        /// Leaves out the query items with these names (compared after percent-decoding).
        case ignoringQueryItems(Set<String>)
        /// The app's function of the URL.
        case custom(@Sendable (URL) -> URL)

        /// The GET key of `url`.
        func key(for url: URL) -> String {
            switch self {
            case .ignoringQueryItems(let names):
                return CacheKey.removingQueryItems(named: names, from: CacheKey.make(method: "GET", url: url))
            case .custom(let transform):
                return CacheKey.make(method: "GET", url: transform(url))
            }
        }
    }

    /// Requests to `host` (and under `pathPrefix`, when given; with neither, every request) are
    /// stored under a key without the query items named in `names`, compared case-sensitively
    /// after percent-decoding. The other items keep their order and spelling.
    ///
    /// ```swift
    /// .ignoringQueryItems(["X-Amz-Signature", "X-Amz-Date", "X-Amz-Expires"], host: "cdn.example.com")
    /// ```
    ///
    /// A signed URL then reaches the origin once, whatever its signature, and is answered from
    /// the cache for as long as the policy allows; a revalidation or a fetch sends the URL the app
    /// asked for that time. `Cache-Status` carries the key (RFC 9211 `key`) when it differs from
    /// the URL. ``CachingURLCache/purge(url:)``, `CachingURLCache.pin(_:)` and the
    /// `URLCache` methods make keys the same way once an installation with this rule uses the
    /// cache.
    ///
    /// Key rules form a chain of their own: the first matching key rule makes the key, and the
    /// first matching rule of the other kinds (``bypass(host:)``, ``policy(_:host:pathPrefix:)``,
    /// ``freshFor(_:host:pathPrefix:)``) decides what happens to the request, so one host can have
    /// both. A hit answers with the response as it was stored, whose `url` is the URL it was
    /// fetched with.
    public static func ignoringQueryItems(_ names: [String], host: String? = nil, pathPrefix: String? = nil) -> CachingRule {
        CachingRule(.key(.ignoringQueryItems(Set(names))), host: host, pathPrefix: pathPrefix)
    }

    /// Requests to `host` (and under `pathPrefix`, when given; with neither, every request) are
    /// stored under the key of the URL `key` returns: the app's own normalisation, like
    /// Kingfisher's `cacheKey` or Nuke's `filteredURL`.
    ///
    /// ```swift
    /// .cacheKey(host: "img.example.com") { url in withoutSizeParameters(url) }
    /// ```
    ///
    /// The origin still gets the URL the app asked for. `key` runs on the thread that asks
    /// (Foundation's, the engine's, or the caller of a ``CachingURLCache`` method), once or twice
    /// per request: it must be fast, thread-safe, and give equal URLs for equal inputs. See
    /// ``ignoringQueryItems(_:host:pathPrefix:)`` for how key rules combine with the others.
    public static func cacheKey(host: String? = nil, pathPrefix: String? = nil,
                                _ key: @escaping @Sendable (URL) -> URL) -> CachingRule {
        CachingRule(.key(.custom(key)), host: host, pathPrefix: pathPrefix)
    }

    /// Whether the rule makes keys (rather than deciding what happens to a request).
    var isKeyRule: Bool {
        if case .key = action { return true }
        return false
    }
}

extension Array where Element == CachingRule {
    /// Whether any of the rules makes keys.
    var changesKeys: Bool {
        contains(where: \.isKeyRule)
    }

    /// The GET key of `url`: made by the first key rule that matches it, else `CacheKey.make`.
    func cacheKey(for url: URL) -> String {
        for rule in self {
            if case .key(let transform) = rule.action, rule.matches(url: url) { return transform.key(for: url) }
        }
        return CacheKey.make(method: "GET", url: url)
    }
}

extension CacheKey {
    /// `key` (a method, a space and a URL without fragment) without the query items named in
    /// `names`; without the `?` when no item is left.
    static func removingQueryItems(named names: Set<String>, from key: String) -> String {
        guard !names.isEmpty, let question = key.firstIndex(of: "?") else { return key }
        let query = key[key.index(after: question)...]
        let items = query.split(separator: "&", omittingEmptySubsequences: false)
        let kept = items.filter { item in
            let name = item.prefix { $0 != "=" }
            return !names.contains(String(name).removingPercentEncoding ?? String(name))
        }
        guard kept.count != items.count else { return key }
        let base = key[..<question]
        return kept.isEmpty ? String(base) : base + "?" + kept.joined(separator: "&")
    }
}
