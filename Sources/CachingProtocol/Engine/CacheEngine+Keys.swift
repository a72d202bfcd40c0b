import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Cache keys as the installation's key rules make them (`CachingRule+CacheKey.swift`), and the
/// `key` parameter of `Cache-Status` (RFC 9211 §2.7) when a rule made one differ from the URL.
extension CacheEngine {
    /// The GET key of `request`'s URL under the configuration's key rules; nil without a URL.
    /// With no rules this is `CacheKey.make` and nothing else.
    func cacheKey(for request: URLRequest) -> String? {
        guard let url = request.url else { return nil }
        return configuration.rules.isEmpty ? CacheKey.make(method: "GET", url: url) : configuration.rules.cacheKey(for: url)
    }

    /// `status` with the key of `request` when a key rule made it differ from the URL's own key.
    func keyed(_ status: CacheStatus, for request: CacheRequest) -> CacheStatus {
        guard let key = differingKey(of: request) else { return status }
        var keyed = status
        keyed.key = key
        return keyed
    }

    /// `keyed` for an answer whose status may be nil (a fresh hit, plain `hit`): still nil unless
    /// the key differs, so fresh hits keep reusing the response built for them.
    func keyed(_ status: CacheStatus?, for request: CacheRequest) -> CacheStatus? {
        guard let key = differingKey(of: request) else { return status }
        var keyed = status ?? CacheStatus()
        keyed.key = key
        return keyed
    }

    private func differingKey(of request: CacheRequest) -> String? {
        guard !configuration.rules.isEmpty, configuration.rules.changesKeys, let url = request.urlRequest.url,
              request.key != CacheKey.make(method: "GET", url: url) else { return nil }
        return request.key
    }
}
