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
    /// A fingerprint of the credentials (`Authorization`, `Cookie`) the storing request carried, or
    /// nil when it carried none. An entry is only ever served to a request with the same fingerprint.
    package var credentialFingerprint: UInt64?
    /// The `userInfo` of a `CachedURLResponse` stored through the `URLCache` API, as a binary
    /// property list; nil for entries the protocol stored.
    package var userInfo: Data?
    /// Objects built from this entry to answer with it, kept so repeated hits do not build them
    /// again. Shared by every copy of the entry and not part of its value: never stored on disk,
    /// and ignored by `==`. A changed copy (a 304 freshened it) gets a new one.
    package var memo = EntryMemo()

    package init(
        responseURL: String, statusCode: Int, headers: HTTPHeaders, body: Data,
        requestDate: Date, responseDate: Date, initialAge: TimeInterval, freshnessLifetime: TimeInterval,
        varyFields: [VaryField], credentialFingerprint: UInt64?, userInfo: Data?
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
        self.credentialFingerprint = credentialFingerprint
        self.userInfo = userInfo
    }

    /// The moment the entry stops being fresh: `responseDate + freshnessLifetime - initialAge`.
    package var expirationDate: Date {
        responseDate.addingTimeInterval(freshnessLifetime - initialAge)
    }

    /// The entry's current age at `now` (RFC 9111 §4.2.3 `current_age`).
    package func age(at now: Date) -> TimeInterval {
        initialAge + max(0, now.timeIntervalSince(responseDate))
    }

    /// Seconds of freshness left at `now`; negative once stale.
    package func timeToLive(at now: Date) -> TimeInterval {
        freshnessLifetime - age(at: now)
    }

    /// The bytes this entry is charged against a tier's capacity: body, headers and a fixed
    /// allowance for the rest.
    package var cost: Int {
        body.count + headers.byteCount + responseURL.utf8.count + 128
    }

    /// Whether `other` is the same variant of a resource: the same `Vary` values and the same
    /// credentials. A newer response replaces the stored variant it is the same as.
    package func isSameVariant(as other: CacheEntry) -> Bool {
        varyFields == other.varyFields && credentialFingerprint == other.credentialFingerprint
    }
}

/// Objects derived from an entry by the code that answers with it, kept with the entry so
/// repeated hits do not build them again (see `CacheEntry.memo`).
///
/// The model does not know what the engine builds: `answer` holds the engine's own type, which
/// it checks on the way out.
package final class EntryMemo: Sendable, Equatable {
    /// What the engine last built to answer with this entry (its response and what it depends on).
    package let answer = Locked<AnyObject?>(nil)
    /// The `CachedURLResponse` the `URLCache` API hands out for this entry (it does not change).
    package let cachedURLResponse = Locked<CachedURLResponse?>(nil)

    package init() {}

    /// Memos never make two entries different: they cache a derivation of the entry, not data.
    package static func == (lhs: EntryMemo, rhs: EntryMemo) -> Bool { true }
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
