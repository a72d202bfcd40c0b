import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// The stress run's app: many sessions loading from a ``StressOrigin`` at once, through the layer
/// or not, with cancellations and (through the layer) cache management meanwhile; every answer is
/// judged by ``StressChecker`` as it arrives and every error named for the comparison of the runs.
///
/// The sessions: a session delegate's tasks (two sessions), completion handlers' (two, one of
/// them all for user "bob" through `httpAdditionalHeaders`), `async data(for:)`, `async
/// data(for:delegate:)` with a per-call delegate, and `URLSession.shared` (with `register()`
/// through the layer); three have a request timeout of 2 s, the others 4 s. Other loads name
/// their user (none, "alice" or "bob") in `Authorization`. Workers, each drawing from its own
/// generator seeded from the run's seed, pick a session, a path (a resource or a redirect), a
/// user, now and then a byte range or `reloadIgnoringLocalCacheData`, and for one load in ten a
/// cancellation, 0–30 ms after `resume()` or on the first bytes. Each load starting moves the
/// shared clock on by 0.02 s, so `max-age` lapses every few hundred loads.
///
/// Nothing here may hang: every load is waited for with a deadline (a load that misses it is
/// reported as hung), and a watchdog ends the process, naming the loads still running, when the
/// run outlasts its time by far.
final class StressWorkload: Sendable {
    /// The settings of one run.
    struct Settings: Sendable {
        var seed: UInt64
        var seconds: TimeInterval
        var withLayer: Bool
        var directory: URL
        var workers = 16
    }

    /// How a client's loads are made.
    enum Style: String, Sendable {
        case sessionDelegate = "delegate"
        case completionHandler = "completion"
        case async
        case asyncWithDelegate = "async+delegate"
        case shared
    }

    /// One of the app's sessions.
    struct Client: Sendable {
        let name: String
        let style: Style
        /// Nil for `URLSession.shared`.
        let session: URLSession?
        /// The user all its requests are for (through `httpAdditionalHeaders`), if it has one.
        let user: String?
        let timeout: TimeInterval
        var urlSession: URLSession { session ?? URLSession.shared }
    }

    /// What a worker decided a load does.
    struct Plan: Sendable, CustomStringConvertible {
        var number: Int
        var client: Int
        var path: String
        var user: String
        var range: ClosedRange<Int>?
        var reload = false
        /// Milliseconds after `resume()`, or -1 for "on the first bytes"; nil: never cancelled.
        var cancelAfter: Int?

        var description: String {
            var text = "load \(number) \(path) user=\(user)"
            if let range { text += " range=\(range.lowerBound)-\(range.upperBound)" }
            if reload { text += " reload" }
            if let cancelAfter { text += cancelAfter < 0 ? " cancel-on-first-bytes" : " cancel-after=\(cancelAfter)ms" }
            return text
        }
    }

    /// What happened to a load.
    enum Verdict: Equatable {
        case right
        case wrong(String)
        case error(String)
        case hung
    }

    private struct Tally {
        var loads = 0
        var right = 0
        var wrong: [String] = []
        var hung: [String] = []
        var errors: [String: Int] = [:]
        var cancelsIssued = 0
        var running: [Int: String] = [:]
    }

    let settings: Settings
    let origin: StressOrigin
    let clock: ManualClock
    private let checker: StressChecker
    private let caching: CachingConfiguration?
    private let clients: [Client]
    private let sessionDelegate: SessionDelegate
    private let tally = LockedBox(Tally())
    /// Offline episodes begun so far, and whether one is on: a load during which either changed
    /// may get offline mode's error.
    private let offline = LockedBox((episodes: 0, on: false))

    static let users = ["anonymous", "alice", "bob"]

