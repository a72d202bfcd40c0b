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

/// An account of the demo app. The API (every path under `/api/`) answers only requests that
/// carry the user's bearer token and session cookie (sent to the whole site), and the profile and
/// the feed are the user's own, marked with its name (`"owner":"alice"`), so an answer can be
/// told to be another user's.
public struct DemoUser: Sendable, Equatable {
    public let name: String

    public init(name: String) {
        self.name = name
    }

    /// The value of the `Authorization` field the app sends with each API request.
    var authorization: String { "Bearer token-of-\(name)" }
    /// The value of the session cookie (`session`) the app keeps in its session's jar.
    var sessionID: String { "session-of-\(name)" }

    /// The user the app starts signed in as, and the one it switches to.
    public static let alice = DemoUser(name: "alice")
    public static let bob = DemoUser(name: "bob")
    static let all = [alice, bob]
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
    /// Whose credentials an API request carried (nil: none, or another path).
    var user: String?
    /// The origin's clock when the request arrived.
    var at: Date
}

/// The embedded origin with one resource per rule of the contract, on a `ManualClock` shared
/// with the cache, behind a simulated network, plus the log of what its handlers answered.
///
/// Every route is a handler wrapping an `OriginResource` (or generating its body), so each
/// response's status is logged next to `LoopbackOrigin`'s own request log and byte counters.
/// An API request without a user's bearer token and session cookie (both the same user's) gets
/// `403`; the profile and the feed are each user's own.
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
    /// The resources every user gets, by path.
    private let resources: [String: OriginResource]
    /// The resources that are each user's own, by path and user name.
    private let usersResources: [String: [String: OriginResource]]
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
    /// Where the API starts: requests under it carry the user's credentials.
    static let apiPrefix = "/api/"

    static func isAPI(_ path: String) -> Bool {
        path.hasPrefix(apiPrefix)
    }

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
        ]
        usersResources = [
            Self.profilePath: Dictionary(uniqueKeysWithValues: DemoUser.all.map { user in
                (user.name, OriginResource(body: DemoContent.json("profile v1", bytes: 4_000, owner: user.name),
                                           contentType: "application/json", etag: .automatic, lastModified: .none))
            }),
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
        let exchanges = self.exchanges
        /// Answers `request` with `answer` for its user — for an API path only a user whose
        /// token and cookie it carries, else `403` — and logs the exchange.
        @Sendable func handle(_ request: OriginRequest, _ answer: (DemoUser?) -> OriginResponse) -> OriginResponse {
            let user = Self.user(of: request)
            let response = Self.isAPI(request.path) && user == nil
                ? OriginResponse(status: 403, headers: [HTTPField("Content-Type", "text/plain")], body: Data("sign in".utf8))
                : answer(user)
            exchanges.withLock { $0.append(OriginExchange(request, status: response.status, user: user?.name)) }
            return response
        }
        for (path, resource) in resources {
            origin.handle(path) { request in handle(request) { _ in resource.response(to: request) } }
        }
        for (path, byUser) in usersResources {
            origin.handle(path) { request in
                handle(request) { user in byUser[user?.name ?? ""]?.response(to: request) ?? OriginResponse(status: 404) }
            }
        }
        origin.handle(Self.feedPath) { [clock] request in
            handle(request) { user in
                guard request.method == "GET" || request.method == "HEAD" else {
                    return OriginResponse(status: 405, headers: [HTTPField("Allow", "GET, HEAD")])
                }
                return OriginResponse(headers: [HTTPField("Content-Type", "application/json")],
                                      body: DemoContent.feed(at: clock.now, owner: user?.name ?? ""))
            }
        }
        origin.handle(Self.likePath) { [likes] request in
            handle(request) { _ in
                guard request.method == "POST" else {
                    return OriginResponse(status: 405, headers: [HTTPField("Allow", "POST")])
                }
                let body = likes.withLock { state -> Data in
                    state.count += 1
                    let post = String(decoding: request.body, as: UTF8.self)
                    state.lastBody = Data("{\"request\":\(post.isEmpty ? "null" : post),\"likes\":\(state.count)}".utf8)
                    return state.lastBody
                }
                return OriginResponse(headers: [HTTPField("Content-Type", "application/json")], body: body)
            }
        }
    }

    /// The user whose bearer token and session cookie `request` carries, both the same user's;
    /// nil otherwise.
    static func user(of request: OriginRequest) -> DemoUser? {
        guard let authorization = request.header("Authorization"), let cookie = request.header("Cookie") else { return nil }
        let cookies = cookie.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        return DemoUser.all.first { user in
            authorization == user.authorization && cookies.contains("session=\(user.sessionID)")
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

    /// Changes the body of the resource at `path` (a new ETag comes with it), every user's when
    /// it is each user's own.
    func change(_ path: String) {
        let name = "\(path) changed at +\(DurationText.label(offset))"
        if let resource = resources[path] {
            resource.update(body: DemoContent.json(name, bytes: resource.body.count))
        }
        for (user, resource) in usersResources[path] ?? [:] {
            resource.update(body: DemoContent.json(name, bytes: resource.body.count, owner: user))
        }
    }

    /// What the origin serves `user` at `path` right now: the current representation of a
    /// resource (the user's own where each has one) or the feed, and for the POST endpoint the
    /// body of the latest POST.
    func currentBody(_ path: String, for user: DemoUser) -> Data {
        if path == Self.feedPath { return DemoContent.feed(at: clock.now, owner: user.name) }
        if path == Self.likePath { return likes.withLock { $0.lastBody } }
        return (usersResources[path]?[user.name] ?? resources[path])?.body ?? Data()
    }

    /// How many exchanges have been logged.
    var exchangeCount: Int { exchanges.withLock { $0.count } }

    /// Exchanges logged from index `start` on.
    func exchanges(from start: Int) -> [OriginExchange] {
        exchanges.withLock { Array($0[min(start, $0.count)...]) }
    }

    /// When the origin last sent or confirmed the representation at `path` (a 200 or a 304) to
    /// `user`, among the first `count` exchanges.
    func lastConfirmation(of path: String, for user: DemoUser, amongFirst count: Int) -> Date? {
        exchanges.withLock { log in
            log.prefix(count).last {
                $0.path == path && ($0.status == 200 || $0.status == 304) && (!Self.isAPI(path) || $0.user == user.name)
            }?.at
        }
    }
}

extension OriginExchange {
    init(_ request: OriginRequest, status: Int, user: String?) {
        method = request.method
        path = request.path
        self.status = status
        self.user = user
        validator = request.header("If-None-Match") != nil ? "If-None-Match"
            : request.header("If-Modified-Since") != nil ? "If-Modified-Since" : nil
        at = request.receivedAt
    }
}

/// Deterministic bodies of realistic sizes, so every run sends the same bytes.
enum DemoContent {
    /// A JSON document of about `bytes` bytes (never less); one that is a user's own starts with
    /// its `owner` (`owner(of:)`).
    static func json(_ name: String, bytes: Int, owner: String? = nil) -> Data {
        var text = (owner.map { "{\"owner\":\"\($0)\"," } ?? "{") + "\"name\":\"\(name)\",\"items\":["
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

    /// The user whose own document `body` is (it starts with `{"owner":"<name>"`), or nil.
    static func owner(of body: Data) -> String? {
        let prefix = Data("{\"owner\":\"".utf8)
        guard body.starts(with: prefix) else { return nil }
        let rest = body.dropFirst(prefix.count)
        guard let end = rest.firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return String(decoding: rest[..<end], as: UTF8.self)
    }

    /// `owner`'s feed as the origin generates it at `date`: new on every request a second apart.
    static func feed(at date: Date, owner: String) -> Data {
        let stamp = String(Int(date.timeIntervalSince1970))
        var text = "{\"owner\":\"\(owner)\",\"generated\":\(stamp),\"posts\":["
        for index in 0..<60 {
            if index > 0 { text += "," }
            text += "{\"id\":\(index),\"text\":\"post \(index) as of \(stamp)\",\"likes\":\((index * 31) % 97)}"
        }
        return Data((text + "]}").utf8)
    }
}

/// Short human labels for durations: "10 s", "30 min", "1 h", "2 d", "8 d 10 min".
enum DurationText {
    static func label(_ seconds: TimeInterval) -> String {
        let value = Int(seconds.rounded())
        if value > 86_400, value % 86_400 != 0 { return "\(value / 86_400) d " + label(TimeInterval(value % 86_400)) }
        if value != 0, value % 86_400 == 0 { return "\(value / 86_400) d" }
        if value != 0, value % 3_600 == 0 { return "\(value / 3_600) h" }
        if value >= 300, value % 60 == 0 { return "\(value / 60) min" }
        return "\(value) s"
    }
}
