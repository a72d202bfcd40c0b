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
/// `Cache-Status` is always plain `hit` and its `Age` changes once a second, so an entry builds
/// its response at most once a second however many hits it serves.
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
    /// The `Age` the response carries, in whole seconds.
    let age: Int
    let response: HTTPURLResponse

    private init(entry: CacheEntry, cacheStatus: CacheStatus?, age: Int, response: HTTPURLResponse) {
        responseDate = entry.responseDate
        initialAge = entry.initialAge
        freshnessLifetime = entry.freshnessLifetime
        statusCode = entry.statusCode
        varyFields = entry.varyFields
        credentialFingerprint = entry.credentialFingerprint
        self.cacheStatus = cacheStatus
        self.age = age
        self.response = response
    }

    /// The stored response as the app sees it at `now`: the stored status and headers, an `Age`
    /// header with its current age in whole seconds (RFC 9111 §5.1, §4.2.3: generated when the
    /// origin sent none, and grown by the time the entry spent in the cache), and `cacheStatus`
    /// when it is not nil. Reuses the response last built for `entry` when it describes the same
    /// thing (within the same second of age).
    static func answer(for entry: CacheEntry, cacheStatus: CacheStatus?, at now: Date) -> Answer {
        let age = currentAge(of: entry, at: now)
        if let built = entry.memo.answer.withLock({ $0 }) as? BuiltResponse, built.describes(entry, cacheStatus: cacheStatus, age: age) {
            return .response(built.response, entry.body)
        }
        var headers = entry.headers
        headers.set("Age", String(age))
        if let cacheStatus {
            headers.set("Cache-Status", cacheStatus.headerValue)
        }
        let url = URL(string: entry.responseURL) ?? URL(string: "about:blank")!
        let response = HTTPURLResponse(url: url, statusCode: entry.statusCode, httpVersion: "HTTP/1.1",
                                       headerFields: headers.dictionary)!
        let built = BuiltResponse(entry: entry, cacheStatus: cacheStatus, age: age, response: response)
        entry.memo.answer.withLock { $0 = built }
        return .response(response, entry.body)
    }

    /// The part `range` of the stored response (a complete one, or a stored part that covers it),
    /// as a `206 Partial Content` at `now` (RFC 9110 §15.3.7): the stored headers with
    /// `Content-Range` and `Content-Length` for the part, `Age`, and `cacheStatus`. Built for
    /// each answer: ranges vary.
    static func rangeAnswer(for entry: CacheEntry, range: StoredRange, cacheStatus: CacheStatus?, at now: Date) -> Answer {
        var headers = entry.headers
        headers.set("Content-Range", range.contentRange.fieldValue)
        headers.set("Content-Length", String(range.bounds.count))
        headers.set("Age", String(currentAge(of: entry, at: now)))
        if let cacheStatus { headers.set("Cache-Status", cacheStatus.headerValue) }
        let url = URL(string: entry.responseURL) ?? URL(string: "about:blank")!
        let response = HTTPURLResponse(url: url, statusCode: 206, httpVersion: "HTTP/1.1", headerFields: headers.dictionary)!
        let start = entry.body.startIndex + range.bodyOffset
        return .response(response, entry.body.subdata(in: start..<(start + range.bounds.count)))
    }

    /// `entry`'s age at `now` in whole seconds, as the `Age` header states it.
    static func currentAge(of entry: CacheEntry, at now: Date) -> Int {
        let age = entry.age(at: now)
        guard age.isFinite, age > 0 else { return 0 }
        return age >= Double(CacheControl.maximumDeltaSeconds) ? CacheControl.maximumDeltaSeconds : Int(age)
    }

    /// Whether `response` is what would be built for `entry` now. A freshened copy of an entry
    /// gets a new memo, and the fields are compared as well, so a built response never outlives
    /// what it was built from.
    private func describes(_ entry: CacheEntry, cacheStatus: CacheStatus?, age: Int) -> Bool {
        self.age == age && self.cacheStatus == cacheStatus && responseDate == entry.responseDate
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