    init(_ settings: Settings) throws {
        self.settings = settings
        clock = ManualClock(Date())
        origin = try StressOrigin(seed: settings.seed, clock: clock)
        checker = StressChecker(origin: origin)
        if settings.withLayer {
            let cache = CachingURLCache(memoryCapacity: 512 << 10, diskCapacity: 8 << 20, directory: settings.directory)
            let caching = CachingConfiguration(cache: cache, now: clock.read)
            // At launch, before any session exists, as the documentation asks.
            CachingURLProtocol.register(caching)
            self.caching = caching
        } else {
            caching = nil
        }
        sessionDelegate = SessionDelegate()
        let caching = self.caching
        let delegate = sessionDelegate
        func session(_ timeout: TimeInterval, user: String? = nil, delegate: URLSessionDelegate? = nil) -> URLSession {
            let configuration = URLSessionConfiguration.default
            configuration.timeoutIntervalForRequest = timeout
            if let user { configuration.httpAdditionalHeaders = ["Authorization": "Bearer \(user)"] }
            if let caching { CachingURLProtocol.inject(into: configuration, using: caching) }
            return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        }
        let short = StressOrigin.shortTimeout, long = StressOrigin.longTimeout
        clients = [
            Client(name: "delegate", style: .sessionDelegate, session: session(long, delegate: delegate), user: nil, timeout: long),
            Client(name: "delegate, short timeout", style: .sessionDelegate, session: session(short, delegate: delegate), user: nil,
                   timeout: short),
            Client(name: "completion", style: .completionHandler, session: session(long), user: nil, timeout: long),
            Client(name: "completion, bob, short timeout", style: .completionHandler, session: session(short, user: "bob"), user: "bob",
                   timeout: short),
            Client(name: "async", style: .async, session: session(long), user: nil, timeout: long),
            Client(name: "async+delegate, short timeout", style: .asyncWithDelegate, session: session(short), user: nil, timeout: short),
            Client(name: "shared", style: .shared, session: nil, user: nil, timeout: long),
        ]
    }

    // MARK: - The run

    /// Runs the workers and the manager for the run's time, prints the report and returns whether
    /// every answer was right and no load hung.
    func run() -> Bool {
        let descriptors = DescriptorSampler()
        let deadline = Date().addingTimeInterval(settings.seconds)
        startWatchdog(after: settings.seconds + 30)
        let workers = DispatchGroup()
        for worker in 0..<settings.workers {
            workers.enter()
            let thread = Thread { [self] in
                var random = SeededGenerator(seed: settings.seed, stream: 100 + UInt64(worker))
                var number = 0
                while Date() < deadline {
                    let plan = plan(worker: worker, number: number, using: &random)
                    number += 1
                    perform(plan)
                }
                workers.leave()
            }
            thread.name = "stress worker \(worker)"
            thread.start()
        }
        if let caching {
            let thread = Thread { [self] in manage(caching, until: deadline) }
            thread.name = "stress manager"
            thread.start()
        }
        workers.wait()
        for client in clients { client.session?.finishTasksAndInvalidate() }
        caching?.cache.waitUntilSettled()
        // The origin closes its side of every connection: what stays open then is the clients'.
        origin.origin.stop()
        let (start, peak, end) = descriptors.finish()
        return report(descriptors: (start, peak, end))
    }

    /// The load a worker makes next. One in ten is cancelled; those load a slow resource (or a
    /// redirect to one), so the app cancels while the load runs (see `cancellable`).
    private func plan(worker: Int, number: Int, using random: inout SeededGenerator) -> Plan {
        let clientIndex = Int.random(in: 0..<clients.count, using: &random)
        let client = clients[clientIndex]
        let redirect = random.chance(20)
        let cancels = cancellable(client.style, redirect: redirect) && random.chance(10)
        let paths = (cancels ? origin.slowPaths : origin.quickPaths).filter { isRedirect($0) == redirect }
        let path = paths[Int.random(in: 0..<paths.count, using: &random)]
        let user = client.user ?? Self.users[Int.random(in: 0..<Self.users.count, using: &random)]
        var plan = Plan(number: worker * 1_000_000 + number, client: clientIndex, path: path, user: user)
        if !redirect, random.chance(8), let resource = (origin.resources + origin.slowResources).first(where: { $0.path == path }) {
            let lower = Int.random(in: 0..<resource.length, using: &random)
            plan.range = lower...(lower + Int.random(in: 0..<5_000, using: &random))
        }
        plan.reload = random.chance(5)
        if cancels {
            plan.cancelAfter = client.style == .sessionDelegate && random.chance(50) ? -1 : Int.random(in: 0...30, using: &random)
        }
        return plan
    }

    private func isRedirect(_ path: String) -> Bool {
        !(path.hasPrefix("/r/") || path.hasPrefix("/slow/"))
    }

