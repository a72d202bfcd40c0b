import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request sent to the origin as it is, whose answer goes to its client as it comes, with
/// nothing looked up, stored, shared with another load or counted: what a protocol class unbound
/// since `canInit` took the request does with it where no Foundation protocol can be handed the
/// task (Apple platforms). The upstream session is made from the app session's settings, as for
/// the cache's own requests (`SessionSettings.upstreamConfiguration`).
///
/// The client gets the response head and each piece of the body as they arrive when it streams,
/// the challenges raised on the way (a server-trust one for a session whose delegate judges trust
/// is cancelled when the client cannot pass it on, as in `ExchangeListener`), and each redirect
/// as `Answer.redirect`, its next hop's request made as Apple's loader makes it
/// (`SessionSettings.redirected`): the app's session asks its delegate and loads the next hop.
///
/// Threading: `start` from any thread (the request is sent from the engine's queue); the client
/// is called on the upstream session's delegate queue.
final class PassThroughLoad: UpstreamListener, @unchecked Sendable {
    // @unchecked: every property is a `let`; URLRequest is not declared Sendable in every SDK.
    private let request: URLRequest
    /// Whether `request`'s `Cookie` is the one the layer put on it for the session
    /// (`CacheRequest.cookieIsSessions`), left off a redirect hop as Apple's loader leaves it.
    private let cookieIsSessions: Bool
    private let settings: SessionSettings
    private let client: LoadClient
    private let handle = LoadHandle()

    private init(request: URLRequest, cookieIsSessions: Bool, settings: SessionSettings, client: LoadClient) {
        self.request = request
        self.cookieIsSessions = cookieIsSessions
        self.settings = settings
        self.client = client
    }

    /// Sends `request` (the app's, as `settings.apply(to:)` makes it; `cookieIsSessions` says
    /// whose its `Cookie` is), from an app session with `settings`, through `upstream`; `client`
    /// gets its answer. The returned handle cancels it.
    static func start(_ request: URLRequest, cookieIsSessions: Bool, from settings: SessionSettings,
                      through upstream: any Upstream, client: LoadClient) -> LoadHandle {
        let load = PassThroughLoad(request: request, cookieIsSessions: cookieIsSessions, settings: settings, client: client)
        // Never from inside `startLoading`: corelibs deadlocks when a task is made there
        // (Docs/foundation-facts.md, L3).
        CacheEngine.queue.async {
            // The app session is not known here (Apple platforms: a task does not say it): the
            // settings' shared upstream session, as for any load whose session is unknown.
            let task = upstream.send(request, from: settings, appSession: nil, wholeBody: false, listener: load) { load.finish($0) }
            load.handle.joined { task.cancel() }
        }
        return load.handle
    }

    /// Where a response leads when it is a redirect Foundation follows.
    private func redirectTarget(of response: HTTPURLResponse) -> URLRequest? {
        CachingPolicy.redirectTarget(of: request, status: response.statusCode,
                                     location: response.value(forHTTPHeaderField: "Location"))
    }

    private func finish(_ result: Result<ReceivedResponse, Error>) {
        guard handle.claimAnswer() else { return }
        switch result {
        case .failure(let error):
            client.receive(.failure(error), outcome: .failed)
        case .success(let received):
            let response = received.head.response
            if let target = redirectTarget(of: response) {
                let hop = settings.redirected(target, from: request, cookieIsSessions: cookieIsSessions, perHop: true)
                return client.receive(.redirect(response, received.body, to: hop), outcome: .fetched)
            }
            client.receive(.response(response, received.body), outcome: .fetched)
        }
    }

    // MARK: UpstreamListener

    func upstreamDidReceiveChallenge(_ challenge: URLAuthenticationChallenge,
                                     answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let judgedByTheApp = settings.judgesServerTrust
            && challenge.protectionSpace.authenticationMethod == serverTrustAuthenticationMethod
        guard !judgedByTheApp || client.forwardsChallenges else { return answer(.cancelAuthenticationChallenge, nil) }
        client.forward(challenge, reply: answer)
    }

    /// The head goes on at once to a client that streams (a redirect's waits for its body: it is
    /// reported whole); the body is then only relayed, unless the client needs it whole too.
    func upstreamDidReceiveHead(_ head: ReceivedHead) -> BodyHandling {
        guard client.streamsBody, redirectTarget(of: head.response) == nil else { return .keepWhole }
        client.receiveHead(head.response)
        return BodyHandling(relays: true, keepsUpTo: client.needsWholeBody ? nil : 0)
    }

    func upstreamDidReceiveBody(_ data: Data) {
        client.receiveChunk(data)
    }

    func upstreamBodyPassesLimit() -> Bool {
        true
    }

    var isWanted: Bool { !handle.isFinished }

    /// Never: a redirect's answer makes the next hop's request (Apple platforms, where the
    /// completion runs in place anyway).
    func upstreamMayEndInPlace(_ response: ReceivedResponse) -> Bool {
        false
    }
}
