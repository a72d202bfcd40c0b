import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// Replays ``Scenario`` through each client against a fresh embedded origin behind a simulated
/// network and measures what happened from the origin's logs and the clients' responses.
public struct Comparison: Sendable {
    public var scenario: Scenario
    public var clients: [ClientKind]
    /// The heuristic clients' policy.
    public var policy: CachingPolicy
    /// The rules the heuristic clients' answers are judged by (the reuse windows of wrong
    /// answers); by default `policy`.
    public var contract: CachingPolicy
    /// The header-only client's policy. Default ``CachingPolicy/rfc9111``.
    public var headerOnlyPolicy: CachingPolicy
    /// The rules the header-only, URLCache and no-cache clients' answers are judged by: caching
    /// by the headers alone, whatever a client manages to store. By default `headerOnlyPolicy`.
    public var headerOnlyContract: CachingPolicy
    /// The network every client's origin acts out. Default ``NetworkProfile/loopback`` (no added
    /// delay, what the tests use); `Demo` defaults to ``NetworkProfile/default``.
    public var network: NetworkProfile
    /// Whether the clients run at the same time, each against its own origin on its own port
    /// (default), or one after another. At the same time, a run on a simulated network takes
    /// as long as its slowest client instead of the sum of all; the clients share the CPU only
    /// for the little work they do between network waits.
    public var concurrent: Bool

    public init(scenario: Scenario = .standard, clients: [ClientKind] = ClientKind.allCases,
                policy: CachingPolicy = .heuristic(), contract: CachingPolicy? = nil,
                headerOnlyPolicy: CachingPolicy = .rfc9111, headerOnlyContract: CachingPolicy? = nil,
                network: NetworkProfile = .loopback, concurrent: Bool = true) {
        self.scenario = scenario
        self.clients = clients
        self.policy = policy
        self.contract = contract ?? policy
        self.headerOnlyPolicy = headerOnlyPolicy
        self.headerOnlyContract = headerOnlyContract ?? headerOnlyPolicy
        self.network = network
        self.concurrent = concurrent
    }

    /// Runs every client, each with its own origin, clock and cache. `progress` gets a line per
    /// client (one after another) or per finished client (at the same time), and the phases.
    public func run(progress: ProgressReporter? = nil) async throws -> ComparisonReport {
        // The clock starts at the real time, so the origin's `Date` headers look current to the
        // Foundation clients at launch; it then only moves when a phase says so.
        let launch = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let made = Locked<[DemoClient]>([])
        defer {
            // `unregister()` unbinds every configuration at once: only when no client runs.
            if clients.contains(where: \.usesProtocol) { CachingURLProtocol.unregister() }
            for client in made.withLock({ $0 }) { client.removeFiles() }
        }
        var results: [ClientResult] = []
        if concurrent {
            progress?.stage("\(clients.count) clients at once on \(network.name)")
            results = try await withThrowingTaskGroup(of: (Int, ClientResult).self) { group in
                for (index, kind) in clients.enumerated() {
                    group.addTask { (index, try await run(kind, launch: launch, made: made, progress: progress)) }
                }
                var finished: [(Int, ClientResult)] = []
                for try await result in group {
                    finished.append(result)
                    progress?.stage("\(finished.count)/\(clients.count) clients done on \(network.name)")
                }
                return finished.sorted { $0.0 < $1.0 }.map(\.1)
            }
        } else {
            for (index, kind) in clients.enumerated() {
                progress?.stage("[\(index + 1)/\(clients.count)] \(kind.name)")
                results.append(try await run(kind, launch: launch, made: made, progress: progress))
            }
        }
        let rulesClient = results.first { $0.kind == .cachingProtocolHead } ?? results.first { $0.kind.isHeuristic }
        let headerOnly = results.first { $0.kind == .cachingProtocolRFC9111 }
        return ComparisonReport(
            date: Date(),
            scenario: scenario,
            network: network,
            concurrent: concurrent,
            clients: results,
            rules: rulesClient.map { ruleTraces(for: $0) } ?? [],
            revalidationCosts: revalidationCosts(results),
            rulesClient: rulesClient?.kind,
            headerOnlyRules: headerOnly.map { ruleTraces(for: $0) } ?? [])
    }

