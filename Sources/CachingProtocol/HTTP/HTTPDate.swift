import Foundation

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
    private static let months: [String] = ["jan", "feb", "mar", "apr", "may", "jun",
                                           "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let dayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
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
              let (hour, minute, second) = s.timeOfDay(), s.take(" "), s.word(in: ["gmt"]) != nil, s.atEnd
        else { return nil }
        return (day, month + 1, year, hour, minute, second)
    }

    /// `day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"`
    private static func rfc850(_ scanner: Scanner) -> Fields? {
        var s = scanner
        guard s.word(in: longDayNames) != nil, s.take(","), s.take(" "), let day = s.digits(2), s.take("-"),
              let month = s.word(in: months), s.take("-"), let shortYear = s.digits(2), s.take(" "),
              let (hour, minute, second) = s.timeOfDay(), s.take(" "), s.word(in: ["gmt"]) != nil, s.atEnd
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

        /// The index in `words` (lowercase ASCII) of the letters that come next, in any case.
        mutating func word(in words: [String]) -> Int? {
            var end = position
            while end < bytes.count, (0x41...0x5A).contains(bytes[end]) || (0x61...0x7A).contains(bytes[end]) { end += 1 }
            let word = String(decoding: bytes[position..<end].map { $0 | 0x20 }, as: UTF8.self)
            guard let index = words.firstIndex(of: word) else { return nil }
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
