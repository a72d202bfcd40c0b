import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// Replays ``Scenario`` through each client against a fresh embedded origin and measures what
/// happened from the origin's logs and the clients' responses.
public struct Comparison: Sendable {
    public var scenario: Scenario
    public var clients: [ClientKind]
    /// The protocol clients' policy.
    public var policy: CachingPolicy
    /// The rules answers are judged by (the reuse windows of wrong answers); by default `policy`.
    public var contract: CachingPolicy

    public init(scenario: Scenario = .standard, clients: [ClientKind] = ClientKind.allCases,
                policy: CachingPolicy = .heuristic(), contract: CachingPolicy? = nil) {
        self.scenario = scenario
        self.clients = clients
        self.policy = policy
        self.contract = contract ?? policy
    }

    /// Runs every client, one after another (only one protocol configuration is active per
    /// process), each with its own origin, clock and cache. `progress` gets a line per client and
    /// per phase.
    public func run(progress: ProgressReporter? = nil) async throws -> ComparisonReport {
        // The clock starts at the real time, so the origin's `Date` headers look current to the
        // Foundation clients at launch; it then only moves when a phase says so.
        let launch = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        var results: [ClientResult] = []
        for (index, kind) in clients.enumerated() {
            progress?.stage("[\(index + 1)/\(clients.count)] \(kind.name)")
            results.append(try await run(kind, launch: launch, progress: progress))
        }
        let rulesClient = results.first { $0.kind == .cachingProtocolHead } ?? results.first { $0.kind.usesProtocol }
        return ComparisonReport(
            date: Date(),
            scenario: scenario,
            clients: results,
            rules: rulesClient.map { ruleTraces(for: $0) } ?? [],
            revalidationCosts: revalidationCosts(results),
            rulesClient: rulesClient?.kind)
    }

    private func run(_ kind: ClientKind, launch: Date, progress: ProgressReporter?) async throws -> ClientResult {
        let site = try DemoSite(launch: launch)
        let client = DemoClient(kind, site: site, policy: policy)
        defer {
            client.tearDown()
            site.stop()
        }
        var records: [RequestRecord] = []
        var anomalies: [String] = client.setupProblem.map { [$0] } ?? []
        let started = DispatchTime.now()
        for phase in scenario.phases {
            progress?.detail(phase.name)
            site.moveClock(toOffset: phase.offset)
            for action in phase.actions {
                switch action {
                case .change(let path):
                    site.change(path)
                case .get(let path):
                    records.append(await perform("GET", path, body: nil, phase: phase, site: site, client: client,
                                                 anomalies: &anomalies))
                case .post(let path, let body):
                    records.append(await perform("POST", path, body: Data(body.utf8), phase: phase, site: site,
                                                 client: client, anomalies: &anomalies))
                }
            }
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
        return ClientResult(
            kind: kind,
            originRequests: byMethod,
            originBytes: site.origin.totalBytesSent,
            originBodyBytes: site.origin.bodyBytesSent,
            records: records,
            seconds: seconds,
            cacheBytes: client.cacheBytes,
            anomalies: anomalies)
    }

    /// Sends one request and measures it: the origin traffic it caused (from the origin's logs,
    /// taken before and after), how the client answered, and whether the body was current.
    private func perform(
        _ method: String, _ path: String, body: Data?, phase: Scenario.Phase,
        site: DemoSite, client: DemoClient, anomalies: inout [String]
    ) async -> RequestRecord {
        let exchangesBefore = site.exchangeCount
        let bytesBefore = site.origin.totalBytesSent
        let eventsBefore = client.eventCount
        var request = URLRequest(url: site.origin.url(path))
        request.httpMethod = method
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let started = DispatchTime.now()
        var data = Data()
        var response: HTTPURLResponse?
        do {
            let (received, urlResponse) = try await client.session.data(for: request)
            data = received
            response = urlResponse as? HTTPURLResponse
        } catch {
            anomalies.append("\(client.kind.name): \(method) \(path) at \(phase.name) failed: \(error)")
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
            if (answer == .fromCache) != hops.isEmpty || event.upstreamMethods != hops.map(\.method) {
                anomalies.append("\(client.kind.name): \(path) at \(phase.name): event \(event.outcome) \(event.upstreamMethods), origin saw \(hops.map(\.method))")
            }
            if let cacheStatus, cacheStatus.contains("; hit") != (answer == .fromCache) {
                anomalies.append("\(client.kind.name): \(path) at \(phase.name): Cache-Status \(cacheStatus) vs \(answer)")
            }
        } else if hops.isEmpty {
            answer = .fromCache
        } else if hops.last?.status == 304 {
            answer = .revalidated
        } else {
            answer = .fetched
        }

        let freshness: Freshness = response == nil ? .current : Freshness.judge(
            isCurrent: data == site.currentBody(path),
            contactedOrigin: !hops.isEmpty,
            sinceConfirmation: site.lastConfirmation(of: path, amongFirst: exchangesBefore)
                .map { site.clock.now.timeIntervalSince($0) },
            window: rule.reuseWindow(policy: contract))
        return RequestRecord(
            phase: phase.name,
            offset: phase.offset,
            method: method,
            path: path,
            rule: rule,
            status: response?.statusCode ?? 0,
            bodyBytes: data.count,
            answer: answer,
            hops: hops,
            originBytes: site.origin.totalBytesSent - bytesBefore,
            isCurrent: response != nil && freshness == .current,
            isAllowedStale: freshness == .allowedStale,
            isWrong: freshness == .wrong,
            cacheOutcome: event.map { "\($0.outcome)" },
            cacheStatus: cacheStatus,
            milliseconds: milliseconds)
    }

    // MARK: Rules and revalidation

    func ruleTraces(for client: ClientResult) -> [RuleTrace] {
        var seen: [String] = []
        for record in client.records where !seen.contains(record.path) { seen.append(record.path) }
        return seen.compactMap { path -> RuleTrace? in
            let records = client.records.filter { $0.path == path }
            guard let rule = records.first?.rule else { return nil }
            return RuleTrace(rule: rule, title: rule.title(policy: policy), path: path, records: records,
                             line: ReportText.ruleLine(records))
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
