import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LoopbackOrigin

/// An app that cancels every task it starts, 0–30 ms after `resume()`, with the layer injected
/// or not: the pattern under which corelibs' own traps in `cancel()` show (`Docs/reliability.md`,
/// "Cancelling"). A trap ends the process, so each run is a process of its own and `rates`
/// counts the runs that died. The origin answers after a 15 ms round trip.
///
/// - `redirects`: a completion-handler session without a delegate; every request is for
///   `/r/<n>`, a `302` to `/t/<n>` (a `200` stored for a minute), so each load is redirected
///   while it may be cancelled.
/// - `delegate-redirects`: the same requests on a session whose delegate is asked about each
///   redirect (and follows it), as an app that watches its redirects is.
/// - `plain`: a completion-handler session without a delegate; every request is for `/p/<n>`, a
///   `200` stored for a minute, so through the layer most loads are hits that end at once, within
///   the window the app cancels in.
///
/// `n` is drawn from 0..<64. Each of 8 workers starts a task, waits 0–30 ms, cancels it, and
/// waits for its end (10 s at most: a task that never ends is reported as hung).
enum CancelRace {
    enum Pattern: String, CaseIterable {
        case redirects
        case delegateRedirects = "delegate-redirects"
        case plain
    }

    /// What a run saw: its loads' endings, by kind.
    private struct Tally {
        var cancels = 0
        var succeeded = 0
        var cancelled = 0
        var failed: [String: Int] = [:]
        var hung = 0
    }

