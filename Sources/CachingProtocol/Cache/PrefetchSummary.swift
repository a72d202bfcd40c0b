import Foundation

/// What ``CachingConfiguration/prefetch(_:maximumConcurrent:)`` did with its URLs: each URL
/// counts in exactly one of the four.
public struct PrefetchSummary: Sendable, Equatable, CustomStringConvertible {
    /// URLs the origin answered (fetched, or a stored response revalidated): the cache now holds
    /// the answer as its policy allows (one the policy does not store counts here too).
    public var fetched = 0
    /// URLs with a fresh stored response: nothing was sent.
    public var alreadyFresh = 0
    /// URLs the cache does not take: a `bypass` rule, a scheme other than http(s), or a request
    /// the cache would leave to Foundation.
    public var bypassed = 0
    /// URLs whose request failed (the origin could not be reached or answered with an error
    /// status, or the prefetch was cancelled before they were answered), and URLs a cancelled
    /// prefetch never sent.
    public var failed = 0

    /// A summary with these counts (zero by default).
    public init(fetched: Int = 0, alreadyFresh: Int = 0, bypassed: Int = 0, failed: Int = 0) {
        self.fetched = fetched
        self.alreadyFresh = alreadyFresh
        self.bypassed = bypassed
        self.failed = failed
    }

    public var description: String {
        "fetched \(fetched), already fresh \(alreadyFresh), bypassed \(bypassed), failed \(failed)"
    }
}