    /// The policy `kind` caches with (the clients without the protocol are handed the header-only
    /// one and have no use for it).
    func policy(for kind: ClientKind) -> CachingPolicy {
        kind.isHeuristic ? policy : headerOnlyPolicy
    }

    /// The rules `kind`'s answers are judged by: its own.
    func contract(for kind: ClientKind) -> CachingPolicy {
        kind.isHeuristic ? contract : headerOnlyContract
    }

    private func run(_ kind: ClientKind, launch: Date, made: Locked<[DemoClient]>,
                     progress: ProgressReporter?) async throws -> ClientResult {
        let site = try DemoSite(launch: launch, network: network.simulated)
        let client = DemoClient(kind, site: site, policy: policy(for: kind))
        made.withLock { $0.append(client) }
        defer {
            client.tearDown()
            site.stop()
        }
        var records: [RequestRecord] = []
        var anomalies: [String] = client.setupProblem.map { [$0] } ?? []
        let started = DispatchTime.now()
        for phase in scenario.phases {
            progress?.detail(concurrent ? "\(kind.name): \(phase.name)" : phase.name)
            records += await play(phase, site: site, client: client, offline: false, anomalies: &anomalies)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        var byMethod: [String: Int] = [:]
        for request in site.origin.requests { byMethod[request.method, default: 0] += 1 }
        if site.exchangeCount != site.origin.requests.count {
            anomalies.append("\(kind.name): origin logged \(site.origin.requests.count) requests, handlers answered \(site.exchangeCount)")
        }
        if let statistics = client.caching?.statistics {
            let fromCache = records.filter { $0.answer == .fromCache && $0.method == "GET" }.count
            if statistics.hits + statistics.staleHits != fromCache {
                anomalies.append("\(kind.name): statistics count \(statistics.hits + statistics.staleHits) hits, the records \(fromCache)")
            }
        }
        var result = ClientResult(
            kind: kind,
            originRequests: byMethod,
            originBytes: site.origin.totalBytesSent,
            originBodyBytes: site.origin.bodyBytesSent,
            originBytesReceived: site.origin.totalBytesReceived,
            originConnections: site.origin.connectionsAccepted,
            records: records,
            seconds: seconds,
            cacheBytes: 0,
            anomalies: anomalies)

        if let phase = scenario.offline {
            // The network is gone: the origin stops listening, so every connection is refused
            // at once (as a phone in airplane mode fails at once).
            progress?.detail(concurrent ? "\(kind.name): \(phase.name)" : phase.name)
            site.stop()
            var ignored: [String] = []
            result.offline = OfflineResult(
                phase: phase.name, records: await play(phase, site: site, client: client, offline: true, anomalies: &ignored))
            if let caching = client.caching {
                // The same again, told: what an app that watches the network path would do.
                caching.isOffline = true
                result.offlineSwitched = OfflineResult(
                    phase: phase.name, records: await play(phase, site: site, client: client, offline: true, anomalies: &ignored))
                caching.isOffline = false
            }
        }
        result.cacheBytes = client.cacheBytes
        return result
    }

    /// Moves the clock to `phase` and sends its requests one at a time.
    private func play(_ phase: Scenario.Phase, site: DemoSite, client: DemoClient, offline: Bool,
                      anomalies: inout [String]) async -> [RequestRecord] {
        site.moveClock(toOffset: phase.offset)
        var records: [RequestRecord] = []
        for action in phase.actions {
            switch action {
            case .change(let path):
                site.change(path)
            case .signIn(let user):
                client.signIn(user, at: site.origin.baseURL)
            case .get(let path):
                records.append(await perform("GET", path, body: nil, phase: phase, site: site, client: client,
                                             offline: offline, anomalies: &anomalies))
            case .post(let path, let body):
                records.append(await perform("POST", path, body: Data(body.utf8), phase: phase, site: site,
                                             client: client, offline: offline, anomalies: &anomalies))
            }
        }
        return records
    }

    /// Sends one request and measures it: the origin traffic it caused (from the origin's logs,
    /// taken before and after), how the client answered, and whether the body was current.
    /// `offline`: the origin is unreachable, so failures are expected (not anomalies) and the
    /// origin's log, which sees nothing, is not held against the protocol's account.
    private func perform(
        _ method: String, _ path: String, body: Data?, phase: Scenario.Phase,
        site: DemoSite, client: DemoClient, offline: Bool, anomalies: inout [String]
    ) async -> RequestRecord {
        let exchangesBefore = site.exchangeCount
        let bytesBefore = site.origin.totalBytesSent
        let eventsBefore = client.eventCount
        let user = client.user
        var request = URLRequest(url: site.origin.url(path))
        request.httpMethod = method
        if DemoSite.isAPI(path) {
            // The app's API client signs each request with the user's token; the session cookie
            // comes from the session's jar.
            request.setValue(user.authorization, forHTTPHeaderField: "Authorization")
        }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let started = DispatchTime.now()
        var data = Data()
        var response: HTTPURLResponse?
        var failure: String?
        do {
            let (received, urlResponse) = try await client.session.data(for: request)
            data = received
            response = urlResponse as? HTTPURLResponse
        } catch {
            failure = Self.describe(error)
            if !offline {
                anomalies.append("\(client.kind.name): \(method) \(path) at \(phase.name) failed: \(error)")
            }
        }
        let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e6
        let exchanges = site.exchanges(from: exchangesBefore)
        let hops = exchanges.map { OriginHop(method: $0.method, status: $0.status, validator: $0.validator) }
        let event = client.events(from: eventsBefore).last
        let cacheStatus = response?.value(forHTTPHeaderField: "Cache-Status")
        let rule = site.route(for: path)?.rule ?? .uncachedJSON

        // Classification: the protocol's own account when it handled the request, checked
        // against the origin's log; otherwise the origin's log alone.
        let answer: AnswerKind
        if response == nil {
            answer = .failed
        } else if let event {
            switch event.outcome {
            case .hit, .staleHit, .staleAfterError: answer = .fromCache
            case .revalidatedNotModified: answer = .revalidated
            case .revalidatedChanged, .fetched: answer = .fetched
            case .notInCache, .failed: answer = .failed
            }
            if offline {
                // The protocol tried the origin, which logged nothing: nothing to compare.
            } else if (answer == .fromCache) != hops.isEmpty || event.upstreamMethods != hops.map(\.method) {
                anomalies.append("\(client.kind.name): \(path) at \(phase.name): event \(event.outcome) \(event.upstreamMethods), origin saw \(hops.map(\.method))")
            }
            if !offline, let cacheStatus, cacheStatus.contains("; hit") != (answer == .fromCache) {
                anomalies.append("\(client.kind.name): \(path) at \(phase.name): Cache-Status \(cacheStatus) vs \(answer)")
            }
        } else if hops.isEmpty {
            answer = .fromCache
        } else if hops.last?.status == 304 {
            answer = .revalidated
        } else {
            answer = .fetched
        }

        if let response, !(200..<300).contains(response.statusCode), failure == nil {
            failure = event?.outcome == .failed ? "\(response.statusCode) from the cache" : "status \(response.statusCode)"
        }
        // Only a usable answer is judged (a made-up 504 carries no body to compare).
        let isAnswered = response.map { (200..<300).contains($0.statusCode) } ?? false
        let isOtherUsers = isAnswered && Self.isOtherUsers(data, answeredTo: user)
        let freshness: Freshness = !isAnswered ? .current : Freshness.judge(
            isCurrent: data == site.currentBody(path, for: user),
            contactedOrigin: !hops.isEmpty,
            sinceConfirmation: site.lastConfirmation(of: path, for: user, amongFirst: exchangesBefore)
                .map { site.clock.now.timeIntervalSince($0) },
            window: rule.reuseWindow(policy: contract(for: client.kind)))
        return RequestRecord(
            phase: phase.name,
            user: user.name,
            offset: phase.offset,
            method: method,
            path: path,
            rule: rule,
            status: response?.statusCode ?? 0,
            bodyBytes: data.count,
            answer: answer,
            hops: hops,
            originBytes: site.origin.totalBytesSent - bytesBefore,
            isCurrent: isAnswered && freshness == .current,
            isAllowedStale: freshness == .allowedStale && !isOtherUsers,
            isWrong: freshness == .wrong || isOtherUsers,
            isOtherUsers: isOtherUsers,
            cacheOutcome: event.map { "\($0.outcome)" },
            cacheStatus: cacheStatus,
            milliseconds: milliseconds,
            failure: failure)
    }

    /// Whether `body`, answered to `user`, is a document the origin made for another user (the
    /// profile and the feed are each user's own, `DemoContent.owner(of:)`).
    static func isOtherUsers(_ body: Data, answeredTo user: DemoUser) -> Bool {
        DemoContent.owner(of: body).map { $0 != user.name } ?? false
    }

    /// A short reason for a failed request, e.g. "cannot connect".
    static func describe(_ error: Error) -> String {
        guard let error = error as? URLError else { return "\(error)" }
        switch error.code {
        case .cannotConnectToHost: return "cannot connect"
        case .networkConnectionLost: return "connection lost"
        case .notConnectedToInternet: return "not connected to the internet"
        case .resourceUnavailable: return "nothing stored, offline mode"
        case .timedOut: return "timed out"
        default: return "URLError \(error.code.rawValue)"
        }
    }

    // MARK: Rules and revalidation

    /// One trace per rule, from the requests of the user the session starts with: the rules are
    /// about one resource over time, and another user's first requests are that user's misses.
    func ruleTraces(for client: ClientResult) -> [RuleTrace] {
        let firstUser = client.records.first?.user
        let own = client.records.filter { $0.user == firstUser }
        var seen: [String] = []
        for record in own where !seen.contains(record.path) { seen.append(record.path) }
        return seen.compactMap { path -> RuleTrace? in
            let records = own.filter { $0.path == path }
            guard let rule = records.first?.rule else { return nil }
            let policy = policy(for: client.kind)
            return RuleTrace(rule: rule, title: rule.title(policy: policy), treatment: rule.treatment(policy: policy),
                             path: path, records: records, line: ReportText.ruleLine(records))
        }.sorted { DemoRule.allCases.firstIndex(of: $0.rule)! < DemoRule.allCases.firstIndex(of: $1.rule)! }
    }

    /// Per protocol client: the cost of a check that found the resource unchanged, and of one
    /// that found it changed, from the records of requests that revalidated.
    func revalidationCosts(_ results: [ClientResult]) -> [RevalidationCost] {
        var costs: [RevalidationCost] = []
        for resource in ["unchanged", "changed"] {
            for client in results where client.kind.usesProtocol {
                let checks = client.records.filter { record in
                    guard record.hops.first?.validator != nil else { return false }
                    return resource == "unchanged" ? record.answer == .revalidated : record.answer == .fetched
                }
                guard !checks.isEmpty else { continue }
                let trips = checks.reduce(0) { $0 + $1.hops.count }
                let bytes = checks.reduce(0) { $0 + $1.originBytes }
                costs.append(RevalidationCost(
                    resource: resource, client: client.name, checks: checks.count,
                    roundTrips: Double(trips) / Double(checks.count), bytes: Double(bytes) / Double(checks.count),
                    exchange: ReportText.hops(checks[0].hops, namingValidators: false)))
            }
        }
        return costs
    }
}

/// Whether a body a client got was the one it should have got.
enum Freshness: Equatable {
    /// The origin's current representation.
    case current
    /// An older one, inside the reuse window the contract grants.
    case allowedStale
    /// An older one the contract says must not be served.
    case wrong

    /// A body that is not the origin's current one is wrong unless the contract lets the client
    /// keep it: the origin was not contacted for this request (a stale body after a 304 or a
    /// HEAD is always wrong) and the origin last sent or confirmed it less than the rule's reuse
    /// `window` ago.
    static func judge(isCurrent: Bool, contactedOrigin: Bool, sinceConfirmation: TimeInterval?,
                      window: TimeInterval) -> Freshness {
        if isCurrent { return .current }
        guard !contactedOrigin, let sinceConfirmation, sinceConfirmation < window else { return .wrong }
        return .allowedStale
    }
}
