import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One stored response: the unit the policy reasons about and the stores keep.
///
/// The fields are what the contract asks each entry to carry: status, headers, body, stored
/// date, expiry, validators (inside `headers`), and the request headers that `Vary` names.
package struct CacheEntry: Sendable, Equatable {
    /// A request header value that the response's `Vary` named, as the request sent it.
    package struct VaryField: Sendable, Equatable {
        /// The field name, lowercased.
        package var name: String
        /// The normalised value, or nil when the request did not send the field.
        package var value: String?

        package init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    /// The URL of the response as the app saw it (after any redirects).
    package var responseURL: String
    package var statusCode: Int
    package var headers: HTTPHeaders
    package var body: Data
    /// When the request that produced this response was sent (RFC 9111 `request_time`).
    package var requestDate: Date
    /// When the response arrived or was last freshened by a 304 (`response_time`): the stored date.
    package var responseDate: Date
    /// The corrected initial age at `responseDate`, in seconds (RFC 9111 §4.2.3).
    package var initialAge: TimeInterval
    /// How long the response stays fresh, in seconds of age, as the policy computed it at store time.
    package var freshnessLifetime: TimeInterval
    /// The request header values named by the response's `Vary`, in the order `Vary` lists them.
    package var varyFields: [VaryField]
    /// Whom it may be served to: the user the storing request was for and the trust judge of its
    /// session. An entry is only ever served to a request of the same partition.
    package var partition: Partition
    /// The `userInfo` of a `CachedURLResponse` stored through the `URLCache` API, as a binary
    /// property list; nil for entries the protocol stored.
    package var userInfo: Data?
    /// Which instance of the entry this is: a number given when an entry is made, and again when a
    /// copy is changed (a `304` freshened it, parts were combined), so that objects built from an
    /// entry can be kept under it (the engine's responses, the `URLCache` face's
    /// `CachedURLResponse`s): each consumer keeps its own. Never stored on disk; not part of `==`.
    package var revision = EntryRevision.next()
    /// Whether the entry may be kept in memory only, never in a file: a response with a
    /// `Set-Cookie` (`CachingPolicy.isKeptInMemoryOnly`) or one stored through the `URLCache` API
    /// with `.allowedInMemoryOnly`. Set by the store when it keeps the entry so, and kept by the
    /// copies made from it (a `304` freshening it), so no later write of its record, no move of
    /// memory to disk, takes it to a file. Never stored on disk (an entry read from a file is not
    /// memory-only); not part of `==`.
    package var isMemoryOnly = false

    package init(
        responseURL: String, statusCode: Int, headers: HTTPHeaders, body: Data,
        requestDate: Date, responseDate: Date, initialAge: TimeInterval, freshnessLifetime: TimeInterval,
        varyFields: [VaryField], partition: Partition, userInfo: Data?
    ) {
        self.responseURL = responseURL
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
        self.requestDate = requestDate
        self.responseDate = responseDate
        self.initialAge = initialAge
        self.freshnessLifetime = freshnessLifetime
        self.varyFields = varyFields
        self.partition = partition
        self.userInfo = userInfo
    }

    /// The bytes this entry is charged against a tier's capacity: body, headers and a fixed
    /// allowance for the rest.
    package var cost: Int {
        body.count + headers.byteCount + responseURL.utf8.count + 128
    }

    /// Entries are equal when every stored field is; the `revision` does not count.
    package static func == (lhs: CacheEntry, rhs: CacheEntry) -> Bool {
        lhs.responseURL == rhs.responseURL && lhs.statusCode == rhs.statusCode && lhs.headers == rhs.headers
            && lhs.body == rhs.body && lhs.requestDate == rhs.requestDate && lhs.responseDate == rhs.responseDate
            && lhs.initialAge == rhs.initialAge && lhs.freshnessLifetime == rhs.freshnessLifetime
            && lhs.varyFields == rhs.varyFields && lhs.partition == rhs.partition
            && lhs.userInfo == rhs.userInfo
    }

    /// Whether `other` is the same variant of a resource: the same `Vary` values and the same
    /// partition. A newer response replaces the stored variant it is the same as.
    package func isSameVariant(as other: CacheEntry) -> Bool {
        varyFields == other.varyFields && partition == other.partition
    }
}

/// A number that tells instances of entries apart (`CacheEntry.revision`).
package struct EntryRevision: Hashable, Sendable {
    let value: UInt64

    private static let last = Locked<UInt64>(0)

    /// A number no entry had before.
    package static func next() -> EntryRevision {
        EntryRevision(value: last.withLock { $0 += 1; return $0 })
    }
}

/// Everything stored under one cache key: the variants of one resource (several only when the
/// origin sent `Vary`), newest first.
package struct CacheRecord: Sendable, Equatable {
    /// The cache key, for example `GET https://example.com/feed?page=2`.
    package var key: String
    package var variants: [CacheEntry]

    package init(key: String, variants: [CacheEntry]) {
        self.key = key
        self.variants = variants
    }

    /// The bytes this record is charged against a tier's capacity.
    package var cost: Int {
        key.utf8.count + variants.reduce(0) { $0 + $1.cost }
    }

    /// The newest stored date among the variants (used by `removeCachedResponses(since:)`).
    package var latestResponseDate: Date {
        variants.map(\.responseDate).max() ?? .distantPast
    }
}
