import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The response an app gets for a stored entry, with what it was built from, kept in the entry's
/// memo so later hits reuse it. A class, so that taking it out of the memo on every hit is one
/// retain rather than a copy of every field.
///
/// Building an `HTTPURLResponse` is the largest cost of a hit on Linux (it re-capitalises every
/// header name and parses Content-Type: about 16 µs for a handful of fields); a fresh hit's
/// `Cache-Status` is always plain `hit`, so an entry builds its response once.
final class BuiltResponse: @unchecked Sendable {
    // @unchecked: every property is a constant; HTTPURLResponse is immutable after creation but
    // not declared Sendable everywhere.
    let responseDate: Date
    let initialAge: TimeInterval
    let freshnessLifetime: TimeInterval
    let statusCode: Int
    let varyFields: [CacheEntry.VaryField]
    let credentialFingerprint: UInt64?
    let cacheStatus: CacheStatus?
    let response: HTTPURLResponse

    private init(entry: CacheEntry, cacheStatus: CacheStatus?, response: HTTPURLResponse) {
        responseDate = entry.responseDate
        initialAge = entry.initialAge
        freshnessLifetime = entry.freshnessLifetime
        statusCode = entry.statusCode
        varyFields = entry.varyFields
        credentialFingerprint = entry.credentialFingerprint
        self.cacheStatus = cacheStatus
        self.response = response
    }

    /// The stored response as the app sees it: the stored status and headers (the origin's, as
    /// the contract promises: no synthesised `Age`), plus `cacheStatus` when it is not nil.
    /// Reuses the response last built for `entry` when it describes the same thing.
    static func answer(for entry: CacheEntry, cacheStatus: CacheStatus?) -> Answer {
        if let built = entry.memo.answer.withLock({ $0 }) as? BuiltResponse, built.describes(entry, cacheStatus: cacheStatus) {
            return .response(built.response, entry.body)
        }
        var headers = entry.headers
        if let cacheStatus {
            headers.set("Cache-Status", cacheStatus.headerValue)
        }
        let url = URL(string: entry.responseURL) ?? URL(string: "about:blank")!
        let response = HTTPURLResponse(url: url, statusCode: entry.statusCode, httpVersion: "HTTP/1.1",
                                       headerFields: headers.dictionary)!
        let built = BuiltResponse(entry: entry, cacheStatus: cacheStatus, response: response)
        entry.memo.answer.withLock { $0 = built }
        return .response(response, entry.body)
    }

    /// Whether `response` is what would be built for `entry` now. A freshened copy of an entry
    /// gets a new memo, and the fields are compared as well, so a built response never outlives
    /// what it was built from.
    private func describes(_ entry: CacheEntry, cacheStatus: CacheStatus?) -> Bool {
        self.cacheStatus == cacheStatus && responseDate == entry.responseDate
            && initialAge == entry.initialAge && freshnessLifetime == entry.freshnessLifetime
            && statusCode == entry.statusCode && credentialFingerprint == entry.credentialFingerprint
            && varyFields == entry.varyFields
    }
}

extension CacheStatus {
    /// A hit on `entry` at `now`. A fresh hit is plain `hit` (no `ttl`, so the response built
    /// for it stays valid); a stale one carries its negative `ttl` and `detail=stale`, marking how
    /// stale it is.
    static func hit(_ entry: CacheEntry, stale: Bool, at now: Date) -> CacheStatus {
        guard stale else { return CacheStatus() }
        return CacheStatus(timeToLive: timeToLive(of: entry, at: now), detail: "stale")
    }

    /// `entry`'s whole seconds of freshness left at `now` (negative once stale), for `ttl`.
    static func timeToLive(of entry: CacheEntry, at now: Date) -> Int {
        Int(entry.timeToLive(at: now).rounded(.down))
    }
}
