import CachingProtocol
import Foundation
import LoopbackOrigin

/// The contract rule a route of the demo site exercises (see `caching-rules.md`).
public enum DemoRule: String, Sendable, CaseIterable, Codable {
    /// Rule 1: `ETag`, no explicit freshness.
    case etag
    /// Rule 2: `Cache-Control: max-age=N`, no validators.
    case maxAge
    /// Rule 3: `Last-Modified`, no `ETag`.
    case lastModified
    /// Rule 4: `Cache-Control: no-cache`.
    case noCache
    /// Rule 5: an image with no caching headers at all.
    case image
    /// JSON with no caching headers: not stored, fetched every time.
    case uncachedJSON
    /// A POST endpoint: never cached.
    case post
    /// An `ETag` resource whose body changes half-way through the session.
    case changing

    /// How long the contract lets a client keep using a body it got from (or had confirmed by)
    /// the origin without asking again, under `policy`. Zero: it must always be current.
    func reuseWindow(policy: CachingPolicy) -> TimeInterval {
        switch self {
        case .etag, .changing:
            return policy.etagWindow ?? 0
        case .maxAge:
            return TimeInterval(DemoSite.catalogMaxAge)
        case .lastModified:
            switch policy.lastModifiedFreshness {
            case .none: return 0
            case .window(let window): return window
            // The fraction of the resource's age when it was first sent: the age only grows, so
            // this is the shortest window the policy ever grants it (the strictest judge).
            case .fractionOfAge(let fraction, let cap): return min(cap, fraction * DemoSite.termsAge)
            }
        case .noCache:
            return policy.noCacheReuse
        case .image:
            return policy.imageLifetime ?? 0
        case .uncachedJSON, .post:
            return 0
        }
    }

    /// The rule's number and what it is about, e.g. "1 ETag" or "4 no-cache".
    var name: String {
        switch self {
        case .etag: return "1 ETag"
        case .maxAge: return "2 max-age=\(DemoSite.catalogMaxAge)"
        case .lastModified: return "3 Last-Modified"
        case .noCache: return "4 no-cache"
        case .image: return "5 image, no headers"
        case .uncachedJSON: return "- JSON, no headers"
        case .post: return "- POST"
        case .changing: return "1 ETag, body changes"
        }
    }

    /// What `policy` does with the rule's resource, with its numbers, e.g. "1 d window",
    /// "revalidated on every use" or "not stored"; nil where every policy does the same (max-age,
    /// the uncached JSON, the POST).
    func treatment(policy: CachingPolicy) -> String? {
        let window = reuseWindow(policy: policy)
        let label = DurationText.label(window)
        switch self {
        case .etag, .changing, .lastModified:
            return window > 0 ? "\(label) window" : "revalidated on every use"
        case .noCache:
            return window > 0 ? "reused \(label)" : "revalidated on every use"
        case .image:
            return window > 0 ? "kept \(label)" : "not stored"
        case .maxAge, .uncachedJSON, .post:
            return nil
        }
    }

    /// The rule as a person reads it, with the numbers of `policy`, e.g. "1 ETag (1 d window)".
    func title(policy: CachingPolicy) -> String {
        treatment(policy: policy).map { "\(name) (\($0))" } ?? name
    }
}

/// One route of the demo site.
public struct SiteRoute: Sendable, Equatable {
    public let rule: DemoRule
    public let path: String
}

/// One request as the origin's handler answered it: the origin's side of the conversation,
/// including the status it sent (the `LoopbackOrigin` log records requests, not statuses).
struct OriginExchange: Sendable, Equatable {
    var method: String
    var path: String
    var status: Int
    /// The validator header the request carried (`If-None-Match` wins), nil for none.
    var validator: String?
    /// The origin's clock when the request arrived.
    var at: Date
}

/// The embedded origin with one resource per rule of the contract, on a `ManualClock` shared
/// with the cache, behind a simulated network, plus the log of what its handlers answered.
///
/// Every route is a handler wrapping an `OriginResource` (or generating its body), so each
/// response's status is logged next to `LoopbackOrigin`'s own request log and byte counters.
final class DemoSite: Sendable {
    static let catalogMaxAge = 600
    /// How long before launch the terms page was last modified. Five hours: RFC 9111's heuristic
    /// (10 % of that age) keeps it fresh for 30 minutes, the heuristic preset's window for a day,
    /// so the return after an hour tells the two apart.
    static let termsAge: TimeInterval = 5 * 3_600

