// The field values a cache parses: `Cache-Control` (RFC 9111 §5.2) and HTTP dates (RFC 9110 §5.6.7).

import Foundation

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

    /// No directives: what a request or response without `Cache-Control` has.
    static let none = CacheControl()

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

/// Parses and formats HTTP dates (RFC 9110 §5.6.7) without `DateFormatter`, which is slow,
/// locale-dependent and not safe to share across threads on every platform.
///
/// Accepts exactly the grammar's three forms — IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) — with
/// names in any case, and returns nil for anything else: another zone (`UTC`), a two-digit year
/// outside RFC 850, a missing comma, doubled spaces, dashes in IMF-fixdate, a one-digit hour,
/// out-of-range fields, control characters. RFC 9111 §5.3 makes an invalid `Expires` mean
/// "already expired", so leniency here would keep responses fresh that must not be.
package enum HTTPDate {
    private static let months = words(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
    private static let dayNames = words(["mon", "tue", "wed", "thu", "fri", "sat", "sun"])
    private static let longDayNames = words(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])
    private static let gmt = words(["gmt"])

    /// Lowercase ASCII words as bytes, as `Scanner.word(in:)` compares them.
    private static func words(_ list: [String]) -> [[UInt8]] { list.map { Array($0.utf8) } }
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    package static func parse(_ text: String) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        let scanner = Scanner(Array(text.utf8))
        guard let fields = imfFixdate(scanner) ?? rfc850(scanner) ?? asctime(scanner) else { return nil }
        let (day, month, year, hour, minute, second) = fields
        guard (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute),
              (0...60).contains(second), (1...9999).contains(year), day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + min(second, 59))
        return Date(timeIntervalSince1970: seconds)
    }

    private typealias Fields = (day: Int, month: Int, year: Int, hour: Int, minute: Int, second: Int)

    /// `day-name "," SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"`
    private static func imfFixdate(_ scanner: Scanner) -> Fields? {
        var s = scanner
        guard s.word(in: dayNames) != nil, s.take(","), s.take(" "), let day = s.digits(2), s.take(" "),
              let month = s.word(in: months), s.take(" "), let year = s.digits(4), s.take(" "),
              let (hour, minute, second) = s.timeOfDay(), s.take(" "), s.word(in: gmt) != nil, s.atEnd
        else { return nil }
        return (day, month + 1, year, hour, minute, second)
    }

    /// `day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"`
    private static func rfc850(_ scanner: Scanner) -> Fields? {
        var s = scanner
        guard s.word(in: longDayNames) != nil, s.take(","), s.take(" "), let day = s.digits(2), s.take("-"),
              let month = s.word(in: months), s.take("-"), let shortYear = s.digits(2), s.take(" "),
              let (hour, minute, second) = s.timeOfDay(), s.take(" "), s.word(in: gmt) != nil, s.atEnd
        else { return nil }
        // RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is in the past century.
        return (day, month + 1, shortYear < 70 ? 2000 + shortYear : 1900 + shortYear, hour, minute, second)
    }

    /// `day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP 4DIGIT`
    private static func asctime(_ scanner: Scanner) -> Fields? {
        var s = scanner
        guard s.word(in: dayNames) != nil, s.take(" "), let month = s.word(in: months), s.take(" ") else { return nil }
        let day: Int
        if s.take(" ") {
            guard let digit = s.digits(1) else { return nil }
            day = digit
        } else {
            guard let digits = s.digits(2) else { return nil }
            day = digits
        }
        guard s.take(" "), let (hour, minute, second) = s.timeOfDay(), s.take(" "), let year = s.digits(4), s.atEnd
        else { return nil }
        return (day, month + 1, year, hour, minute, second)
    }

    /// Reads the grammar's tokens from the bytes of a date.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position == bytes.count }

        /// The byte `character`, taken if it comes next.
        mutating func take(_ character: Character) -> Bool {
            guard position < bytes.count, bytes[position] == character.asciiValue else { return false }
            position += 1
            return true
        }

        /// Exactly `count` ASCII digits.
        mutating func digits(_ count: Int) -> Int? {
            guard position + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[position..<(position + count)] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            position += count
            return value
        }

        /// The index in `words` (lowercase ASCII bytes) of the letters that come next, in any case.
        mutating func word(in words: [[UInt8]]) -> Int? {
            var end = position
            while end < bytes.count, (0x41...0x5A).contains(bytes[end]) || (0x61...0x7A).contains(bytes[end]) { end += 1 }
            let letters = bytes[position..<end]
            guard let index = words.firstIndex(where: { word in
                word.count == letters.count && zip(word, letters).allSatisfy { $0 == $1 | 0x20 }
            }) else { return nil }
            position = end
            return index
        }

        /// `2DIGIT ":" 2DIGIT ":" 2DIGIT`
        mutating func timeOfDay() -> (Int, Int, Int)? {
            guard let hour = digits(2), take(":"), let minute = digits(2), take(":"), let second = digits(2) else { return nil }
            return (hour, minute, second)
        }
    }

    package static func format(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let secondsOfDay = total - days * 86_400
        let (year, month, day) = civilFromDays(days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        // IMF-fixdate's year is four digits: a two-digit one would parse as RFC 850's, in another century.
        let four = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(weekday), \(two(day)) \(monthNames[month - 1]) \(four) "
            + "\(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60)) GMT"
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPart = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPart + 2) / 5 + 1
        let month = monthPart < 10 ? monthPart + 3 : monthPart - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}
