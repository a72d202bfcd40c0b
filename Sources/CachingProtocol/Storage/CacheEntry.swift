import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One stored response: the unit the policy reasons about and the stores keep.
///
/// The fields are what the contract asks each entry to carry: status, headers, body, stored
/// date, expiry, validators (inside `headers`), and the request headers that `Vary` names.
struct CacheEntry: Sendable, Equatable {
    /// A request header value that the response's `Vary` named, as the request sent it.
    struct VaryField: Sendable, Equatable {
        /// The field name, lowercased.
        var name: String
        /// The normalised value, or nil when the request did not send the field.
        var value: String?
    }

    /// The URL of the response as the app saw it (after any redirects).
    var responseURL: String
    var statusCode: Int
    var headers: HTTPHeaders
    var body: Data
    /// When the request that produced this response was sent (RFC 9111 `request_time`).
    var requestDate: Date
    /// When the response arrived or was last freshened by a 304 (`response_time`): the stored date.
    var responseDate: Date
    /// The corrected initial age at `responseDate`, in seconds (RFC 9111 §4.2.3).
    var initialAge: TimeInterval
    /// How long the response stays fresh, in seconds of age, as the policy computed it at store time.
    var freshnessLifetime: TimeInterval
    /// The request header values named by the response's `Vary`, in the order `Vary` lists them.
    var varyFields: [VaryField]
    /// A fingerprint of the credentials (`Authorization`, `Cookie`) the storing request carried, or
    /// nil when it carried none. An entry is only ever served to a request with the same fingerprint.
    var credentialFingerprint: UInt64?
    /// The `userInfo` of a `CachedURLResponse` stored through the `URLCache` API, as a binary
    /// property list; nil for entries the protocol stored.
    var userInfo: Data?
    /// The last response built from this entry, reused by hits within the same second (see
    /// `CacheEngine.storedAnswer`). Shared by every copy of the entry and not part of its value:
    /// never stored on disk, and ignored by `==`.
    var builtResponse = BuiltResponseSlot()

    /// The moment the entry stops being fresh: `responseDate + freshnessLifetime - initialAge`.
    var expirationDate: Date {
        responseDate.addingTimeInterval(freshnessLifetime - initialAge)
    }

    /// The entry's current age at `now` (RFC 9111 §4.2.3 `current_age`).
    func age(at now: Date) -> TimeInterval {
        initialAge + max(0, now.timeIntervalSince(responseDate))
    }

    /// Seconds of freshness left at `now`; negative once stale.
    func timeToLive(at now: Date) -> TimeInterval {
        freshnessLifetime - age(at: now)
    }

    /// The bytes this entry is charged against a tier's capacity: body, headers and a fixed
    /// allowance for the rest.
    var cost: Int {
        body.count + headers.byteCount + responseURL.utf8.count + 128
    }
}

/// Objects built from an entry and kept with it, so repeated hits do not build them again; see
/// `CacheEntry.builtResponse`.
final class BuiltResponseSlot: Sendable, Equatable {
    /// The protocol's last answer (with its `Cache-Status`).
    let value = Locked<BuiltResponse?>(nil)
    /// The `CachedURLResponse` the `URLCache` API hands out for this entry (it does not change).
    let cachedURLResponse = Locked<CachedURLResponse?>(nil)

    /// Slots never make two entries different: they cache a derivation of the entry, not data.
    static func == (lhs: BuiltResponseSlot, rhs: BuiltResponseSlot) -> Bool { true }
}

/// Everything stored under one cache key: the variants of one resource (several only when the
/// origin sent `Vary`), newest first.
struct CacheRecord: Sendable, Equatable {
    /// The cache key, for example `GET https://example.com/feed?page=2`.
    var key: String
    var variants: [CacheEntry]

    /// The bytes this record is charged against a tier's capacity.
    var cost: Int {
        key.utf8.count + variants.reduce(0) { $0 + $1.cost }
    }

    /// The newest stored date among the variants (used by `removeCachedResponses(since:)`).
    var latestResponseDate: Date {
        variants.map(\.responseDate).max() ?? .distantPast
    }
}
