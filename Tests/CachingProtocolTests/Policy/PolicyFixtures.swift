import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import CachingProtocol

/// Builders for the pure policy tests: requests, responses and entries at chosen times.
enum PolicyFixtures {
    static let url = URL(string: "https://example.com/resource?page=1")!
    static let start = Date(timeIntervalSince1970: 1_700_000_000)

    static func request(_ headers: [String: String] = [:], cachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy) -> CacheRequest {
        var request = URLRequest(url: url, cachePolicy: cachePolicy)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return CacheRequest(request, key: CacheKey.make(method: "GET", url: url))
    }

    /// An entry as the policy would store it for a response with `headers` received at `at`, or
    /// nil when the policy would not store it.
    static func entry(
        _ headers: [String: String],
        status: Int = 200,
        policy: CachingPolicy = .heuristic(),
        request: CacheRequest = request(),
        at date: Date = start
    ) -> CacheEntry? {
        let fields = HTTPHeaders(headers)
        guard case .store(let lifetime, let initialAge) = policy.storageDecision(
            for: request, status: status, headers: fields, requestDate: date, responseDate: date) else { return nil }
        return CacheEntry(responseURL: url.absoluteString, statusCode: status, headers: fields, body: Data("body".utf8),
                          requestDate: date, responseDate: date, initialAge: initialAge, freshnessLifetime: lifetime,
                          varyFields: CachingPolicy.varyFields(for: fields, request: request),
                          partition: request.partition, userInfo: nil)
    }

    static func httpDate(_ offset: TimeInterval) -> String {
        HTTPDate.format(start.addingTimeInterval(offset))
    }
}
