import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One answer of ``CachingURLProtocol/cachedThenFresh(for:)``.
public struct CachedThenFreshResponse: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is immutable after creation but not declared Sendable everywhere.

    /// Where an answer came from.
    public enum Source: Sendable, Equatable {
        /// The stored response, handed over before the origin was asked; `isStale` when it was
        /// past its freshness.
        case cache(isStale: Bool)
        /// The origin's current response, which differs from what was stored (or nothing was).
        case origin
    }

    /// The response, with the status and headers the origin sent (and `Cache-Status`).
    public let response: HTTPURLResponse
    /// The whole body.
    public let data: Data
    /// Whether this answer is the stored one or the origin's.
    public let source: Source
}
