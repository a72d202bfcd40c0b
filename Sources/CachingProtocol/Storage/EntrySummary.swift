import Foundation

/// What the disk index knows of a record without reading its file: the key, and per variant
/// what a look inside the cache shows (`CachingURLCache.entries()`): URL, status, body size,
/// stored date, freshness, validators. Kept in the index (snapshot and journal) so that listing
/// 100,000 entries reads no entry file.
///
/// A class, so that an index entry that carries one stays one pointer wide on the hit path; it
/// never changes once made.
package final class EntrySummary: Sendable, Equatable {
    /// One stored variant, as listed.
    package struct Variant: Sendable, Equatable {
        /// The response's URL (after redirects), as stored; empty when it is the URL of the key
        /// (most are: one string fewer per entry in memory and on disk). See `url(ofKey:)`.
        package var responseURL: String
        package var statusCode: Int
        package var bodyBytes: Int
        /// When it arrived or was last freshened by a `304` (`CacheEntry.responseDate`).
        package var responseDate: Date
        package var initialAge: TimeInterval
        package var freshnessLifetime: TimeInterval
        package var etag: String?
        package var lastModified: String?
        /// The digest of the user it was stored for (`Partition.user`), nil for an answer to a
        /// request for nobody in particular: what forgetting a user reads.
        package var user: UInt64?

        /// Whether it was stored for a user (a request with credentials, or one the installation's
        /// identity named a user for).
        package var hasCredentials: Bool { user != nil }

        package init(_ entry: CacheEntry) {
            responseURL = entry.responseURL
            statusCode = entry.statusCode
            bodyBytes = entry.body.count
            responseDate = entry.responseDate
            initialAge = entry.initialAge
            freshnessLifetime = entry.freshnessLifetime
            etag = entry.headers["ETag"]
            lastModified = entry.headers["Last-Modified"]
            user = entry.partition.user
        }

        package init(responseURL: String, statusCode: Int, bodyBytes: Int, responseDate: Date, initialAge: TimeInterval,
                     freshnessLifetime: TimeInterval, etag: String?, lastModified: String?, user: UInt64?) {
            self.responseURL = responseURL
            self.statusCode = statusCode
            self.bodyBytes = bodyBytes
            self.responseDate = responseDate
            self.initialAge = initialAge
            self.freshnessLifetime = freshnessLifetime
            self.etag = etag
            self.lastModified = lastModified
            self.user = user
        }
    }

    package let key: String
    /// The variants, newest first; nil when only the key is known (a file adopted by a scan of
    /// the directory, which reads headers only: a listing reads such a file once).
    package let variants: [Variant]?
    /// The bytes `encode` writes.
    let encodedSize: Int

    package convenience init(key: String, variants: [Variant]?) {
        let keyURL = Self.url(ofKey: key)
        let variants = variants?.map { variant -> Variant in
            var variant = variant
            if variant.responseURL[...] == keyURL { variant.responseURL = "" }
            return variant
        }
        var counter = ByteCounter()
        Self.write(key: key, variants: variants, to: &counter)
        self.init(key: key, variants: variants, encodedSize: counter.count)
    }

    private init(key: String, variants: [Variant]?, encodedSize: Int) {
        self.key = key
        self.variants = variants
        self.encodedSize = encodedSize
    }

    /// The URL part of a GET key ("GET https://…").
    private static func url(ofKey key: String) -> Substring {
        key.hasPrefix("GET ") ? key.dropFirst(4) : key[...]
    }

    /// The URL of `variant` of this summary: its own, or the key's.
    func url(of variant: Variant) -> String {
        variant.responseURL.isEmpty ? String(Self.url(ofKey: key)) : variant.responseURL
    }

    /// The summary of `record`; with `firstBodyBytes`, the size of its first variant's body,
    /// which `record` need not hold (it is in a streamed file, `StreamedEntryFile`).
    package convenience init(_ record: CacheRecord, firstBodyBytes: Int? = nil) {
        var variants = record.variants.map(Variant.init)
        if let firstBodyBytes, !variants.isEmpty { variants[0].bodyBytes = firstBodyBytes }
        self.init(key: record.key, variants: variants)
    }

    /// Whether the variants are known.
    var isComplete: Bool { variants != nil }

    package static func == (lhs: EntrySummary, rhs: EntrySummary) -> Bool {
        lhs === rhs || (lhs.key == rhs.key && lhs.variants == rhs.variants)
    }

    // MARK: - Format

    /// ```
    /// key str · variantCount u32 (0xFFFF_FFFF: not known), then per variant:
    /// responseURL str ("": the key's URL) · status u16 · bodyBytes u64 · responseDate f64
    /// · initialAge f64 · freshnessLifetime f64 · flags u8 (1 a user, 2 ETag, 4 Last-Modified,
    /// 8 the user's digest) · [etag str] · [lastModified str] · [user u64]
    /// ```
    ///
    /// A variant stored for a user always has both 1 and 8. Flag 1 alone names a user without
    /// its digest: such a summary is read as one whose variants are not known, so the next
    /// listing reads the entry file once and forgetting a user never misses that variant.
    func encode<Sink: ByteSink>(to sink: inout Sink) {
        Self.write(key: key, variants: variants, to: &sink)
    }

    private static let unknownVariants = UInt32.max

    private static func write<Sink: ByteSink>(key: String, variants: [Variant]?, to sink: inout Sink) {
        sink.writeString(key)
        guard let variants else { return sink.writeInteger(unknownVariants) }
        sink.writeInteger(UInt32(truncatingIfNeeded: variants.count))
        for variant in variants {
            sink.writeString(variant.responseURL)
            sink.writeInteger(UInt16(clamping: variant.statusCode))
            sink.writeInteger(UInt64(clamping: variant.bodyBytes))
            sink.writeDate(variant.responseDate)
            sink.writeDouble(variant.initialAge)
            sink.writeDouble(variant.freshnessLifetime)
            let flags: UInt8 = (variant.user != nil ? 9 : 0) | (variant.etag != nil ? 2 : 0) | (variant.lastModified != nil ? 4 : 0)
            sink.writeInteger(flags)
            if let etag = variant.etag { sink.writeString(etag) }
            if let lastModified = variant.lastModified { sink.writeString(lastModified) }
            if let user = variant.user { sink.writeInteger(user) }
        }
    }

    /// Reads a summary `encode` wrote; throws for anything else, including numbers no cache
    /// writes (a status beyond 999, a body beyond `DiskIndex.maximumFileSize`, an implausible time).
    static func decode(_ reader: inout ByteReader) throws -> EntrySummary {
        let start = reader.offset
        let key = try reader.readString()
        let count = try reader.readInteger(UInt32.self)
        guard count != unknownVariants else { return EntrySummary(key: key, variants: nil, encodedSize: reader.offset - start) }
        // Each variant takes at least 39 bytes: a count beyond what remains is damage.
        guard Int(count) <= reader.remaining / 39 else { throw BinaryDecodingError.malformed("variant count") }
        let keyURL = url(ofKey: key)
        var variants: [Variant] = []
        variants.reserveCapacity(Int(count))
        var hasUnknownUser = false
        for _ in 0..<count {
            let url = try reader.readString()
            let status = Int(try reader.readInteger(UInt16.self))
            let body = try reader.readInteger(UInt64.self)
            let responseDate = try reader.readDate()
            let initialAge = try reader.readDouble()
            let lifetime = try reader.readDouble()
            let flags = try reader.readInteger(UInt8.self)
            guard status <= 999, body <= UInt64(DiskIndex.maximumFileSize), flags & ~15 == 0, flags & 8 == 0 || flags & 1 != 0,
                  [responseDate.timeIntervalSinceReferenceDate, initialAge, lifetime].allSatisfy({ $0.isFinite && abs($0) <= EntryCodec.maximumSeconds })
            else { throw BinaryDecodingError.malformed("summary values") }
            let etag = flags & 2 != 0 ? try reader.readString() : nil
            let lastModified = flags & 4 != 0 ? try reader.readString() : nil
            let user = flags & 8 != 0 ? try reader.readInteger(UInt64.self) : nil
            if flags & 9 == 1 { hasUnknownUser = true }
            // Written by `encode`, a URL is never the key's own: that one is empty.
            guard url[...] != keyURL else { throw BinaryDecodingError.malformed("summary URL") }
            variants.append(Variant(responseURL: url, statusCode: status, bodyBytes: Int(body),
                                    responseDate: responseDate, initialAge: initialAge, freshnessLifetime: lifetime,
                                    etag: etag, lastModified: lastModified, user: user))
        }
        // Written again, a summary whose variants are not known takes fewer bytes than were read.
        if hasUnknownUser { return EntrySummary(key: key, variants: nil) }
        return EntrySummary(key: key, variants: variants, encodedSize: reader.offset - start)
    }
}
