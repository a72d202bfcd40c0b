import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// `Demo sessions`: an image session and an API session side by side, each with a cache,
/// policy and rules of its own, replaying the same day of an app against the embedded origin.
///
/// The image session keeps images with no caching headers for seven days (the heuristic
/// policy). The API session judges its host by RFC 9111, except that the catalog is fresh for
/// five minutes (a lifetime the origin does not send) and analytics beacons bypass the cache.
public struct SessionsScenario: Sendable {
    public init() {}

    /// What one session cost, and what its cache holds afterwards.
    public struct SessionResult: Sendable, Equatable {
        public var name: String
        public var appRequests: Int
        public var originRequests: Int
        public var originBodyBytes: Int
        public var statistics: CacheStatistics
        public var storedEntries: Int
        public var storedBytes: Int
        public var rules: String
    }

    /// The moments the app is used, after launch.
    static let moments: [(name: String, offset: TimeInterval)] = [
        ("launch", 0), ("+2 min", 120), ("+10 min", 600), ("+2 days", 2 * 86_400),
    ]

    public func run() async throws -> [SessionResult] {
        let clock = ManualClock(Date(timeIntervalSinceReferenceDate: 800_000_000))
        let origin = try LoopbackOrigin(now: clock.read)
        defer { origin.stop() }
        let bodyBytes = Locked([String: Int]())
        @Sendable func served(_ group: String, _ response: OriginResponse) -> OriginResponse {
            bodyBytes.withLock { $0[group, default: 0] += response.body.count }
            return response
        }
        let imagePaths = (1...8).map { "/img/\($0).png" }
        for path in imagePaths {
            origin.handle(path) { _ in
                served("images", OriginResponse(headers: [HTTPField("Content-Type", "image/png")],
                                                body: Data(repeating: 0x89, count: 24_000)))
            }
        }
        let catalog = Data(repeating: 0x7B, count: 40_000)
        origin.handle("/api/catalog.json") { _ in
            served("api", OriginResponse(headers: [HTTPField("Content-Type", "application/json")], body: catalog))
        }
        origin.handle("/api/profile.json") { request in
            if request.header("If-None-Match") == "\"p1\"" {
                return served("api", OriginResponse(status: 304, headers: [HTTPField("ETag", "\"p1\"")]))
            }
            return served("api", OriginResponse(headers: [HTTPField("Content-Type", "application/json"), HTTPField("ETag", "\"p1\""),
                                                          HTTPField("Cache-Control", "no-cache")],
                                                body: Data(repeating: 0x7B, count: 4_000)))
        }
        origin.handle("/analytics/event") { _ in
            served("api", OriginResponse(headers: [HTTPField("Cache-Control", "max-age=3600")], body: Data("ok".utf8)))
        }

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocol-sessions-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let images = CachingConfiguration(
            cache: CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 64 << 20, directory: root.appendingPathComponent("images")),
            policy: .heuristic(), now: clock.read)
        let api = CachingConfiguration(
            cache: CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 16 << 20, directory: root.appendingPathComponent("api")),
            policy: .heuristic(), now: clock.read,
            rules: [
                .bypass(pathPrefix: "/analytics/"),
                .freshFor(300, pathPrefix: "/api/catalog"),
                .policy(.rfc9111, host: "127.0.0.1"),
            ])
        let imageSession = Self.session(images)
        let apiSession = Self.session(api)
        defer {
            imageSession.invalidateAndCancel()
            apiSession.invalidateAndCancel()
        }

        var appRequests = ["images": 0, "api": 0]
        var elapsed: TimeInterval = 0
        for moment in Self.moments {
            clock.advance(by: moment.offset - elapsed)
            elapsed = moment.offset
            for path in imagePaths {
                _ = try await imageSession.data(from: origin.url(path))
                appRequests["images", default: 0] += 1
            }
            for path in ["/api/catalog.json", "/api/profile.json", "/analytics/event"] {
                _ = try await apiSession.data(from: origin.url(path))
                appRequests["api", default: 0] += 1
            }
        }
        let originCounts = (
            images: origin.requests.filter { $0.path.hasPrefix("/img/") }.count,
            api: origin.requests.filter { !$0.path.hasPrefix("/img/") }.count
        )
        let sent = bodyBytes.withLock { $0 }
        func stored(_ configuration: CachingConfiguration) -> (entries: Int, bytes: Int) {
            let usage = configuration.cache.usageByHost().values
            return (usage.reduce(0) { $0 + $1.entryCount }, usage.reduce(0) { $0 + $1.totalBytes })
        }
        let imageStore = stored(images), apiStore = stored(api)
        return [
            SessionResult(name: "images", appRequests: appRequests["images"] ?? 0, originRequests: originCounts.images,
                          originBodyBytes: sent["images"] ?? 0, statistics: images.statistics,
                          storedEntries: imageStore.entries, storedBytes: imageStore.bytes,
                          rules: "heuristic: images without caching headers kept 7 days"),
            SessionResult(name: "api", appRequests: appRequests["api"] ?? 0, originRequests: originCounts.api,
                          originBodyBytes: sent["api"] ?? 0, statistics: api.statistics,
                          storedEntries: apiStore.entries, storedBytes: apiStore.bytes,
                          rules: "bypass /analytics/; catalog fresh 300 s; rest RFC 9111"),
        ]
    }

    private static func session(_ caching: CachingConfiguration) -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        CachingURLProtocol.inject(into: configuration, using: caching, delegate: nil)
        return URLSession(configuration: configuration)
    }

    /// The results as a table, one row per session.
    public static func render(_ results: [SessionResult]) -> String {
        var lines = [
            "Two sessions, two caches, one origin (\(moments.map(\.name).joined(separator: ", ")), simulated clock)",
            "",
            "session  app requests  origin requests  origin body bytes  hits  revalidated  fetched  stored       rules",
        ]
        for result in results {
            let statistics = result.statistics
            let revalidated = statistics.revalidatedNotModified + statistics.revalidatedChanged
            let name = result.name.padding(toLength: 7, withPad: " ", startingAt: 0)
            lines.append(name + String(format: "  %12d  %15d  %17d  %4d  %11d  %7d  %2d / %4d KB  ",
                                result.appRequests, result.originRequests, result.originBodyBytes,
                                statistics.hits + statistics.staleHits, revalidated, statistics.fetched,
                                result.storedEntries, result.storedBytes / 1024) + result.rules)
        }
        lines.append("")
        lines.append("Without the layer every app request is an origin request. Bypassed requests (analytics) reach the")
        lines.append("origin untouched and are not counted as hits, revalidations or fetches.")
        return lines.joined(separator: "\n") + "\n"
    }
}