    /// Whether a load of `style` may be cancelled. Not an `async` call: cancelling the Swift task
    /// of `data(for:)` while its transfer ends deadlocks the session in corelibs (issue 5412: the
    /// cancellation handler waits for the session's queue under the task's status lock, which the
    /// queue needs to resume the call; fixed upstream by pull request 5417, after Swift 6.3.1).
    /// Not a redirect of a task with a delegate: corelibs traps when such a task is cancelled while
    /// it waits for the delegate's redirect answer ("Received callback for HTTP redirection, but
    /// we're not waiting for it"). Both happen without the layer. And a cancelled load is one
    /// whose body takes a while (`StressOrigin.slowPaths`): corelibs traps when `cancel()` comes
    /// just as a task completes ("Trying to access a behaviour for a task that is not in the
    /// registry"), which cancelling loads that end within milliseconds makes likely without the
    /// layer too.
    private func cancellable(_ style: Style, redirect: Bool) -> Bool {
        switch style {
        case .async, .asyncWithDelegate: return false
        case .sessionDelegate: return !redirect
        case .completionHandler, .shared: return true
        }
    }

    // MARK: - One load

    private func perform(_ plan: Plan) {
        let client = clients[plan.client]
        var request = URLRequest(url: origin.origin.url(plan.path),
                                 cachePolicy: plan.reload ? .reloadIgnoringLocalCacheData : .useProtocolCachePolicy,
                                 timeoutInterval: client.timeout)
        if client.user == nil, plan.user != "anonymous" { request.setValue("Bearer \(plan.user)", forHTTPHeaderField: "Authorization") }
        if let range = plan.range { request.setValue("bytes=\(range.lowerBound)-\(range.upperBound)", forHTTPHeaderField: "Range") }
        clock.advance(by: 0.02)
        tally.withLock { $0.loads += 1; $0.running[plan.number] = "\(client.name): \(plan)" }
        let offlineBefore = offline.withLock { $0 }
        let firstSequence = origin.sequence
        let collector = Collector()
        let cancel = start(request, plan: plan, client: client, collector: collector)
        if let after = plan.cancelAfter {
            if after < 0 {
                collector.onFirstBytes { cancel() }
            } else {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(after)) { cancel() }
            }
        }
        let finished = collector.done.wait(timeout: .now() + client.timeout + 10) == .success
        let lastSequence = origin.sequence
        let offlineAfter = offline.withLock { $0 }
        let outcome = collector.outcome
        let verdict: Verdict
        if !finished {
            verdict = .hung
        } else if let error = outcome.error {
            let wasOffline = offlineBefore.on || offlineAfter.on || offlineBefore.episodes != offlineAfter.episodes
            verdict = .error(StressChecker.errorKind(error, cancelledByApp: collector.cancelIssued, offline: wasOffline))
        } else if let response = outcome.response {
            let answer = StressChecker.Answer(
                path: response.url?.path ?? "?", user: client.user ?? plan.user, status: response.statusCode,
                etag: response.value(forHTTPHeaderField: "ETag"), contentRange: response.value(forHTTPHeaderField: "Content-Range"),
                body: outcome.body, cacheStatus: response.value(forHTTPHeaderField: "Cache-Status"),
                window: plan.reload ? (firstSequence + 1)...max(firstSequence + 1, lastSequence) : nil)
            if checker.isTheCachesGatewayTimeout(answer) {
                verdict = .error("the cache's 504 for a response it could not validate")
            } else {
                verdict = checker.problem(with: answer).map { .wrong("\(client.name): \(plan): \($0)") } ?? .right
            }
        } else {
            verdict = .wrong("\(client.name): \(plan): neither a response nor an error")
        }
        let report = tally.withLock { tally -> String? in
            tally.running[plan.number] = nil
            if collector.cancelIssued { tally.cancelsIssued += 1 }
            switch verdict {
            case .right: tally.right += 1
            case .wrong(let text):
                tally.wrong.append(text)
                return tally.wrong.count <= 40 ? "wrong \(text)" : nil
            case .error(let kind): tally.errors[kind, default: 0] += 1
            case .hung:
                tally.hung.append("\(client.name): \(plan)")
                return tally.hung.count <= 40 ? "hung \(client.name): \(plan)" : nil
            }
            return nil
        }
        // At once, so that what was found is on record even if the process then crashes.
        if let report { say(report) }
    }

    /// Starts `request` the way `client` loads; returns how to cancel it.
    private func start(_ request: URLRequest, plan: Plan, client: Client, collector: Collector) -> @Sendable () -> Void {
        let session = client.urlSession
        switch client.style {
        case .sessionDelegate:
            let task = session.dataTask(with: request)
            sessionDelegate.register(collector, for: task)
            task.resume()
            return { collector.issueCancel { task.cancel() } }
        case .completionHandler, .shared:
            let task = session.dataTask(with: request) { data, response, error in
                collector.finish(response: response, body: data, error: error)
            }
            task.resume()
            return { collector.issueCancel { task.cancel() } }
        case .async, .asyncWithDelegate:
            let perCallDelegate = client.style == .asyncWithDelegate ? collector : nil
            let call = Task {
                do {
                    let (data, response) = try await session.data(for: request, delegate: perCallDelegate)
                    collector.finish(response: response, body: data, error: nil)
                } catch {
                    collector.finish(response: nil, body: nil, error: error)
                }
            }
            return { collector.issueCancel { call.cancel() } }
        }
    }

    // MARK: - Cache management meanwhile

    /// Until `deadline`, every 50–250 ms: a purge, a removal of everything, a flush of memory to
    /// disk or a memory warning, a pin or an unpin, an offline episode, a change of capacity, a trim.
    private func manage(_ caching: CachingConfiguration, until deadline: Date) {
        var random = SeededGenerator(seed: settings.seed, stream: 2)
        let cache = caching.cache
        while Date() < deadline {
            usleep(useconds_t(Int.random(in: 50_000...250_000, using: &random)))
            let paths = origin.quickPaths + origin.slowPaths
            let url = origin.origin.url(paths[Int.random(in: 0..<paths.count, using: &random)])
            switch Int.random(in: 0..<10, using: &random) {
            case 0: cache.purge(url: url)
            case 1: cache.removeAllCachedResponses()
            case 2: cache.flushMemoryToDisk()
            case 3: NotificationCenter.default.post(name: Notification.Name("UIApplicationDidReceiveMemoryWarningNotification"), object: nil)
            case 4: try? cache.pin(url)
            case 5: try? cache.unpin(url)
            case 6 where random.chance(30):
                offline.withLock { $0 = (episodes: $0.episodes + 1, on: true) }
                caching.isOffline = true
                usleep(useconds_t(Int.random(in: 20_000...100_000, using: &random)))
                caching.isOffline = false
                offline.withLock { $0.on = false }
            case 7: cache.memoryCapacity = Int.random(in: (64 << 10)...(2 << 20), using: &random)
            case 8: cache.diskCapacity = Int.random(in: (1 << 20)...(16 << 20), using: &random)
            default: cache.trimDisk(toBytes: Int.random(in: 0...(4 << 20), using: &random))
            }
        }
    }

    // MARK: - Report

    /// Ends the process, naming the loads still running, if the run is not over after `seconds`.
    private func startWatchdog(after seconds: TimeInterval) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            let running = tally.withLock { $0.running.values.sorted() }
            say("hung: the run did not end within \(Int(seconds)) s; \(running.count) loads still running")
            for load in running.prefix(20) { say("hung \(load)") }
            exit(3)
        }
    }

    private func report(descriptors: (start: Int, peak: Int, end: Int)) -> Bool {
        let tally = tally.withLock { $0 }
        say("stress layer=\(settings.withLayer ? "with" : "without") seed=\(settings.seed) seconds=\(Int(settings.seconds))")
        for (kind, count) in tally.errors.sorted(by: { $0.key < $1.key }) { say("error-kind \(count) \(kind)") }
        let errors = tally.errors.values.reduce(0, +)
        say("summary loads=\(tally.loads) right=\(tally.right) wrong=\(tally.wrong.count) hung=\(tally.hung.count) "
            + "errors=\(errors) cancels=\(tally.cancelsIssued)")
        let faults = origin.faultCounts.sorted(by: { $0.key < $1.key }).map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        say("origin requests=\(origin.origin.requests.count) connections=\(origin.origin.connectionsAccepted) faults: \(faults)")
        if let caching {
            let counted = caching.statistics
            say("layer hits=\(counted.hits) stale=\(counted.staleHits) not-modified=\(counted.revalidatedNotModified) "
                + "changed=\(counted.revalidatedChanged) fetched=\(counted.fetched) stale-after-error=\(counted.staleAfterError) "
                + "not-in-cache=\(counted.notInCache) failed=\(counted.failed) collapsed=\(counted.collapsed)")
        }
        say("fds start=\(descriptors.start) peak=\(descriptors.peak) end=\(descriptors.end)")
        return tally.wrong.isEmpty && tally.hung.isEmpty
    }
}

