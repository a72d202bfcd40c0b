import Foundation

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