    /// cancel-race PATTERN with|without SECONDS DIR: one run; prints `cancel-race …` with the
    /// counts and exits 0, or 1 when a load never ended.
    static func run(_ pattern: Pattern, withLayer: Bool, seconds: TimeInterval, directory: URL, workers: Int = 8,
                    roundTrip: TimeInterval = 0.015) -> Never {
        let origin: LoopbackOrigin
        do { origin = try LoopbackOrigin() } catch { fail("origin: \(error)") }
        // A phone's network: each response starts a round trip after its request, inside the
        // window the app cancels in.
        origin.network = SimulatedNetwork(roundTrip: roundTrip)
        let stored = [HTTPField("Cache-Control", "max-age=60")]
        for n in 0..<64 {
            origin.handle("/r/\(n)") { _ in OriginResponse(status: 302, headers: [HTTPField("Location", "/t/\(n)")]) }
            origin.handle("/t/\(n)") { _ in OriginResponse(headers: stored, body: Data("target \(n)".utf8)) }
            origin.handle("/p/\(n)") { _ in OriginResponse(headers: stored, body: Data("plain \(n)".utf8)) }
        }
        let configuration = URLSessionConfiguration.default
        if withLayer {
            let cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 16 << 20, directory: directory)
            CachingURLProtocol.inject(into: configuration, using: CachingConfiguration(cache: cache))
        }
        let delegate = RedirectAskingDelegate()
        let session = URLSession(configuration: configuration, delegate: pattern == .delegateRedirects ? delegate : nil,
                                 delegateQueue: nil)
        let prefix = pattern == .plain ? "/p/" : "/r/"
        let tally = AppProtocols.Record(Tally())
        let deadline = Date(timeIntervalSinceNow: seconds)
        // The process ends itself if the run does not (a deadlock): 60 s after its time.
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds + 60) {
            say("cancel-race did not end: \(tally.read { "\($0)" })")
            exit(3)
        }
        let group = DispatchGroup()
        for _ in 0..<workers {
            group.enter()
            Thread {
                while Date() < deadline {
                    let ended = DispatchSemaphore(value: 0)
                    let url = origin.url(prefix + "\(Int.random(in: 0..<64))")
                    let end: @Sendable (Error?) -> Void = { error in
                        tally.change { tally in
                            switch error {
                            case nil: tally.succeeded += 1
                            case let error as URLError where error.code == .cancelled: tally.cancelled += 1
                            case let error?: tally.failed["\((error as NSError).domain) \((error as NSError).code)", default: 0] += 1
                            }
                        }
                        ended.signal()
                    }
                    let task: URLSessionDataTask
                    if pattern == .delegateRedirects {
                        task = session.dataTask(with: url)
                        delegate.ends.change { $0[task.taskIdentifier] = end }
                    } else {
                        task = session.dataTask(with: url) { _, _, error in end(error) }
                    }
                    task.resume()
                    usleep(UInt32.random(in: 0...30_000))
                    task.cancel()
                    tally.change { $0.cancels += 1 }
                    if ended.wait(timeout: .now() + 10) == .timedOut { tally.change { $0.hung += 1 } }
                }
                group.leave()
            }.start()
        }
        group.wait()
        let result = tally.read { $0 }
        let failed = result.failed.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
        say("cancel-race pattern=\(pattern.rawValue) layer=\(withLayer ? "with" : "without") cancels=\(result.cancels) "
            + "succeeded=\(result.succeeded) cancelled=\(result.cancelled) failed=[\(failed)] hung=\(result.hung) "
            + "origin-requests=\(origin.requests.count)")
        exit(result.hung == 0 ? 0 : 1)
    }

    /// cancel-rates PATTERN RUNS SECONDS: RUNS runs of SECONDS each, without the layer and with
    /// it taking turns, each a `cancel-race` process of this executable; prints one line per run
    /// (`run N without|with: ` and the run's `cancel-race …` line, or `crashed <trap>`) and a
    /// summary per side, `crashed C of R runs …, K cancels in the runs that ended`.
    static func rates(_ pattern: Pattern, runs: Int, seconds: TimeInterval) -> Never {
        var sides: [Bool: (crashed: Int, cancels: Int)] = [false: (0, 0), true: (0, 0)]
        for run in 1...runs {
            for withLayer in [false, true] {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cancel-race-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: directory) }
                let outcome = runChild(["cancel-race", pattern.rawValue, withLayer ? "with" : "without", "\(seconds)", directory.path])
                let side = withLayer ? "with" : "without"
                if let trap = outcome.trap {
                    sides[withLayer]!.crashed += 1
                    say("run \(run) \(side): crashed \(trap)")
                } else {
                    let cancels = outcome.output.split(separator: " ").first { $0.hasPrefix("cancels=") }.flatMap { Int($0.dropFirst(8)) } ?? 0
                    sides[withLayer]!.cancels += cancels
                    say("run \(run) \(side): \(outcome.output.trimmingCharacters(in: .whitespacesAndNewlines))")
                }
            }
        }
        for withLayer in [false, true] {
            let (crashed, cancels) = sides[withLayer]!
            say("\(pattern.rawValue) \(withLayer ? "with" : "without") the layer: crashed \(crashed) of \(runs) runs of \(Int(seconds)) s, "
                + "\(cancels) cancels in the runs that ended")
        }
        exit(0)
    }

    /// Runs this executable with `arguments` to its end: its output, and the trap's message when
    /// it died of a signal.
    private static func runChild(_ arguments: [String]) -> (output: String, trap: String?) {
        let process = Process()
        guard let executable = Bundle.main.executableURL else { fail("where is this executable?") }
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do { try process.run() } catch { fail("could not start \(arguments): \(error)") }
        let errorText = AppProtocols.Record(Data())
        let errorsRead = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let data = errors.fileHandleForReading.readDataToEndOfFile()
            errorText.change { $0 = data }
            errorsRead.signal()
        }
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        errorsRead.wait()
        process.waitUntilExit()
        guard process.terminationReason == .uncaughtSignal else { return (out, nil) }
        let text = String(decoding: errorText.read { $0 }, as: UTF8.self)
        let message = text.split(separator: "\n").first { $0.contains("Fatal error") }.map(String.init)
        return (out, message ?? "(signal \(process.terminationStatus)) \(text.prefix(300))")
    }
}

/// A session delegate that is asked about every redirect and follows it, and reports each task's
/// end to the closure registered for it.
private final class RedirectAskingDelegate: NSObject, URLSessionDataDelegate, Sendable {
    let ends = AppProtocols.Record<[Int: @Sendable (Error?) -> Void]>([:])

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(request)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        ends.change { $0.removeValue(forKey: task.taskIdentifier) }?(error)
    }
}
