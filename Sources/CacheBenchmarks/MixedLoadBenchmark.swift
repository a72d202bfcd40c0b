import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// 4b: a busy app — several sessions, 64 requests in flight, half of them for URLs it loaded
/// before (hits through the layer) and half new (misses, which the layer stores), one in sixteen
/// slow at the origin — without and with the layer, over an origin 10 ms and 50 ms away (a fast
/// network and a phone's). Throughput with the layer is held to at least that without it, and the
/// latency of the fast requests is reported for both (and that of the hits alone): hits make a
/// busy app faster, and a fast request never waits behind another session's slow one. The
/// process's processor time per request, for each side, says whether the processor or a wait
/// limits, and the note names the file system the cache is on (`FileSystemKind`), which decides
/// what each stored miss's file costs.
extension BenchmarkSuite {
    /// Sessions of the app, each with its own connections (`httpMaximumConnectionsPerHost` 6).
    static let mixedSessions = 8
    /// Requests in flight at once, spread evenly over the sessions.
    static let mixedInFlight = 64
    /// URLs the app loads again and again (warmed into the layer's cache before the rounds).
    static let mixedHotURLs = 256

    func mixedLoad() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = Data(repeating: 0x4D, count: 4_096)
        origin.handle("/hot") { _ in Self.cacheableResponse(body) }
        origin.handle("/new") { _ in Self.cacheableResponse(body) }
        origin.handle("/slow") { _ in
            var response = Self.cacheableResponse(body)
            response.fault = .stall(0.25)
            return response
        }

        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 256 << 20, directory: directory("mixed"))
        let caching = CachingConfiguration(cache: cache)
        func sessions(layered: Bool) -> [URLSession] {
            (0..<Self.mixedSessions).map { _ in
                let configuration = URLSessionConfiguration.default
                configuration.urlCache = nil
                if layered { CachingURLProtocol.inject(into: configuration, using: caching) }
                return URLSession(configuration: configuration)
            }
        }
        let direct = sessions(layered: false)
        let layered = sessions(layered: true)
        defer { for session in direct + layered { session.invalidateAndCancel() } }
        let hot = (0..<Self.mixedHotURLs).map { origin.url("/hot?item=\($0)") }
        _ = Self.runMixed(layered, urls: hot, inFlight: Self.mixedInFlight)   // warm: every hot URL stored
        cache.waitUntilSettled()

        for roundTrip in [0.010, 0.050] {
            origin.network = SimulatedNetwork(roundTrip: roundTrip)
            try measureMixed(direct: direct, layered: layered, hot: hot, roundTrip: roundTrip,
                             fileSystem: FileSystemKind.describe(directory("mixed"))) { side, round, number in
                origin.url("\(number % 16 == 1 ? "/slow" : "/new")?\(side.rawValue)-\(Int(roundTrip * 1000))-\(round)-\(number)")
            }
        }
    }

    /// Which of the app's sessions a round of the mixed load runs through.
    enum MixedSide: String {
        case direct, layered
    }

    /// The rounds of one network: `newURL(side, round, number)` for the requests that are not hot.
    private func measureMixed(direct: [URLSession], layered: [URLSession], hot: [URL], roundTrip: Double,
                              fileSystem: String, newURL: (MixedSide, Int, Int) -> URL) throws {
        /// Round `round`'s URLs for `side`: even requests hot, odd ones new, one in sixteen slow.
        func urls(_ side: MixedSide, round: Int, count: Int) -> [URL] {
            (0..<count).map { number in
                number.isMultiple(of: 2) ? hot[(number / 2 + round * 37) % hot.count] : newURL(side, round, number)
            }
        }
        let perRound = max(Self.mixedInFlight, scale.throughputRequests / 10)
        var rates: [MixedSide: [Double]] = [:]
        var fast: [MixedSide: [Double]] = [:]
        var hits: [Double] = []
        var processor: [MixedSide: [(user: Double, system: Double)]] = [:]
        for round in 0..<5 {
            // Which side goes first alternates, so a noisy neighbour slows both alike.
            for side in round.isMultiple(of: 2) ? [MixedSide.direct, .layered] : [.layered, .direct] {
                let before = Self.processorSeconds()
                let run = Self.runMixed(side == .direct ? direct : layered, urls: urls(side, round: round, count: perRound),
                                        inFlight: Self.mixedInFlight)
                let after = Self.processorSeconds()
                guard run.failures == 0 else { throw BenchmarkError("mixed load, \(side): \(run.failures) requests failed") }
                rates[side, default: []].append(Double(perRound) / run.seconds)
                fast[side, default: []] += run.fastMilliseconds
                if side == .layered { hits += run.hotMilliseconds }
                processor[side, default: []].append(((after.user - before.user) / Double(perRound) * 1e6,
                                                     (after.system - before.system) / Double(perRound) * 1e6))
            }
        }
        func rate(_ side: MixedSide) -> Double { rates[side]!.sorted()[2] }
        let directRate = rate(.direct), layeredRate = rate(.layered)
        let ratio = layeredRate / directRate
        func percentile(_ values: [Double], _ fraction: Double) -> Double {
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
        }
        /// The process's processor time per request, user and system, each the median over the rounds.
        func perRequest(_ side: MixedSide) -> (user: Double, system: Double) {
            (processor[side]!.map(\.user).sorted()[2], processor[side]!.map(\.system).sorted()[2])
        }
        let with = perRequest(.layered), without = perRequest(.direct)
        let note = String(format: "%.0f req/s vs %.0f req/s without the layer (median of 5 alternating rounds); "
                          + "fast requests p50 %.1f / p90 %.1f ms with, %.1f / %.1f ms without; "
                          + "of them the hits p50 %.1f / p90 %.1f ms with; "
                          + "processor time per request (user + system) %.0f + %.0f µs with, %.0f + %.0f µs without",
                          layeredRate, directRate,
                          percentile(fast[.layered]!, 0.5), percentile(fast[.layered]!, 0.9),
                          percentile(fast[.direct]!, 0.5), percentile(fast[.direct]!, 0.9),
                          percentile(hits, 0.5), percentile(hits, 0.9),
                          with.user, with.system, without.user, without.system) + "; the cache on \(fileSystem)"
        record(BenchmarkResult(name: "mixed load, \(Self.mixedInFlight) in flight over \(Self.mixedSessions) sessions, "
                                   + "\(Int(roundTrip * 1000)) ms away",
                               medianMicroseconds: 1e6 / layeredRate, p99Microseconds: .nan, ratio: ratio,
                               target: "≥ 1.0 × without the layer", met: ratio >= 1.0, note: note))
    }

    /// The processor time this process has used so far, user and system, in seconds: every
    /// thread's, the origin's and the cache's disk worker's included.
    static func processorSeconds() -> (user: Double, system: Double) {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return (seconds(usage.ru_utime), seconds(usage.ru_stime))
    }

    /// Loads `urls` with `inFlight` requests at once, worker `n` on `sessions[n % count]`;
    /// returns the seconds it took, the latencies (ms) of the requests that were not slow and of
    /// those for hot URLs alone, and how many failed or answered something other than a 200 with
    /// a body.
    static func runMixed(_ sessions: [URLSession], urls: [URL], inFlight: Int)
        -> (seconds: Double, fastMilliseconds: [Double], hotMilliseconds: [Double], failures: Int) {
        struct Progress {
            var next = 0
            var fast: [Double] = []
            var hot: [Double] = []
            var failures = 0
        }
        let progress = Locked(Progress())
        let group = DispatchGroup()
        let start = DispatchTime.now().uptimeNanoseconds
        @Sendable func next(_ session: URLSession) {
            let number = progress.withLock { $0.next += 1; return $0.next - 1 }
            guard number < urls.count else { return group.leave() }
            let url = urls[number]
            let began = DispatchTime.now().uptimeNanoseconds
            session.dataTask(with: url) { data, response, error in
                let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6
                let ok = error == nil && (response as? HTTPURLResponse)?.statusCode == 200 && data?.isEmpty == false
                progress.withLock { progress in
                    if !ok { progress.failures += 1 }
                    if url.path != "/slow" { progress.fast.append(milliseconds) }
                    if url.path == "/hot" { progress.hot.append(milliseconds) }
                }
                next(session)
            }.resume()
        }
        for worker in 0..<inFlight {
            group.enter()
            next(sessions[worker % sessions.count])
        }
        group.wait()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return progress.withLock { (seconds, $0.fast, $0.hot, $0.failures) }
    }
}
