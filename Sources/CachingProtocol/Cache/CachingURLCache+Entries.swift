import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// A look inside: what is stored, one value per stored response.
extension CachingURLCache {
    /// One stored response (one `Vary` variant of a URL), as ``CachingURLCache/entries()`` lists it.
    public struct Entry: Sendable, Equatable {
        /// The response's URL, after any redirects, as it was stored.
        public var url: URL
        /// The key it is stored under, e.g. `GET https://example.com/feed?page=2` (without the
        /// query items a key rule leaves out, see ``CachingRule/ignoringQueryItems(_:host:pathPrefix:)``).
        public var key: String
        /// The response's status code (0 for a non-HTTP response stored through the `URLCache` API).
        public var statusCode: Int
        /// The size of the body in bytes.
        public var bodyBytes: Int
        /// When the response arrived, or was last confirmed by a `304`.
        public var storedDate: Date
        /// How long it is fresh, in seconds of age, as the policy judged it when it was stored.
        public var freshnessLifetime: TimeInterval
        /// Its age now (RFC 9111 §4.2.3), on the cache's clock: the age it arrived with plus the
        /// time since it was stored.
        public var age: TimeInterval
        /// Whether it is fresh now: an app's request would be answered with it without asking
        /// the origin (unless the request asks otherwise).
        public var isFresh: Bool
        /// Its `ETag`, if it has one: it can be revalidated with `If-None-Match`.
        public var etag: String?
        /// Its `Last-Modified`, if it has one: it can be revalidated with `If-Modified-Since`.
        public var lastModified: String?
        /// Whether it was stored for a user (fetched with credentials, `Authorization` or `Cookie`,
        /// or for a request ``CachingConfiguration/userIdentity`` named a user for): it is only
        /// ever served to that user's requests.
        public var hasCredentials: Bool
        /// Whether its URL is pinned (``CachingURLCache/pin(_:)-(URL)``): kept from eviction and the age limit.
        public var isPinned: Bool
    }

    /// Every stored response, one value per stored variant, newest first (by ``Entry/storedDate``):
    /// what a settings or debug screen shows. Responses past ``maximumEntryAge`` are left out.
    ///
    /// It reads no entry file: the disk index keeps what it lists (about 85 ms for 100,000
    /// entries on the project's Linux machine, `Docs/benchmarks.md`). Only entries the index
    /// learned from a directory scan (written by another process, or just before a crash, or by
    /// a version of this library before the listing existed) are read once, by the first call
    /// that lists them. Ages and freshness are judged on the clock of the installation that uses
    /// the cache (the system clock before one does). Records not yet written to disk are listed,
    /// and so are those kept in memory only. Call it from any thread; it waits for the disk index
    /// to load when the cache just opened.
    public func entries() -> [Entry] {
        Self.entries(store.listing(), pins: store.currentPins(), now: clock(), maximumAge: maximumEntryAge)
    }

    /// What the cache in `directory` holds, as ``entries()`` lists it with ages at `now`, read
    /// without opening the cache: nothing in the directory is created, changed or deleted, and
    /// the cache may be open in another process meanwhile (`Demo inspect`). Reads the index and
    /// the entry files it does not summarise. Throws when `directory` has no cache.
    package static func entries(inDirectory directory: URL, now: Date = Date()) throws -> [Entry] {
        do {
            let (listed, pins) = try DiskStore.inspect(directory: directory)
            return entries(listed, pins: pins, now: now, maximumAge: nil)
        } catch {
            throw CachingError(.diskUnavailable, "no cache directory at \(directory.path): \(error)")
        }
    }

    private static func entries(_ listing: [DiskStore.Listed], pins: Pins, now: Date, maximumAge: TimeInterval?) -> [Entry] {
        let cutoff = maximumAge.map { now.addingTimeInterval(-$0) }
        var entries: [Entry] = []
        for listed in listing {
            let summary = listed.summary
            let isPinned = pins.contains(EntryDigest(key: summary.key))
            for variant in summary.variants ?? [] {
                // Past the age limit: no longer served, and about to be removed.
                if let cutoff, variant.responseDate < cutoff, !isPinned { continue }
                guard let url = URL(string: summary.url(of: variant)) else { continue }
                let age = variant.initialAge + max(0, now.timeIntervalSince(variant.responseDate))
                entries.append(Entry(
                    url: url, key: summary.key, statusCode: variant.statusCode, bodyBytes: variant.bodyBytes,
                    storedDate: variant.responseDate, freshnessLifetime: variant.freshnessLifetime, age: age,
                    isFresh: variant.freshnessLifetime - age > 0, etag: variant.etag, lastModified: variant.lastModified,
                    hasCredentials: variant.hasCredentials, isPinned: isPinned))
            }
        }
        entries.sort { $0.storedDate != $1.storedDate ? $0.storedDate > $1.storedDate : $0.key < $1.key }
        return entries
    }
}
