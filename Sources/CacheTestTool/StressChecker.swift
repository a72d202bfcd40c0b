import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Judges each answer of a stress run against what ``StressOrigin`` recorded sending.
///
/// A success is right when its status and body are a response the origin sent for the final URL
/// and for the load's user — whole, not cut, not another user's or another URL's — with the
/// `ETag` that came with that body; a 206 is right when its body is exactly the bytes its
/// `Content-Range` names of a body the origin sent; and a load that asked to ignore stored data
/// (`reloadIgnoringLocalCacheData`) must get a body the origin sent while it ran. The one answer
/// the origin did not send that is right is the cache's documented `504` for a stored
/// `must-revalidate` or `no-cache` response it could not validate. An error is
/// right or wrong only by comparison with the run without the layer: ``errorKind(_:cancelledByApp:offline:)``
/// names it for that comparison.
struct StressChecker {
    let origin: StressOrigin

    /// What a load got, as the checker needs it.
    struct Answer {
        var path: String
        var user: String
        var status: Int
        var etag: String?
        var contentRange: String?
        var body: Data
        /// The `Cache-Status` field, naming the layer when it answered.
        var cacheStatus: String?
        /// The origin's sequence numbers before the load started and after it ended, for loads
        /// that must get a fresh answer (`reloadIgnoringLocalCacheData`); nil for the others.
        var window: ClosedRange<Int>?
    }

    /// Whether `answer` is the cache's own `504`, which the product's policy gives when it cannot
    /// validate a stored response that may not be served unvalidated (`must-revalidate`,
    /// `no-cache`; RFC 9111 §5.2.2.2, `Docs/policies.md`) and the load did not ask for a reload:
    /// where the run without the layer has the origin's error.
    func isTheCachesGatewayTimeout(_ answer: Answer) -> Bool {
        guard answer.status == 504, answer.body.isEmpty, answer.window == nil,
              answer.cacheStatus?.hasPrefix("CachingProtocol") == true,
              let resource = (origin.resources + origin.slowResources).first(where: { $0.path == answer.path }) else { return false }
        return resource.profile == .mustRevalidate || resource.profile == .noCacheAndETag
    }

    /// Nil when `answer` is one the origin gave; otherwise what is wrong with it.
    func problem(with answer: Answer) -> String? {
        Self.problem(with: answer, served: origin.served(answer.path, user: answer.user))
    }

    /// Nil when `answer` is one of `served`, the bodies the origin sent for its path and user;
    /// otherwise what is wrong with it.
    static func problem(with answer: Answer, served: [Data: StressOrigin.Served]) -> String? {
        let described = "\(answer.status), \(answer.body.count) bytes (\(Self.firstLine(answer.body)))"
        if answer.status == 206 {
            guard let (range, total) = Self.contentRange(answer.contentRange) else {
                return "206 without a usable Content-Range (\(answer.contentRange ?? "none")): \(described)"
            }
            guard range.count == answer.body.count else {
                return "206 whose body (\(answer.body.count) bytes) is not the \(range.count) its Content-Range names"
            }
            let whole = served.filter { $0.value.status == 200 && $0.key.count == total }
            // The same bytes may be part of several versions (each begins with a line naming its
            // path and user): a reload's part is right when any of them was sent while it ran.
            let problems = whole.filter { $0.key[range] == answer.body }.map { windowProblem($0.value, answer) }
            guard let first = problems.first else {
                return "206 \(range.lowerBound)-\(range.upperBound)/\(total) that is no part of a body the origin sent for "
                    + "\(answer.path) to \(answer.user) (\(Self.summary(served)))"
            }
            return problems.contains { $0 == nil } ? nil : first
        }
        guard let sent = served[answer.body], sent.status == answer.status else {
            return "\(described) is no response the origin sent for \(answer.path) to \(answer.user) (\(Self.summary(served)))"
        }
        if let etag = answer.etag, !sent.etags.contains(etag) {
            return "\(described) came with ETag \(etag), but the origin sent that body with \(sent.etags.sorted())"
        }
        return windowProblem(sent, answer)
    }

    private static func windowProblem(_ sent: StressOrigin.Served, _ answer: Answer) -> String? {
        guard let window = answer.window, !sent.sequences.contains(where: window.contains) else { return nil }
        return "a reload got a body the origin sent before it started (responses \(sent.sequences.suffix(3)), "
            + "the load ran from \(window.lowerBound) to \(window.upperBound))"
    }

    /// How an error is counted when the two runs are compared: the URL error's name, and whether
    /// the app asked for it (its cancellation, or offline mode).
    static func errorKind(_ error: Error, cancelledByApp: Bool, offline: Bool) -> String {
        let nsError = error as NSError
        guard nsError.domain == NSURLErrorDomain else { return "\(nsError.domain) \(nsError.code)" }
        let code = nsError.code
        if code == URLError.Code.cancelled.rawValue { return cancelledByApp ? "cancelled by the app" : "cancelled, not by the app" }
        if code == URLError.Code.resourceUnavailable.rawValue, offline { return "resourceUnavailable in offline mode" }
        return codeNames.first { $0.key.rawValue == code }?.value ?? "URLError \(code)"
    }

    private static let codeNames: [URLError.Code: String] = [
        .unknown: "unknown", .timedOut: "timedOut", .networkConnectionLost: "networkConnectionLost",
        .badServerResponse: "badServerResponse", .cannotConnectToHost: "cannotConnectToHost",
        .cannotParseResponse: "cannotParseResponse", .resourceUnavailable: "resourceUnavailable",
        .cannotDecodeContentData: "cannotDecodeContentData", .notConnectedToInternet: "notConnectedToInternet",
        .zeroByteResource: "zeroByteResource", .httpTooManyRedirects: "httpTooManyRedirects",
        .redirectToNonExistentLocation: "redirectToNonExistentLocation", .dataLengthExceedsMaximum: "dataLengthExceedsMaximum",
    ]

    /// `bytes a-b/total` as a range and the total.
    static func contentRange(_ value: String?) -> (ClosedRange<Int>, Int)? {
        guard let value, value.hasPrefix("bytes ") else { return nil }
        let parts = value.dropFirst("bytes ".count).split(separator: "/")
        guard parts.count == 2, let total = Int(parts[1]) else { return nil }
        let bounds = parts[0].split(separator: "-")
        guard bounds.count == 2, let lower = Int(bounds[0]), let upper = Int(bounds[1]), lower <= upper, upper < total else { return nil }
        return (lower...upper, total)
    }

    /// The body's first line when it is one of the origin's (it names path, user and version).
    static func firstLine(_ body: Data) -> String {
        guard body.starts(with: Data("STRESS ".utf8)) || body.starts(with: Data("error ".utf8)) || body.starts(with: Data("moved".utf8)),
              let newline = body.firstIndex(of: 10) else {
            return body.isEmpty ? "empty" : "not a body the origin makes"
        }
        return String(decoding: body[body.startIndex..<newline], as: UTF8.self)
    }

    private static func summary(_ served: [Data: StressOrigin.Served]) -> String {
        let lines = served.map { "\($0.value.status) \($0.key.count) bytes \(firstLine($0.key))" }.sorted()
        return lines.isEmpty ? "it sent nothing there" : "it sent: " + lines.suffix(4).joined(separator: "; ")
    }
}