// MARK: - Collecting a load's answer

/// Collects one load's answer, from a session delegate (forwarded by ``SessionDelegate``), as a
/// per-call delegate of `data(for:delegate:)`, or from a completion handler. `done` is signalled
/// once, when the load ends.
final class Collector: NSObject, URLSessionDataDelegate, Sendable {
    struct Outcome {
        var response: HTTPURLResponse?
        var body = Data()
        var error: Error?
        var finished = false
    }
    private struct State {
        var outcome = Outcome()
        /// The pieces a delegate got, in order. A per-call delegate may still get some after the
        /// call returned (they come through the session's delegate queue), so they are kept
        /// apart from what the call returned.
        var streamed = Data()
        var onFirstBytes: (@Sendable () -> Void)?
        var cancelIssued = false
    }
    private let state = LockedBox(State())
    let done = DispatchSemaphore(value: 0)

    var outcome: Outcome { state.withLock { $0.outcome } }
    /// Whether the app's cancellation ran before the load ended.
    var cancelIssued: Bool { state.withLock { $0.cancelIssued } }

    func onFirstBytes(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.onFirstBytes = action }
    }

    /// Runs `cancel` unless the load has ended, and notes that the app cancelled it.
    func issueCancel(_ cancel: () -> Void) {
        let issued = state.withLock { state -> Bool in
            guard !state.outcome.finished else { return false }
            state.cancelIssued = true
            return true
        }
        if issued { cancel() }
    }

    /// Ends the load with what it got: `body` as a call or completion handler returned it, or
    /// nil for the pieces its session delegate got.
    func finish(response: URLResponse?, body: Data?, error: Error?) {
        let first = state.withLock { state -> Bool in
            guard !state.outcome.finished else { return false }
            state.outcome.finished = true
            if let response = response as? HTTPURLResponse { state.outcome.response = response }
            state.outcome.body = body ?? state.streamed
            state.outcome.error = error
            return true
        }
        if first { done.signal() }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        state.withLock { $0.outcome.response = response as? HTTPURLResponse }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let first = state.withLock { state -> (@Sendable () -> Void)? in
            state.streamed.append(data)
            defer { state.onFirstBytes = nil }
            return state.onFirstBytes
        }
        first?()
    }
}

