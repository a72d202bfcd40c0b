import CachingProtocol
import Foundation

/// `Demo inspect DIR [--json]`: what a cache directory holds, one line per stored response,
/// largest first: size, age, fresh or stale, pinned, URL. Reads the directory without opening a
/// cache on it (`CachingURLCache.entries(inDirectory:)`), so nothing in it changes, and an app
/// may be using it meanwhile.
public enum InspectCommand {
    /// Prints the listing of `directory` to `output` (or one error line to `errorOutput`) and
    /// returns the exit status: 0, or 1 when `directory` holds no cache. Ages are taken at `now`.
    public static func run(
        directory: URL,
        json: Bool,
        now: Date = Date(),
        output: @Sendable (String) -> Void = { print($0) },
        errorOutput: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    ) -> Int32 {
        let entries: [CachingURLCache.Entry]
        do {
            entries = try CachingURLCache.entries(inDirectory: directory, now: now)
                .sorted { $0.bodyBytes != $1.bodyBytes ? $0.bodyBytes > $1.bodyBytes : $0.url.absoluteString < $1.url.absoluteString }
        } catch {
            errorOutput("Demo: \(error)")
            return 1
        }
        if json {
            output(String(decoding: jsonData(entries, directory: directory), as: UTF8.self))
            return 0
        }
        let total = entries.reduce(0) { $0 + $1.bodyBytes }
        output("\(entries.count) stored response\(entries.count == 1 ? "" : "s"), \(size(total)) of bodies, "
               + "\(entries.filter(\.isPinned).count) pinned, in \(directory.path)")
        guard !entries.isEmpty else { return 0 }
        output(ReportText.leftPad("size", 10) + "  " + ReportText.leftPad("age", 6) + "  " + ReportText.pad("state", 6) + "  "
               + ReportText.pad("pinned", 6) + "  URL")
        for entry in entries { output(line(entry)) }
        return 0
    }

    static func line(_ entry: CachingURLCache.Entry) -> String {
        ReportText.leftPad(size(entry.bodyBytes), 10) + "  " + ReportText.leftPad(age(entry.age), 6) + "  "
            + ReportText.pad(entry.isFresh ? "fresh" : "stale", 6) + "  " + ReportText.pad(entry.isPinned ? "pinned" : "", 6)
            + "  " + entry.url.absoluteString
    }

    /// Bytes as people read them: `512 B`, `12.3 KB`, `4.0 MB` (powers of 1,000).
    static func size(_ bytes: Int) -> String {
        if bytes < 1_000 { return "\(bytes) B" }
        let units = ["KB", "MB", "GB", "TB"]
        var value = Double(bytes) / 1_000
        var unit = 0
        while value >= 1_000, unit < units.count - 1 {
            value /= 1_000
            unit += 1
        }
        return String(format: "%.1f %@", value, units[unit])
    }

    /// An age in its largest whole unit: `45 s`, `12 min`, `5 h`, `3 d`.
    static func age(_ seconds: TimeInterval) -> String {
        let whole = Int(max(0, seconds))
        if whole < 60 { return "\(whole) s" }
        if whole < 3_600 { return "\(whole / 60) min" }
        if whole < 86_400 { return "\(whole / 3_600) h" }
        return "\(whole / 86_400) d"
    }

    /// `{"directory": …, "entries": [{"url", "key", "status", "bytes", "storedDate", "age",
    /// "freshnessLifetime", "fresh", "pinned", "etag", "lastModified"}]}`, largest first.
    static func jsonData(_ entries: [CachingURLCache.Entry], directory: URL) -> Data {
        let dates = ISO8601DateFormatter()
        let objects: [[String: Any]] = entries.map { entry in
            var object: [String: Any] = [
                "url": entry.url.absoluteString, "key": entry.key, "status": entry.statusCode, "bytes": entry.bodyBytes,
                "storedDate": dates.string(from: entry.storedDate), "age": entry.age.rounded(.down),
                "freshnessLifetime": entry.freshnessLifetime, "fresh": entry.isFresh, "pinned": entry.isPinned,
            ]
            if let etag = entry.etag { object["etag"] = etag }
            if let lastModified = entry.lastModified { object["lastModified"] = lastModified }
            return object
        }
        let document: [String: Any] = ["directory": directory.path, "entries": objects]
        return (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
    }
}
