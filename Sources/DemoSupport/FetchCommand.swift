import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `Demo fetch URL [--times N]`: fetches a URL through `CachingURLProtocol` (default heuristic
/// configuration, real clock) and prints what each fetch did.
public enum FetchCommand {
    /// One fetch as the command saw it.
    public struct Fetch: Sendable, Equatable {
        /// "hit", "revalidated", "fetched", …, from the protocol's `CacheEvent`.
        public var outcome: String
        public var status: Int
        public var bytes: Int
        public var milliseconds: Double
        /// The methods the protocol sent upstream, e.g. `["HEAD"]`.
        public var upstream: [String]
        public var cacheStatus: String?
    }

    /// Runs the fetches, writing the report to `output` and a one-line error to `errorOutput`.
    /// Returns the exit status: 0, or 1 when a fetch failed.
    public static func run(
        _ options: FetchOptions,
        output: @Sendable (String) -> Void = { print($0) },
        errorOutput: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) },
        progress: ProgressReporter? = nil
    ) async -> Int32 {
        let temporary = options.cacheDirectory == nil
        let directory = options.cacheDirectory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("CachingProtocol-Demo-fetch-\(UUID().uuidString)", isDirectory: true)
        let cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 100 << 20, directory: directory)
        let events = Locked<[CacheEvent]>([])
        let configuration = CachingConfiguration(cache: cache, observer: { event in
            events.withLock { $0.append(event) }
        })
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.timeoutIntervalForRequest = 30
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration, delegate: nil)
        let session = URLSession(configuration: sessionConfiguration)
        defer {
            session.finishTasksAndInvalidate()
            CachingURLProtocol.unregister()
            cache.waitUntilSettled()
            if temporary { try? FileManager.default.removeItem(at: directory) }
        }

        // The heading comes with the first result, so a URL that cannot be reached prints only
        // its one error line.
        let heading = "GET \(options.url.absoluteString) through CachingURLProtocol (heuristic policy, HEAD revalidation), "
            + "cache in \(directory.path)\(temporary ? " (temporary)" : "")"
        for number in 1...options.times {
            progress?.stage("fetch \(number)/\(options.times) \(options.url.absoluteString)")
            let before = events.withLock { $0.count }
            let started = DispatchTime.now()
            let data: Data
            let response: URLResponse
            do {
                (data, response) = try await session.data(from: options.url)
            } catch {
                errorOutput("Demo: cannot fetch \(options.url.absoluteString): \(describe(error))")
                return 1
            }
            let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e6
            let event = events.withLock { $0.count > before ? $0.last : nil }
            let http = response as? HTTPURLResponse
            let fetch = Fetch(
                outcome: event.map { outcomeName($0) } ?? "not through the cache",
                status: http?.statusCode ?? 0,
                bytes: data.count,
                milliseconds: milliseconds,
                upstream: event?.upstreamMethods ?? [],
                cacheStatus: http?.value(forHTTPHeaderField: "Cache-Status"))
            if number == 1 { output(heading) }
            output(line(number, of: options.times, fetch))
        }
        return 0
    }

    static func line(_ number: Int, of total: Int, _ fetch: Fetch) -> String {
        let width = String(total).count
        var text = "#" + ReportText.leftPad(String(number), width) + "  " + ReportText.pad(fetch.outcome, 22)
        text += ReportText.leftPad(fetch.status == 0 ? "-" : String(fetch.status), 4)
        text += ReportText.leftPad(ReportText.grouped(fetch.bytes), 12) + " B"
        text += ReportText.leftPad(String(format: "%.1f", fetch.milliseconds), 10) + " ms"
        text += "  origin: " + (fetch.upstream.isEmpty ? "-" : fetch.upstream.joined(separator: ", "))
        if let cacheStatus = fetch.cacheStatus { text += "  Cache-Status: \(cacheStatus)" }
        return text
    }

    static func outcomeName(_ event: CacheEvent) -> String {
        let status = event.originStatus.map { " (\($0))" } ?? ""
        switch event.outcome {
        case .hit: return "hit"
        case .staleHit: return "stale hit"
        case .revalidatedNotModified: return "revalidated" + status
        case .revalidatedChanged: return "changed, refetched" + status
        case .fetched: return "fetched" + status
        case .staleAfterError: return "stale, origin failed" + status
        case .notInCache: return "not in cache"
        case .failed: return "failed" + status
        }
    }

    /// A short description of a load error, e.g. "could not connect to the server (URLError -1004)".
    static func describe(_ error: Error) -> String {
        guard let urlError = error as? URLError else { return "\(error)" }
        let reasons: [URLError.Code: String] = [
            .cannotConnectToHost: "could not connect to the server",
            .cannotFindHost: "host not found",
            .dnsLookupFailed: "DNS lookup failed",
            .timedOut: "timed out",
            .notConnectedToInternet: "no network connection",
            .networkConnectionLost: "the connection was lost",
            .secureConnectionFailed: "TLS handshake failed",
            .serverCertificateUntrusted: "server certificate not trusted",
            .badServerResponse: "bad server response",
            .unsupportedURL: "unsupported URL",
        ]
        let reason = reasons[urlError.code] ?? urlError.localizedDescription
        return "\(reason) (URLError \(urlError.code.rawValue))"
    }
}
