import Foundation

/// HTTP dates (RFC 9110 §5.6.7), formatted and parsed without `DateFormatter`, always in GMT
/// and independent of the process locale. Stateless and safe to call from any thread.
public enum IMFFixdate {
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Formats `date` as an IMF-fixdate, e.g. `"Sun, 06 Nov 1994 08:49:37 GMT"`.
    /// Fractions of a second are dropped (rounded towards the past).
    public static func string(from date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = floorDivide(seconds, 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday (index 4)
        return "\(weekdays[weekday]), \(pad(day)) \(months[month - 1]) \(year) "
            + "\(pad(secondOfDay / 3600)):\(pad(secondOfDay / 60 % 60)):\(pad(secondOfDay % 60)) GMT"
    }

    /// Parses an HTTP date: the IMF-fixdate form and, as recipients must, the obsolete RFC 850
    /// (`"Sunday, 06-Nov-94 08:49:37 GMT"`) and asctime (`"Sun Nov  6 08:49:37 1994"`) forms.
    /// Returns nil for anything else.
    public static func date(from text: String) -> Date? {
        var day: Int?
        var month: Int?
        var year: Int?
        var yearDigits = 0
        var time: (Int, Int, Int)?
        let separators = CharacterSet(charactersIn: " ,-\t")
        for token in text.components(separatedBy: separators) where !token.isEmpty {
            if token.contains(":") {
                let parts = token.split(separator: ":").map { Int($0) }
                guard parts.count == 3, let h = parts[0], let m = parts[1], let s = parts[2],
                      (0..<24).contains(h), (0..<60).contains(m), (0...60).contains(s) else { return nil }
                time = (h, m, s)
            } else if let number = Int(token), token.allSatisfy(\.isASCII) {
                if day == nil && token.count <= 2 {
                    day = number
                } else {
                    year = number
                    yearDigits = token.count
                }
            } else if let index = months.firstIndex(where: { $0.caseInsensitiveCompare(token) == .orderedSame }) {
                month = index + 1
            } else if token.uppercased() == "GMT" || token.uppercased() == "UTC" {
                continue
            } else if weekdays.contains(where: { token.lowercased().hasPrefix($0.lowercased()) }) {
                continue
            } else {
                return nil
            }
        }
        guard let day, let month, var year, let time, (1...31).contains(day) else { return nil }
        if yearDigits <= 2 { year += year < 50 ? 2000 : 1900 }
        let days = self.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + Int64(time.0 * 3600 + time.1 * 60 + time.2)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func pad(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }

    // Howard Hinnant's days-from-civil and civil-from-days algorithms (proleptic Gregorian).
    private static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }
}