    let clock: ManualClock
    /// The origin's clock at the start of the session ("launch").
    let launch: Date
    let origin: LoopbackOrigin
    let routes: [SiteRoute]
    private let resources: [String: OriginResource]
    private let exchanges = Locked<[OriginExchange]>([])
    private let likes = Locked<(count: Int, lastBody: Data)>((0, Data()))

    static let configPath = "/api/config.json"
    static let catalogPath = "/api/catalog.json"
    static let termsPath = "/legal/terms.html"
    static let scoresPath = "/api/scores.json"
    static let avatarPath = "/img/avatar.png"
    static let feedPath = "/api/feed.json"
    static let likePath = "/api/like"
    static let profilePath = "/api/profile.json"

    /// Starts the origin on a fresh port with its clock at `launch`, its responses going
    /// through `network` (nil: none).
    init(launch: Date, network: SimulatedNetwork? = nil) throws {
        self.launch = launch
        clock = ManualClock(launch)
        origin = try LoopbackOrigin(now: clock.read)
        origin.network = network
        resources = [
            Self.configPath: OriginResource(
                body: DemoContent.json("config", bytes: 8_000), contentType: "application/json",
                etag: .automatic, lastModified: .none),
            Self.catalogPath: OriginResource(
                body: DemoContent.json("catalog", bytes: 24_000), contentType: "application/json",
                etag: .none, lastModified: .none,
                headers: [HTTPField("Cache-Control", "max-age=\(Self.catalogMaxAge)")]),
            Self.termsPath: OriginResource(
                body: DemoContent.html("terms", bytes: 16_000), contentType: "text/html; charset=utf-8",
                etag: .none, lastModified: .fixed(launch.addingTimeInterval(-Self.termsAge))),
            Self.scoresPath: OriginResource(
                body: DemoContent.json("scores", bytes: 2_000), contentType: "application/json",
                etag: .none, lastModified: .none, headers: [HTTPField("Cache-Control", "no-cache")]),
            Self.avatarPath: OriginResource(
                body: DemoContent.png(bytes: 40_000), contentType: "image/png", etag: .none, lastModified: .none),
            Self.profilePath: OriginResource(
                body: DemoContent.json("profile v1", bytes: 4_000), contentType: "application/json",
                etag: .automatic, lastModified: .none),
        ]
        routes = [
            SiteRoute(rule: .etag, path: Self.configPath),
            SiteRoute(rule: .maxAge, path: Self.catalogPath),
            SiteRoute(rule: .lastModified, path: Self.termsPath),
            SiteRoute(rule: .noCache, path: Self.scoresPath),
            SiteRoute(rule: .image, path: Self.avatarPath),
            SiteRoute(rule: .uncachedJSON, path: Self.feedPath),
            SiteRoute(rule: .post, path: Self.likePath),
            SiteRoute(rule: .changing, path: Self.profilePath),
        ]
        for (path, resource) in resources {
            origin.handle(path) { [exchanges] request in
                let response = resource.response(to: request)
                exchanges.withLock { $0.append(OriginExchange(request, status: response.status)) }
                return response
            }
        }
        origin.handle(Self.feedPath) { [exchanges, clock] request in
            let response: OriginResponse
            if request.method == "GET" || request.method == "HEAD" {
                response = OriginResponse(headers: [HTTPField("Content-Type", "application/json")],
                                          body: DemoContent.feed(at: clock.now))
            } else {
                response = OriginResponse(status: 405, headers: [HTTPField("Allow", "GET, HEAD")])
            }
            exchanges.withLock { $0.append(OriginExchange(request, status: response.status)) }
            return response
        }
        origin.handle(Self.likePath) { [exchanges, likes] request in
            let response: OriginResponse
            if request.method == "POST" {
                let body = likes.withLock { state -> Data in
                    state.count += 1
                    let post = String(decoding: request.body, as: UTF8.self)
                    state.lastBody = Data("{\"request\":\(post.isEmpty ? "null" : post),\"likes\":\(state.count)}".utf8)
                    return state.lastBody
                }
                response = OriginResponse(headers: [HTTPField("Content-Type", "application/json")], body: body)
            } else {
                response = OriginResponse(status: 405, headers: [HTTPField("Allow", "POST")])
            }
            exchanges.withLock { $0.append(OriginExchange(request, status: response.status)) }
            return response
        }
    }

