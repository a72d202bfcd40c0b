import Foundation

/// What the origin's answer to a revalidation means for the stored response: the output of the
/// validation half of the decision core (RFC 9111 §4.3.3–4.3.5).
enum RevalidationOutcome: Sendable, Equatable {
    /// The origin confirmed the stored response: a 304 that does not name another
    /// representation, or a HEAD 200 that describes the stored one. Serve the stored body with
    /// `updated`: the stored headers merged with the answer's (§4.3.4), its dates, and the
    /// freshness computed again. When the merged headers forbid storing (`mayStore` false) it is
    /// served this once and the stored variant is dropped.
    case notModified(updated: CacheEntry, mayStore: Bool)
    /// The origin has another representation. A conditional GET's answer carries it
    /// (`bodyIncluded`): it is handled like any fetched response. A HEAD's answer does not (and a
    /// 304 naming another representation carries no body either): fetch it with a plain GET.
    case changed(bodyIncluded: Bool)
    /// The origin failed with a 5xx and the stored response may be served stale instead
    /// (stale-if-error, `mayServeAfterError`).
    case serverError
}

extension CachingPolicy {
    /// Judges the origin's answer to a revalidation of `entry` for `request`, sent with
    /// `method` (HEAD or GET) and the stored validators, given the answer's status and headers,
    /// when the request was sent and the answer received, and `now`.
    func revalidationOutcome(
        stored entry: CacheEntry,
        request: CacheRequest,
        method: String,
        status: Int,
        headers: HTTPHeaders,
        requestDate: Date,
        responseDate: Date,
        now: Date
    ) -> RevalidationOutcome {
        let isHead = method.isEqualIgnoringASCIICase("HEAD")
        let confirmed = (status == 304 && !Self.notModified(headers, namesAnotherRepresentationThan: entry))
            || (isHead && status == 200 && Self.headResponse(headers, describes: entry))
        if confirmed {
            return freshened(entry, by: headers, request: request, requestDate: requestDate, responseDate: responseDate)
        }
        if status >= 500, mayServeAfterError(entry, request: request, now: now) {
            return .serverError
        }
        // A conditional GET's answer other than a 304 is the new response itself.
        return .changed(bodyIncluded: !isHead && status != 304)
    }

    /// `entry` updated by a 304 (or a HEAD 200 that describes it), RFC 9111 §4.3.4: the answer's
    /// header fields replace the stored ones (`headersAfterValidation`), its dates become the
    /// entry's dates, and storage and freshness are decided again on the merged headers.
    private func freshened(
        _ entry: CacheEntry,
        by headers: HTTPHeaders,
        request: CacheRequest,
        requestDate: Date,
        responseDate: Date
    ) -> RevalidationOutcome {
        var updated = entry
        updated.revision = .next()
        updated.headers = Self.headersAfterValidation(stored: entry.headers, received: headers)
        updated.requestDate = requestDate
        updated.responseDate = responseDate
        switch storageDecision(for: request, status: entry.statusCode, headers: updated.headers,
                               requestDate: requestDate, responseDate: responseDate) {
        case .store(let lifetime, let initialAge):
            updated.freshnessLifetime = lifetime
            updated.initialAge = initialAge
            return .notModified(updated: updated, mayStore: true)
        case .doNotStore:
            updated.freshnessLifetime = 0
            updated.initialAge = Self.correctedInitialAge(
                headers: updated.headers, date: updated.headers["Date"].flatMap(HTTPDate.parse),
                requestDate: requestDate, responseDate: responseDate)
            return .notModified(updated: updated, mayStore: false)
        }
    }

    /// The stored header fields updated with those of a 304 or HEAD answer (RFC 9111 §4.3.4):
    /// each received field replaces the stored fields of that name, except the fields that
    /// describe the answer's own (empty) body or its connection (`headersNotUpdatedByValidation`).
    static func headersAfterValidation(stored: HTTPHeaders, received: HTTPHeaders) -> HTTPHeaders {
        var headers = stored
        for field in storableHeaders(received).fields where !headersNotUpdatedByValidation.contains(where: field.name.isEqualIgnoringASCIICase) {
            headers.set(field.name, field.value)
        }
        return headers
    }

    /// Fields a 304 or HEAD answer must not overwrite: they describe its own (empty) body or its
    /// connection, not the stored representation.
    static let headersNotUpdatedByValidation = ["Content-Length", "Content-Encoding", "Transfer-Encoding", "Content-Range",
                                                "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade"]

    /// Whether a HEAD answer describes the stored representation (RFC 9111 §4.3.5): the same
    /// strong ETag, or without ETags the same Last-Modified, and no different Content-Length.
    static func headResponse(_ head: HTTPHeaders, describes entry: CacheEntry) -> Bool {
        if let length = head["Content-Length"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
           entry.headers["Content-Encoding"] == nil, length != entry.body.count {
            return false
        }
        if let etag = head["ETag"], let storedTag = entry.headers["ETag"] {
            return !etag.hasPrefix("W/") && etag == storedTag
        }
        if head["ETag"] == nil, entry.headers["ETag"] == nil,
           let modified = head["Last-Modified"], let storedModified = entry.headers["Last-Modified"] {
            return modified == storedModified
        }
        return false
    }

    /// Whether a 304 names a different representation than the one stored (its ETag differs, by
    /// the weak comparison), in which case the stored body must not be served (RFC 9111 §4.3.4).
    static func notModified(_ headers: HTTPHeaders, namesAnotherRepresentationThan entry: CacheEntry) -> Bool {
        guard let etag = headers["ETag"], let storedTag = entry.headers["ETag"] else { return false }
        return weakTag(etag) != weakTag(storedTag)
    }

    private static func weakTag(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }
}
