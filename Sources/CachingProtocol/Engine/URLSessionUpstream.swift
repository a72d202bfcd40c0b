import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The origin, reached through private `URLSession`s made on first use from the app session's
/// settings (`SessionSettings.upstreamConfiguration`), so that the cache's requests get the
/// connections the app's own requests would get:
///
/// - **One per app session, when a load says which** (`AppSession`, known on Linux): each app
///   session's loads go through an upstream session of their own, with that session's
///   `httpMaximumConnectionsPerHost` per host, as its tasks would without the layer. One
///   session's fast requests never wait behind another's slow ones for a connection, and no
///   session gets more connections than it would. Released (its running transfers finish) once
///   the app's session is gone: when the last transfer through it ends after that, or else at the
///   next send or the end of any other transfer, whichever comes first. At most
///   `maximumAppSessions` are kept, those used most recently.
/// - **Otherwise one per settings**, told apart by `SessionSettings.upstreamKey` (not by the
///   header fields each request carries): for loads whose session is not known (on Apple, where
///   a task does not say, Docs/foundation-facts.md A22; prefetch and cached-then-fresh), which
///   share its connections. At most `maximumSharedSessions` are kept, those used most recently,
///   so an app that makes sessions with new settings all the time does not accumulate
///   connections and threads.
///
/// A session pushed out is invalidated once its running transfers finish, and made again when
/// its app session or settings come back.
final class URLSessionUpstream: Upstream {
    /// Which upstream session a request goes through.
    private struct Key: Hashable {
        let settings: SessionSettings.UpstreamKey
        /// The app session's identity; nil for the session shared by loads of `settings`.
        let appSession: ObjectIdentifier?
    }

    private struct Kept {
        let client: UpstreamClient
        /// The app session it was made for (nil: shared).
        let appSession: AppSession?
        var lastUse: UInt64
        /// Transfers sent through it that have not ended.
        var running = 0
    }

    private struct Clients {
        var byKey: [Key: Kept] = [:]
        var clock: UInt64 = 0
        /// How many of `byKey` belong to an app session.
        var appSessionCount = 0

        /// The client for `key`, made from `configuration` when there is none; with the clients
        /// to shut down: those of app sessions that are gone, and the least recently used one
        /// past its kind's limit.
        mutating func client(for key: Key, appSession: AppSession?,
                             making configuration: () -> URLSessionConfiguration) -> (UpstreamClient, [UpstreamClient]) {
            clock += 1
            var released = appSessionCount > 0 ? releaseGoneAppSessions() : []
            if let kept = byKey[key] {
                byKey[key]?.lastUse = clock
                byKey[key]?.running += 1
                return (kept.client, released)
            }
            let made = UpstreamClient(configuration: configuration())
            byKey[key] = Kept(client: made, appSession: appSession, lastUse: clock, running: 1)
            let isAppSessions = appSession != nil
            if isAppSessions { appSessionCount += 1 }
            let count = isAppSessions ? appSessionCount : byKey.count - appSessionCount
            let limit = isAppSessions ? URLSessionUpstream.maximumAppSessions : URLSessionUpstream.maximumSharedSessions
            if count > limit, let oldest = byKey.filter({ ($0.value.appSession != nil) == isAppSessions })
                .min(by: { $0.value.lastUse < $1.value.lastUse }) {
                released.append(remove(oldest.key))
            }
            return (made, released)
        }

        /// A transfer `client` sent for `key` ended: the clients to shut down, those of app
        /// sessions the app let go of (this one's among them when it was its last transfer).
        mutating func transferEnded(for key: Key, on client: UpstreamClient) -> [UpstreamClient] {
            if byKey[key]?.client === client { byKey[key]?.running -= 1 }
            guard appSessionCount > 0 else { return [] }
            return byKey.filter { $0.value.running == 0 && $0.value.appSession?.isGone == true }.map { remove($0.key) }
        }

        /// Forgets the clients of app sessions the app let go of.
        private mutating func releaseGoneAppSessions() -> [UpstreamClient] {
            byKey.filter { $0.value.appSession?.isGone == true }.map { remove($0.key) }
        }

        private mutating func remove(_ key: Key) -> UpstreamClient {
            let kept = byKey.removeValue(forKey: key)!
            if kept.appSession != nil { appSessionCount -= 1 }
            return kept.client
        }

        mutating func removeAll() -> [UpstreamClient] {
            defer {
                byKey = [:]
                appSessionCount = 0
            }
            return byKey.values.map(\.client)
        }
    }
    private let clients = Locked(Clients())
    private let clock: @Sendable () -> Date
    /// Which protocol classes the upstream sessions leave out (the caching protocol's).
    private let isCachingProtocol: @Sendable (AnyClass) -> Bool

    /// How many upstream sessions shared by the loads of one settings are kept (see
    /// `URLSessionUpstream`).
    static let maximumSharedSessions = 8

    /// How many upstream sessions of app sessions are kept: more than an app keeps in use at
    /// once, so none is made twice while its app session lives.
    static let maximumAppSessions = 64

    /// Stamps request and response dates with `clock`; never consults the classes
    /// `isCachingProtocol` picks.
    init(clock: @escaping @Sendable () -> Date, leavingOut isCachingProtocol: @escaping @Sendable (AnyClass) -> Bool) {
        self.clock = clock
        self.isCachingProtocol = isCachingProtocol
    }

    deinit {
        shutdown()
    }

    func send(_ request: URLRequest, from settings: SessionSettings, appSession: AppSession?, wholeBody: Bool,
              listener: UpstreamListener?,
              completion: @escaping @Sendable (Result<ReceivedResponse, Error>) -> Void) -> UpstreamTask {
        // An app session freed meanwhile has no loads left to wait for this request but, perhaps,
        // one that joined from another session: the shared session serves it.
        let appSession = appSession.flatMap { $0.isGone ? nil : $0 }
        let key = Key(settings: settings.upstreamKey, appSession: appSession?.id)
        let (client, released) = clients.withLock { clients in
            clients.client(for: key, appSession: appSession) { settings.upstreamConfiguration(leavingOut: isCachingProtocol) }
        }
        for client in released { client.shutdown() }
        return client.send(request, wholeBody: wholeBody, clock: clock, listener: listener) { [clients] outcome in
            let released = clients.withLock { $0.transferEnded(for: key, on: client) }
            for client in released { client.shutdown() }
            completion(outcome)
        }
    }

    func shutdown() {
        for client in clients.withLock({ $0.removeAll() }) { client.shutdown() }
    }

    /// How many upstream sessions are kept now, and how many of them belong to app sessions.
    var sessionCounts: (all: Int, appSessions: Int) {
        clients.withLock { ($0.byKey.count, $0.appSessionCount) }
    }
}