    func stop() {
        origin.stop()
    }

    func route(for path: String) -> SiteRoute? {
        routes.first { $0.path == path }
    }

    /// Moves the clock to `offset` seconds after launch.
    func moveClock(toOffset offset: TimeInterval) {
        clock.advance(by: launch.addingTimeInterval(offset).timeIntervalSince(clock.now))
    }

    /// Seconds since launch on the site's clock.
    var offset: TimeInterval { clock.now.timeIntervalSince(launch) }

    /// Changes the body of the resource at `path` (a new ETag comes with it).
    func change(_ path: String) {
        guard let resource = resources[path] else { return }
        resource.update(body: DemoContent.json("\(path) changed at +\(DurationText.label(offset))", bytes: resource.body.count))
    }

    /// What the origin serves at `path` right now: the current representation of a resource or
    /// the feed, and for the POST endpoint the body of the latest POST.
    func currentBody(_ path: String) -> Data {
        if path == Self.feedPath { return DemoContent.feed(at: clock.now) }
        if path == Self.likePath { return likes.withLock { $0.lastBody } }
        return resources[path]?.body ?? Data()
    }

    /// How many exchanges have been logged.
    var exchangeCount: Int { exchanges.withLock { $0.count } }

    /// Exchanges logged from index `start` on.
    func exchanges(from start: Int) -> [OriginExchange] {
        exchanges.withLock { Array($0[min(start, $0.count)...]) }
    }

    /// When the origin last sent or confirmed the representation at `path` (a 200 or a 304),
    /// among the first `count` exchanges.
    func lastConfirmation(of path: String, amongFirst count: Int) -> Date? {
        exchanges.withLock { log in
            log.prefix(count).last { $0.path == path && ($0.status == 200 || $0.status == 304) }?.at
        }
    }
}

extension OriginExchange {
    init(_ request: OriginRequest, status: Int) {
        method = request.method
        path = request.path
        self.status = status
        validator = request.header("If-None-Match") != nil ? "If-None-Match"
            : request.header("If-Modified-Since") != nil ? "If-Modified-Since" : nil
        at = request.receivedAt
    }
}

/// Deterministic bodies of realistic sizes, so every run sends the same bytes.
enum DemoContent {
    /// A JSON document of about `bytes` bytes (never less).
    static func json(_ name: String, bytes: Int) -> Data {
        var text = "{\"name\":\"\(name)\",\"items\":["
        var index = 0
        while text.utf8.count < bytes - 2 {
            if index > 0 { text += "," }
            text += "{\"id\":\(index),\"title\":\"\(name) item \(index)\",\"score\":\((index * 7919) % 1000)}"
            index += 1
        }
        return Data((text + "]}").utf8)
    }

    static func html(_ name: String, bytes: Int) -> Data {
        var text = "<!doctype html><title>\(name)</title><body>"
        var index = 0
        while text.utf8.count < bytes - 7 {
            text += "<p>Section \(index) of the \(name): the same words as yesterday, kept for a month.</p>"
            index += 1
        }
        return Data((text + "</body>").utf8)
    }

    /// A PNG signature followed by a repeating pattern (no decoder reads it; only the type counts).
    static func png(bytes: Int) -> Data {
        var data = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        data.append(contentsOf: (0..<max(0, bytes - 8)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 251) })
        return data
    }

    /// The feed as the origin generates it at `date`: new on every request a second apart.
    static func feed(at date: Date) -> Data {
        let stamp = String(Int(date.timeIntervalSince1970))
        var text = "{\"generated\":\(stamp),\"posts\":["
        for index in 0..<60 {
            if index > 0 { text += "," }
            text += "{\"id\":\(index),\"text\":\"post \(index) as of \(stamp)\",\"likes\":\((index * 31) % 97)}"
        }
        return Data((text + "]}").utf8)
    }
}

/// Short human labels for durations: "10 s", "30 min", "1 h", "2 d".
enum DurationText {
    static func label(_ seconds: TimeInterval) -> String {
        let value = Int(seconds.rounded())
        if value != 0, value % 86_400 == 0 { return "\(value / 86_400) d" }
        if value != 0, value % 3_600 == 0 { return "\(value / 3_600) h" }
        if value >= 300, value % 60 == 0 { return "\(value / 60) min" }
        return "\(value) s"
    }
}
