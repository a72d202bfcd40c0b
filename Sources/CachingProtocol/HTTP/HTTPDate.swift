import Foundation

/// Parses and formats HTTP dates (RFC 9110 §5.6.7) without `DateFormatter`, which is slow,
/// locale-dependent and not safe to share across threads on every platform.
///
/// Accepts the three historical forms — IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) — and returns
/// nil for anything else, including out-of-range fields and control characters.
package enum HTTPDate {
    private static let months: [String] = ["jan", "feb", "mar", "apr", "may", "jun",
                                           "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    package static func parse(_ text: String) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        // Tokens separated by spaces, commas, dashes and colons; the weekday is ignored.
        var tokens: [Substring] = []
        var current = text.startIndex
        var tokenStart: String.Index?
        while current < text.endIndex {
            let character = text[current]
            if character == " " || character == "," || character == "-" || character == ":" {
                if let start = tokenStart { tokens.append(text[start..<current]); tokenStart = nil }
            } else {
                guard character.isASCII, character.isLetter || character.isNumber else { return nil }
                if tokenStart == nil { tokenStart = current }
            }
            current = text.index(after: current)
        }
        if let start = tokenStart { tokens.append(text[start..<text.endIndex]) }
        guard let first = tokens.first, first.allSatisfy(\.isLetter) else { return nil }
        tokens.removeFirst()

        let day: Int, month: Int, year: Int, hour: Int, minute: Int, second: Int
        if tokens.count == 7, let parsedDay = Int(tokens[0]), let parsedMonth = monthIndex(tokens[1]) {
            // IMF-fixdate or RFC 850: day month year hour minute second GMT
            guard let parsedYear = Int(tokens[2]), let h = Int(tokens[3]), let m = Int(tokens[4]),
                  let s = Int(tokens[5]), tokens[6].uppercased() == "GMT" || tokens[6].uppercased() == "UTC"
            else { return nil }
            day = parsedDay; month = parsedMonth; hour = h; minute = m; second = s
            if tokens[2].count == 2 {
                // RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is in the past century.
                year = parsedYear < 70 ? 2000 + parsedYear : 1900 + parsedYear
            } else {
                year = parsedYear
            }
        } else if tokens.count == 6, let parsedMonth = monthIndex(tokens[0]), let parsedDay = Int(tokens[1]) {
            // asctime: month day hour minute second year
            guard let h = Int(tokens[2]), let m = Int(tokens[3]), let s = Int(tokens[4]), let y = Int(tokens[5])
            else { return nil }
            day = parsedDay; month = parsedMonth; hour = h; minute = m; second = s; year = y
        } else {
            return nil
        }
        guard (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute),
              (0...60).contains(second), (1...9999).contains(year), day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + min(second, 59))
        return Date(timeIntervalSince1970: seconds)
    }

    /// IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
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

    private static func monthIndex(_ token: Substring) -> Int? {
        guard token.count == 3 else { return nil }
        return months.firstIndex(of: token.lowercased()).map { $0 + 1 }
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
