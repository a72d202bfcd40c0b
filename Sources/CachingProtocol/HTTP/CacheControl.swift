/// The directives of a `Cache-Control` field (RFC 9111 §5.2), for a request or a response.
///
/// Parsing never fails: unknown directives are ignored, and a freshness directive whose value is
/// not a valid delta-seconds (`max-age=-1`, `max-age=abc`, two different `max-age` values) sets
/// `hasInvalidFreshness`, which the policy treats as "stale at once" as RFC 9111 §4.2.1
/// recommends. Values above 2^31 are clamped to 2^31 (RFC 9111 §1.2.2).
package struct CacheControl: Sendable, Equatable {
    /// How much staleness a request accepts (`max-stale` with or without a value).
    package enum MaxStale: Sendable, Equatable {
        case any
        case seconds(Int)
    }

    package var maxAge: Int?
    package var sharedMaxAge: Int?
    package var maxStale: MaxStale?
    package var minFresh: Int?
    package var staleWhileRevalidate: Int?
    package var staleIfError: Int?
    var noCache = false
    var noStore = false
    var noTransform = false
    var onlyIfCached = false
    var isPrivate = false
    var isPublic = false
    var mustRevalidate = false
    var proxyRevalidate = false
    var mustUnderstand = false
    var immutable = false
    /// A freshness directive was present but unusable; the response is to be treated as stale.
    package var hasInvalidFreshness = false

    /// The largest delta-seconds value a cache must handle (RFC 9111 §1.2.2).
    package static let maximumDeltaSeconds = 2_147_483_648

    init() {}

    /// Parses a field value; nil or empty gives no directives.
    package init(_ value: String?) {
        guard let value, !value.isEmpty else { return }
        for (name, argument) in Self.directives(in: value) {
            apply(name: name, argument: argument)
        }
    }

    /// True when any directive was present.
    var isEmpty: Bool { self == CacheControl() }

    private mutating func apply(name: Substring, argument: Substring?) {
        switch name.lowercased() {
        case "max-age": maxAge = freshnessSeconds(maxAge, argument)
        case "s-maxage": sharedMaxAge = Self.otherSeconds(sharedMaxAge, argument)
        case "min-fresh": minFresh = Self.otherSeconds(minFresh, argument)
        case "stale-while-revalidate": staleWhileRevalidate = Self.otherSeconds(staleWhileRevalidate, argument)
        case "stale-if-error": staleIfError = Self.otherSeconds(staleIfError, argument)
        case "max-stale":
            if let argument {
                if let seconds = Self.deltaSeconds(argument) { maxStale = .seconds(seconds) }
            } else {
                maxStale = .any
            }
        // The qualified forms (`no-cache="Set-Cookie"`, `private="…"`) are treated as unqualified,
        // which RFC 9111 §5.2.2.4 and §5.2.2.7 allow and which is the stricter reading.
        case "no-cache": noCache = true
        case "no-store": noStore = true
        case "no-transform": noTransform = true
        case "only-if-cached": onlyIfCached = true
        case "private": isPrivate = true
        case "public": isPublic = true
        case "must-revalidate": mustRevalidate = true
        case "proxy-revalidate": proxyRevalidate = true
        case "must-understand": mustUnderstand = true
        case "immutable": immutable = true
        default: break
        }
    }

    /// A freshness directive's value: an invalid or conflicting one marks the response stale.
    private mutating func freshnessSeconds(_ existing: Int?, _ argument: Substring?) -> Int? {
        guard let seconds = argument.flatMap(Self.deltaSeconds), existing == nil || existing == seconds else {
            hasInvalidFreshness = true
            return 0
        }
        return seconds
    }

    /// Any other delta-seconds directive: an invalid value is ignored, duplicates keep the smaller.
    private static func otherSeconds(_ existing: Int?, _ argument: Substring?) -> Int? {
        guard let seconds = argument.flatMap(deltaSeconds) else { return existing }
        return existing.map { min($0, seconds) } ?? seconds
    }

    /// `1*DIGIT`, clamped to 2^31; nil for anything else (signs, decimals, empty, spaces).
    package static func deltaSeconds(_ text: Substring) -> Int? {
        guard !text.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            if value < maximumDeltaSeconds {
                value = value * 10 + Int(byte - 0x30)
            }
        }
        return min(value, maximumDeltaSeconds)
    }

    /// Splits a list of directives at commas outside quoted strings; names and unquoted values
    /// are trimmed; quoted values are unescaped. Works on the value's bytes, as HTTP does: read
    /// as `Character`s, a comma after a prepending mark (U+070F, found by the fuzzer) or before a
    /// combining one is part of a larger character and would not separate two directives.
    package static func directives(in value: String) -> [(name: Substring, argument: Substring?)] {
        let bytes = value.utf8
        var result: [(Substring, Substring?)] = []
        var index = bytes.startIndex
        let end = bytes.endIndex
        while index < end {
            // Skip separators and whitespace.
            while index < end, bytes[index] == UInt8(ascii: ",") || isOWS(bytes[index]) {
                index = bytes.index(after: index)
            }
            guard index < end else { break }
            let nameStart = index
            while index < end, bytes[index] != UInt8(ascii: "="), bytes[index] != UInt8(ascii: ",") {
                index = bytes.index(after: index)
            }
            let name = value[nameStart..<index].trimmingOWS
            var argument: Substring?
            if index < end, bytes[index] == UInt8(ascii: "=") {
                index = bytes.index(after: index)
                while index < end, isOWS(bytes[index]) {
                    index = bytes.index(after: index)
                }
                if index < end, bytes[index] == UInt8(ascii: "\"") {
                    index = bytes.index(after: index)
                    var unescaped: [UInt8] = []
                    while index < end, bytes[index] != UInt8(ascii: "\"") {
                        if bytes[index] == UInt8(ascii: "\\") {
                            index = bytes.index(after: index)
                            guard index < end else { break }
                        }
                        unescaped.append(bytes[index])
                        index = bytes.index(after: index)
                    }
                    if index < end { index = bytes.index(after: index) }
                    argument = Substring(String(decoding: unescaped, as: UTF8.self))
                    // Ignore anything between the closing quote and the next comma.
                    while index < end, bytes[index] != UInt8(ascii: ",") {
                        index = bytes.index(after: index)
                    }
                } else {
                    let argumentStart = index
                    while index < end, bytes[index] != UInt8(ascii: ",") {
                        index = bytes.index(after: index)
                    }
                    argument = value[argumentStart..<index].trimmingOWS
                }
            }
            if !name.isEmpty {
                result.append((name, argument))
            }
        }
        return result
    }
}
