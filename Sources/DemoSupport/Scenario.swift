import Foundation

/// The app session every client replays: phases at fixed offsets on the simulated clock, each a
/// list of requests (and, once, a change at the origin, and an account switch). The app starts
/// signed in as ``DemoUser/alice``: every API request carries her bearer token (set on the
/// request by the app), and every request her session cookie (in the session's cookie jar), as
/// a real app's do.
public struct Scenario: Sendable {
    /// Something that happens in a phase.
    public enum Action: Sendable, Equatable {
        case get(String)
        case post(String, body: String)
        /// The origin changes the resource at this path (the app does nothing).
        case change(String)
        /// The app signs out and this user signs in: from here on its API requests carry the
        /// user's token, and its cookie jar the user's session cookie instead of the last one's.
        case signIn(DemoUser)

        /// Whether the action is a request the app sends.
        var isRequest: Bool {
            switch self {
            case .get, .post: return true
            case .change, .signIn: return false
            }
        }
    }

    public struct Phase: Sendable, Equatable {
        /// E.g. "launch", "refresh +10 s", "return +2 d".
        public var name: String
        /// Seconds after launch on the simulated clock.
        public var offset: TimeInterval
        public var actions: [Action]

        public init(name: String, offset: TimeInterval, actions: [Action]) {
            self.name = name
            self.offset = offset
            self.actions = actions
        }
    }

    public var phases: [Phase]
    /// After `phases`: the origin becomes unreachable (it stops listening, so connections are
    /// refused) and the app sends these requests again. Nil: no offline phase. Its requests are
    /// not in ``requestCount``; they are measured apart (`ClientResult.offline`).
    public var offline: Phase?

    public init(phases: [Phase], offline: Phase? = nil) {
        self.phases = phases
        self.offline = offline
    }

    /// Requests one client sends.
    public var requestCount: Int {
        phases.reduce(0) { count, phase in
            count + phase.actions.filter(\.isRequest).count
        }
    }

    /// The session the Demo replays: an app launch, a pull-to-refresh burst of three pulls ten
    /// seconds apart (two of them followed by a "like"), the profile edited elsewhere half-way,
    /// then the app opened again after an hour, after two days and after eight days; ten minutes
    /// after that last return another user signs in on the same device (an account switch) and
    /// the app loads everything for them; an hour after that return the network is gone and the
    /// app opens once more, sending its launch requests and a like.
    public static let standard: Scenario = {
        let everything: [Action] = [
            .get(DemoSite.configPath), .get(DemoSite.catalogPath), .get(DemoSite.termsPath),
            .get(DemoSite.scoresPath), .get(DemoSite.avatarPath), .get(DemoSite.feedPath),
            .get(DemoSite.profilePath),
        ]
        let refresh: [Action] = [
            .get(DemoSite.feedPath), .get(DemoSite.scoresPath), .get(DemoSite.catalogPath),
            .get(DemoSite.avatarPath), .get(DemoSite.profilePath),
        ]
        let day: TimeInterval = 86_400
        return Scenario(phases: [
            Phase(name: "launch", offset: 0, actions: everything),
            Phase(name: "refresh +10 s", offset: 10, actions: refresh + [.post(DemoSite.likePath, body: "{\"post\":17}")]),
            Phase(name: "refresh +20 s", offset: 20, actions: refresh + [.post(DemoSite.likePath, body: "{\"post\":18}")]),
            Phase(name: "refresh +30 s", offset: 30, actions: refresh),
            Phase(name: "profile edited +30 min", offset: 1_800, actions: [.change(DemoSite.profilePath)]),
            Phase(name: "return +1 h", offset: 3_600, actions: everything),
            Phase(name: "return +2 d", offset: 2 * day, actions: everything),
            Phase(name: "return +8 d", offset: 8 * day, actions: everything),
            Phase(name: "account switch +8 d 10 min", offset: 8 * day + 600, actions: [.signIn(.bob)] + everything),
        ], offline: Phase(name: "offline +8 d 1 h", offset: 8 * day + 3_600,
                          actions: everything + [.post(DemoSite.likePath, body: "{\"post\":19}")]))
    }()
}
