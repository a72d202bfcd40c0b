import Foundation

/// Where the bytes a range asks for are in a stored response (RFC 9111 §3.4): `bounds` of the
/// complete representation, which is `completeLength` bytes long, starting `bodyOffset` bytes
/// into the stored body.
struct StoredRange: Sendable, Equatable {
    let bounds: ClosedRange<Int>
    let completeLength: Int
    let bodyOffset: Int

    /// The `Content-Range` of an answer with these bytes.
    var contentRange: ContentRange {
        ContentRange(first: bounds.lowerBound, last: bounds.upperBound, completeLength: completeLength)
    }
}

extension CachingPolicy {
    /// Whether the policy stores partial content (`206` responses, RFC 9111 §3.3): when its
    /// cacheable statuses include 206, as RFC 9111's rules do (``rfc9111``). A request for one
    /// byte range then goes through the cache even when nothing is stored for it, so its answer
    /// can be stored; otherwise such a request is the cache's only when a stored response
    /// answers it. The heuristic preset stores 200 and 203 only, so it does not.
    var storesPartialContent: Bool {
        cacheableStatusCodes?.contains(206) ?? true
    }

    /// Where `range` is in `entry`, when the entry can answer it itself (RFC 9111 §3.4): a
    /// complete `200` response whose body is the representation, or a stored `206` whose part
    /// covers every byte the range selects. Never an entry with `Content-Encoding` (the platform
    /// decodes such bodies, so the stored bytes are not the ones a range counts), nor a range
    /// that selects nothing (the origin answers 416 for it).
    static func servesRange(_ range: ByteRange, from entry: CacheEntry) -> StoredRange? {
        guard !entry.headers.contains("Content-Encoding") else { return nil }
        switch entry.statusCode {
        case 200:
            guard !entry.headers.contains("Content-Range"), let bounds = range.bounds(in: entry.body.count) else { return nil }
            return StoredRange(bounds: bounds, completeLength: entry.body.count, bodyOffset: bounds.lowerBound)
        case 206:
            guard let part = storedPart(of: entry), let bounds = range.bounds(in: part.completeLength),
                  part.bounds.contains(bounds.lowerBound), part.bounds.contains(bounds.upperBound) else { return nil }
            return StoredRange(bounds: bounds, completeLength: part.completeLength, bodyOffset: bounds.lowerBound - part.first)
        default:
            return nil
        }
    }

    /// What to store when the origin answered a range request with `new`, a `206`, while
    /// `stored` is the variant stored for the request (RFC 9111 §3.3–3.4), or nil to store
    /// nothing and leave `stored` as it is:
    /// - a part whose `Content-Range` is missing, not one byte range of known length, does not
    ///   match its body's length, or is encoded (`Content-Encoding`) is not stored;
    /// - with the same strong `ETag` as a stored part of the same length that it overlaps or
    ///   touches, the two are combined into one part with the new response's header fields
    ///   (the new bytes win where they overlap); a combination that covers every byte becomes a
    ///   complete `200` response;
    /// - with the same strong `ETag` as a complete stored response, nothing changes: the whole
    ///   is already stored;
    /// - otherwise (no strong validator, another one, a gap between the parts) the new part
    ///   replaces what was stored: it is the newer description of the representation.
    static func partialContentToStore(_ new: CacheEntry, over stored: CacheEntry?) -> CacheEntry? {
        guard new.statusCode == 206, let part = storedPart(of: new) else { return nil }
        guard let stored, let tag = strongETag(new), strongETag(stored) == tag, !stored.headers.contains("Content-Encoding") else {
            return new
        }
        if stored.statusCode == 200, !stored.headers.contains("Content-Range") {
            return stored.body.count == part.completeLength ? nil : new
        }
        guard let old = storedPart(of: stored), old.completeLength == part.completeLength,
              old.first <= part.last + 1, part.first <= old.last + 1 else { return new }
        let union = ContentRange(first: min(old.first, part.first), last: max(old.last, part.last),
                                 completeLength: part.completeLength)
        var body = Data(count: union.last - union.first + 1)
        body.replaceSubrange((old.first - union.first)..<(old.last - union.first + 1), with: stored.body)
        body.replaceSubrange((part.first - union.first)..<(part.last - union.first + 1), with: new.body)
        var combined = new
        combined.revision = .next()
        combined.body = body
        combined.headers.set("Content-Length", String(body.count))
        if union.first == 0, union.last == union.completeLength - 1 {
            combined.statusCode = 200
            combined.headers.remove("Content-Range")
        } else {
            combined.headers.set("Content-Range", union.fieldValue)
        }
        return combined
    }

    /// The part a stored `206` holds, when its `Content-Range` describes exactly its body and it
    /// is not encoded; nil for anything else.
    static func storedPart(of entry: CacheEntry) -> ContentRange? {
        guard entry.statusCode == 206, !entry.headers.contains("Content-Encoding"),
              let part = entry.headers["Content-Range"].flatMap(ContentRange.init),
              part.last - part.first + 1 == entry.body.count else { return nil }
        return part
    }

    /// The entry's `ETag` when it is a strong validator (not `W/`), the only kind that lets two
    /// parts be combined (RFC 9110 §8.8.1).
    private static func strongETag(_ entry: CacheEntry) -> String? {
        guard let tag = entry.headers["ETag"]?.trimmingCharacters(in: .whitespaces), !tag.isEmpty, !tag.hasPrefix("W/") else {
            return nil
        }
        return tag
    }
}