/// A session delegate that hands each task's calls to the task's ``Collector``. Several sessions
/// share it, so tasks are told apart by identity (task identifiers are per session).
final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let collectors = LockedBox<[ObjectIdentifier: Collector]>([:])

    func register(_ collector: Collector, for task: URLSessionTask) {
        collectors.withLock { $0[ObjectIdentifier(task)] = collector }
    }

    private func collector(_ task: URLSessionTask) -> Collector? {
        collectors.withLock { $0[ObjectIdentifier(task)] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        guard let collector = collector(dataTask) else { return completionHandler(.allow) }
        collector.urlSession(session, dataTask: dataTask, didReceive: response, completionHandler: completionHandler)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        collector(dataTask)?.urlSession(session, dataTask: dataTask, didReceive: data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let collector = collectors.withLock { $0.removeValue(forKey: ObjectIdentifier(task)) }
        guard let collector else { return }
        collector.finish(response: task.response, body: nil, error: error)
    }
}

/// Samples the process's open descriptors every 100 ms from creation to `finish()`.
final class DescriptorSampler: Sendable {
    private let samples = LockedBox((start: openDescriptors(), peak: openDescriptors(), stopped: false))

    init() {
        let thread = Thread { [samples] in
            while !samples.withLock({ $0.stopped }) {
                let count = openDescriptors()
                samples.withLock { $0.peak = max($0.peak, count) }
                usleep(100_000)
            }
        }
        thread.start()
    }

    /// Stops sampling; the count at the start, the peak, and the count once the sessions let go
    /// of their connections (waited for up to 2 s, until it is back within 4 of the start).
    func finish() -> (start: Int, peak: Int, end: Int) {
        let (start, peak) = samples.withLock { state -> (Int, Int) in
            state.stopped = true
            return (state.start, state.peak)
        }
        var end = openDescriptors()
        let giveUp = Date().addingTimeInterval(2)
        while end > start + 4, Date() < giveUp {
            usleep(50_000)
            end = openDescriptors()
        }
        return (start, max(peak, end), end)
    }
}
