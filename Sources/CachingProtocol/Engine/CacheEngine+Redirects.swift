import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Redirects, followed by the engine itself. The upstream session stops at every redirect
/// (`UpstreamClient`), so the 3xx is an answer like any other: stored when the policy allows
/// (`CachingPolicy.storageDecision`), and — fetched or stored — it goes on for each load as the
/// app's platform would go on without the cache:
///
/// - a client that reports redirects to its app (Apple: `wasRedirectedTo`) gets the redirect
///   as its answer (`Answer.redirect`), and the app's session starts the next load;
/// - a client whose app is asked (Linux, a task with a delegate: `AppTaskRedirects`) asks; the
///   request the delegate gives back is loaded as given, and a refusal makes the 3xx the answer;
/// - every other load follows, with the session's cookies for the new URL.
///
/// The next request is the one the platform's loader would make (`SessionSettings.redirected`):
/// corelibs copies every header field of the request before; Apple's loader makes each hop's
/// request anew, with the jar's cookies for its own URL and no `Authorization` for another origin.
///
/// Following means looking the target up like any request: a stored redirect to a stored
/// target answers without the origin, also when it cannot be reached.
extension CacheEngine {
    /// The most redirects one load follows; one more fails with
    /// `NSURLErrorHTTPTooManyRedirects`, as corelibs' own protocol does ("this value mirrors
    /// Darwin", `HTTPURLProtocol.redirectFor`).
    static let maximumRedirects = 20

    /// Goes on with the redirect `response` (with `body`) to `target`, which `load` got as
    /// `provenance` says, as `load`'s app would (see the extension's summary). Any thread.
    func followRedirect(_ response: HTTPURLResponse, _ body: Data, to target: URLRequest, for load: Load,
                        as provenance: Provenance) {
        switch load.redirects {
        case .report:
            preconditionFailure("a redirect reported to the app is delivered, not followed")
        case .follow:
            let next = load.settings.redirected(target, from: load.request)
            let sent = load.settings.followingRedirect(next)
            follow(response, to: target, with: sent, cookieIsSessions: SessionSettings.cookieIsSessions(in: sent, madeFrom: next),
                   from: load.settings, for: load, as: provenance)
        case .ask(let ask):
            ask(response, target) { [self] given in
                guard let given else {
                    // Refused: the 3xx and its body are the answer.
                    return deliver(.response(response, body), to: load, as: provenance)
                }
                follow(response, to: target, with: given, cookieIsSessions: false, from: load.settings.forRequestsAsGiven, for: load,
                       as: provenance)
            }
        }
    }

    /// Loads `request` for `load`, one redirect further, from a session with `settings`
    /// (`cookieIsSessions`: its `Cookie` field is the session's, `CacheRequest.cookieIsSessions`).
    /// The redirect itself is counted as an answer of its own (its key, outcome and trip; no body
    /// delivered).
    private func follow(_ response: HTTPURLResponse, to target: URLRequest, with request: URLRequest, cookieIsSessions: Bool,
                        from settings: SessionSettings, for load: Load, as provenance: Provenance) {
        var failed = provenance
        failed.outcome = .failed
        failed.notStored = nil
        guard load.redirectsFollowed < Self.maximumRedirects else {
            var info: [String: Any] = [NSLocalizedDescriptionKey: "too many HTTP redirects"]
            if let url = request.url { info[NSURLErrorFailingURLErrorKey] = url }
            return deliver(.failure(URLError(.httpTooManyRedirects, userInfo: info)), to: load, as: failed)
        }
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host != nil else {
            // As Foundation's own HTTP protocol ends a redirect it follows to a URL it cannot send
            // (another scheme, no host): corelibs' `HTTPURLProtocol.configureEasyHandle`.
            let error = URLError(.badURL, userInfo: request.url.map { [NSURLErrorFailingURLErrorKey: $0] } ?? [:])
            return deliver(.failure(error), to: load, as: failed)
        }
        guard !load.handle.isFinished else { return }
        account(.redirect(response, Data(), to: target), key: load.request.key, as: provenance, started: load.started)
        let fromCache = [.hit, .staleHit, .revalidatedNotModified, .staleAfterError].contains(provenance.outcome)
        // On the engine's queue: a redirect the app's delegate decided arrives on the session's
        // delegate queue, and the next load may create an upstream task.
        Self.queue.async { [self] in
            guard !load.handle.isFinished else { return }
            loadNextHop(request, cookieIsSessions: cookieIsSessions, from: settings, after: load, viaStoredRedirect: fromCache)
        }
    }

    /// Plans and runs `request` as the next step of `load`: looked up like any GET the cache
    /// takes (or a POST a rule caches); an unsafe request is sent as it is (dropping what is
    /// stored for its URL once accepted); anything else the cache would leave to Foundation —
    /// another scheme, the app's own validators, a bypass rule — is sent as it is and never stored.
    private func loadNextHop(_ request: URLRequest, cookieIsSessions: Bool, from settings: SessionSettings, after load: Load,
                             viaStoredRedirect: Bool) {
        func next(_ request: CacheRequest) -> Load {
            // Sent by the same loader: with the fields it adds (`CacheRequest.fieldsAddedWhenSent`).
            load.following(partitioned(request.sent(with: load.request.fieldsAddedWhenSent), from: settings), from: settings,
                           viaStoredRedirect: viaStoredRedirect)
        }
        let lookedUp: CacheRequest?
        var unsafe = false
        switch RequestDisposition(request) {
        case .cacheable, .range:
            lookedUp = bypasses(request) || passesBy(request)
                ? nil : cacheKey(for: request).map { CacheRequest(request, key: $0, cookieIsSessions: cookieIsSessions) }
        case .invalidate:
            if cachesPOST(request), let key = CacheKey.make(forPOST: request) {
                lookedUp = CacheRequest(request, key: key, cookieIsSessions: cookieIsSessions)
            } else {
                (lookedUp, unsafe) = (nil, true)
            }
        case .passThrough:
            lookedUp = nil
        }
        if let lookedUp {
            let load = next(lookedUp)
            let (plan, now) = currentPlan(for: load.request, record: store.finishLookup(load.request.key))
            return carryOut(plan, for: load, now: now)
        }
        let key = cacheKey(for: request) ?? "FORWARD \(request.url?.absoluteString ?? "")"
        var sent = next(CacheRequest(request, key: key, cookieIsSessions: cookieIsSessions))
        sent.collapsible = false
        runExchange(unsafe ? .unsafe : .forward, for: sent.request, from: sent.settings, waiting: sent)
    }

    /// `response` with `detail=via-stored-redirect` in its `Cache-Status` (joined to a detail it
    /// has): the answer of a load that followed a stored redirect on its way, which the app (on
    /// Linux, where the engine follows) does not otherwise see. Unchanged when the configuration
    /// adds no `Cache-Status`.
    func markedAsReachedThroughStoredRedirect(_ response: HTTPURLResponse) -> HTTPURLResponse {
        guard configuration.addsCacheStatus, let url = response.url,
              let status = response.value(forHTTPHeaderField: "Cache-Status") else { return response }
        var headers = HTTPHeaders(response.allHeaderFields)
        headers.set("Cache-Status", CacheStatus.adding(detail: CacheStatus.viaStoredRedirect, to: status))
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers.dictionary) ?? response
    }
}
