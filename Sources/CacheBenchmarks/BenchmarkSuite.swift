import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// The benchmarks of `Demo bench`: each measures the cache against a reference in the same run
/// (the floor protocol, a plain file read, an origin fetch, Foundation's URLCache), so ratios
/// hold even on a noisy machine.
final class BenchmarkSuite {
    /// How many iterations each benchmark runs; `quick` keeps a smoke run to a second or two.
    struct Scale {
        var latencyIterations: Int
        var throughputRequests: Int
        var scalingSizes: [Int]
        var openSize: Int
        var streamResponses: Int
        var storageEntries: Int
        var lookups: Int
        /// Requests of 10 MB per side in the miss group.
        var largeIterations: Int
        /// Bytes of the one huge GET in the miss group.
        var hugeBytes: Int
        /// Fresh child processes per side for the fresh-process miss.
        var freshRounds: Int

        static let full = Scale(latencyIterations: 2_000, throughputRequests: 20_000, scalingSizes: [100, 10_000, 100_000],
                                openSize: 100_000, streamResponses: 1_024, storageEntries: 500, lookups: 50_000,
                                largeIterations: 40, hugeBytes: 200 << 20, freshRounds: 21)
        static let quick = Scale(latencyIterations: 20, throughputRequests: 200, scalingSizes: [10, 100],
                                 openSize: 200, streamResponses: 4, storageEntries: 10, lookups: 200,
                                 largeIterations: 2, hugeBytes: 1 << 20, freshRounds: 1)
    }

    let scale: Scale
    let progress: (String) -> Void
    private let workDirectory: URL
    private(set) var results: [BenchmarkResult] = []

    init(scale: Scale, progress: @escaping (String) -> Void) {
        self.scale = scale
        self.progress = progress
        workDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("CachingProtocolBench-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
    }

    /// Runs the groups named in `only` (all when empty) and returns the results.
    func run(only: Set<String>) throws -> [BenchmarkResult] {
        try? FileManager.default.removeItem(at: workDirectory)
        defer {
            CachingURLProtocol.unregister()
            try? FileManager.default.removeItem(at: workDirectory)
        }
        let groups: [(String, () throws -> Void)] = [
            ("latency", memoryAndDiskHits),
            ("miss", layerCosts),
            ("throughput", throughput),
            ("mixed", mixedLoad),
            ("scaling", scaling),
            ("memory", memoryBound),
            ("storage", storageAPI),
            ("users", signedInHits),
        ]
        for (name, group) in groups where only.isEmpty || only.contains(name) {
            progress("running \(name)…")
            try group()
        }
        return results
    }

    // MARK: Shared pieces

    func directory(_ name: String) -> URL {
        workDirectory.appendingPathComponent(name, isDirectory: true)
    }

    /// Installs a configuration with `cache` (and `userIdentity`) and returns a session that uses it.
    func cachingSession(_ cache: CachingURLCache, addsCacheStatus: Bool = true,
                        userIdentity: CachingUserIdentity = .credentials) -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        CachingURLProtocol.inject(into: configuration, using: CachingConfiguration(cache: cache, userIdentity: userIdentity,
                                                                                    addsCacheStatus: addsCacheStatus), delegate: nil)
        return URLSession(configuration: configuration)
    }

    /// One completion-handler data task, waited for.
    @discardableResult
    func roundTrip(_ session: URLSession, _ url: URL) -> Data? {
        Self.roundTrip(session, url)
    }

    @discardableResult
    static func roundTrip(_ session: URLSession, _ url: URL) -> Data? {
        let done = DispatchSemaphore(value: 0)
        let received = Locked<Data?>(nil)
        session.dataTask(with: url) { data, _, _ in
            received.withLock { $0 = data }
            done.signal()
        }.resume()
        done.wait()
        return received.withLock { $0 }
    }

    /// Runs `total` requests over `urls` with `concurrency` requests in flight; returns seconds.
    private func hammer(_ session: URLSession, urls: [URL], concurrency: Int, total: Int) -> Double {
        let issued = Locked(0)
        let group = DispatchGroup()
        let start = DispatchTime.now().uptimeNanoseconds
        @Sendable func next() {
            let number = issued.withLock { $0 += 1; return $0 }
            guard number <= total else { group.leave(); return }
            session.dataTask(with: urls[number % urls.count]) { _, _, _ in next() }.resume()
        }
        for _ in 0..<concurrency {
            group.enter()
            next()
        }
        group.wait()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    static func cacheableResponse(_ body: Data) -> OriginResponse {
        OriginResponse(headers: [HTTPField("Cache-Control", "max-age=86400"), HTTPField("Content-Type", "application/octet-stream")],
                       body: body)
    }

    private func floorAnswer(for url: URL, body: Data) -> (response: HTTPURLResponse, body: Data) {
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=86400", "Content-Type": "application/octet-stream",
                                                      "Content-Length": "\(body.count)"])!
        return (response, body)
    }

    func record(_ result: BenchmarkResult) {
        results.append(result)
    }

    // MARK: 1 and 2: memory and disk hits against the floor

    private func memoryAndDiskHits() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let floor = FloorURLProtocol.session()
        defer { floor.invalidateAndCancel() }

        for size in [1_024, 100 * 1_024] {
            let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let path = "/hit-\(size)"
            origin.handle(path) { _ in Self.cacheableResponse(body) }
            let url = origin.url(path)
            FloorURLProtocol.answers[url] = floorAnswer(for: url, body: body)
            let label = size >= 1_024 * 1_024 ? "\(size >> 20) MB" : "\(size >> 10) KB"

            // Memory hits.
            let memoryCache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 64 << 20, directory: directory("memory-\(size)"))
            let session = cachingSession(memoryCache)
            guard roundTrip(session, url) == body, roundTrip(session, url) == body else { throw BenchmarkError("memory hit warm-up failed") }
            var floorSamples = Samples(capacity: scale.latencyIterations)
            var hitSamples = Samples(capacity: scale.latencyIterations)
            for iteration in 0..<scale.latencyIterations {
                // Which side goes first alternates, so neither always runs just after the other.
                if iteration.isMultiple(of: 2) {
                    floorSamples.time { roundTrip(floor, url) }
                    hitSamples.time { roundTrip(session, url) }
                } else {
                    hitSamples.time { roundTrip(session, url) }
                    floorSamples.time { roundTrip(floor, url) }
                }
            }
            session.invalidateAndCancel()
            let memoryRatio = hitSamples.medianMicroseconds / floorSamples.medianMicroseconds
            record(BenchmarkResult(name: "floor protocol \(label)", samples: floorSamples))
            record(BenchmarkResult(name: "memory hit \(label)", samples: hitSamples, ratio: memoryRatio,
                                   target: "≤ 1.10 × floor", met: memoryRatio <= 1.10))

            // Disk hits: a memory tier of zero bytes, so every hit reads the entry file.
            let diskDirectory = directory("disk-\(size)")
            let diskCache = CachingURLCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: diskDirectory)
            let diskSession = cachingSession(diskCache)
            guard roundTrip(diskSession, url) == body else { throw BenchmarkError("disk warm-up failed") }
            diskCache.waitUntilSettled()
            guard roundTrip(diskSession, url) == body else { throw BenchmarkError("disk hit failed") }
            let entries = diskDirectory.appendingPathComponent("entries")
            guard let entryName = try FileManager.default.contentsOfDirectory(atPath: entries.path).first else {
                throw BenchmarkError("no entry file on disk")
            }
            let entryPath = entries.appendingPathComponent(entryName).path
            var readSamples = Samples(capacity: scale.latencyIterations)
            var diskFloorSamples = Samples(capacity: scale.latencyIterations)
            var diskSamples = Samples(capacity: scale.latencyIterations)
            for iteration in 0..<scale.latencyIterations {
                // The three take turns going first, as the memory hits' two sides do.
                for turn in 0..<3 {
                    switch (iteration + turn) % 3 {
                    case 0:
                        readSamples.time {
                            let handle = FileHandle(forReadingAtPath: entryPath)
                            _ = handle?.readDataToEndOfFile()
                            handle?.closeFile()
                        }
                    case 1: diskFloorSamples.time { roundTrip(floor, url) }
                    default: diskSamples.time { roundTrip(diskSession, url) }
                    }
                }
            }
            diskSession.invalidateAndCancel()
            let budget = 1.5 * diskFloorSamples.medianMicroseconds + readSamples.medianMicroseconds
            record(BenchmarkResult(name: "file read \(label) (FileHandle)", samples: readSamples))
            record(BenchmarkResult(name: "disk hit \(label)", samples: diskSamples,
                                   ratio: diskSamples.medianMicroseconds / (diskFloorSamples.medianMicroseconds + readSamples.medianMicroseconds),
                                   target: "≤ 1.5 × floor + file read",
                                   met: diskSamples.medianMicroseconds <= budget,
                                   note: String(format: "floor %.1f µs + read %.1f µs; budget %.1f µs",
                                                diskFloorSamples.medianMicroseconds, readSamples.medianMicroseconds, budget)))
        }
    }

    // MARK: 3: a hit against an origin fetch

    func hitVersusMiss() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = Data(repeating: 0x41, count: 1_600)
        origin.handle("/page") { _ in Self.cacheableResponse(body) }
        try compareHitAndMiss(label: "in-process origin", url: { origin.url("/page?n=\($0)") })

        guard NginxServer.isInstalled else {
            progress("nginx is not installed: skipping the nginx comparison")
            return
        }
        do {
            let nginx = try NginxServer()
            defer { nginx.stop() }
            try nginx.write(body, to: "page.json")
            try compareHitAndMiss(label: "nginx", url: { nginx.url("/page.json?n=\($0)") })
        } catch {
            progress("nginx could not start (\(error)): skipping the nginx comparison")
        }
    }

    private func compareHitAndMiss(label: String, url: (Int) -> URL) throws {
        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 256 << 20, directory: directory("miss-\(label)"))
        let session = cachingSession(cache)
        defer { session.invalidateAndCancel() }
        var missSamples = Samples(capacity: scale.latencyIterations)
        var hitSamples = Samples(capacity: scale.latencyIterations)
        // Each miss is a new URL (a new query), stored afterwards; each hit repeats the first one.
        guard roundTrip(session, url(0)) != nil else { throw BenchmarkError("\(label) is unreachable") }
        for number in 1...scale.latencyIterations {
            missSamples.time { roundTrip(session, url(number)) }
            hitSamples.time { roundTrip(session, url(0)) }
        }
        cache.waitUntilSettled()
        let ratio = missSamples.medianMicroseconds / hitSamples.medianMicroseconds
        record(BenchmarkResult(name: "miss via \(label) (1.6 KB)", samples: missSamples))
        record(BenchmarkResult(name: "hit vs miss via \(label)", samples: hitSamples, ratio: ratio,
                               note: String(format: "a hit is %.1f× faster than a miss", ratio)))
    }

    // MARK: 4: throughput under concurrency

    private func throughput() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = Data(repeating: 0x42, count: 1_024)
        origin.handle("/hot") { _ in Self.cacheableResponse(body) }
        let urls = (0..<1_000).map { origin.url("/hot?item=\($0)") }
        for url in urls { FloorURLProtocol.answers[url] = floorAnswer(for: url, body: body) }

        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 64 << 20, directory: directory("throughput"))
        let session = cachingSession(cache)
        let floor = FloorURLProtocol.session()
        defer {
            session.invalidateAndCancel()
            floor.invalidateAndCancel()
        }
        _ = hammer(session, urls: urls, concurrency: 8, total: urls.count)   // warm: every URL stored
        cache.waitUntilSettled()
        for concurrency in [1, 8, 64] {
            // Five alternating rounds, so a noisy neighbour slows both sides alike.
            let perRound = max(1, scale.throughputRequests / 5)
            var floorRates: [Double] = []
            var cacheRates: [Double] = []
            for round in 0..<5 {
                // Which side goes first alternates, as in the other groups.
                func floorRound() { floorRates.append(Double(perRound) / hammer(floor, urls: urls, concurrency: concurrency, total: perRound)) }
                func cacheRound() { cacheRates.append(Double(perRound) / hammer(session, urls: urls, concurrency: concurrency, total: perRound)) }
                if round.isMultiple(of: 2) {
                    floorRound()
                    cacheRound()
                } else {
                    cacheRound()
                    floorRound()
                }
            }
            let floorRate = floorRates.sorted()[2]
            let cacheRate = cacheRates.sorted()[2]
            let ratio = cacheRate / floorRate
            record(BenchmarkResult(name: "throughput, \(concurrency) concurrent", medianMicroseconds: 1e6 / cacheRate,
                                   p99Microseconds: .nan, ratio: ratio, target: "≥ 0.9 × floor", met: ratio >= 0.9,
                                   note: String(format: "%.0f req/s vs floor %.0f req/s (median of 5 alternating rounds)", cacheRate, floorRate)))
        }
    }

    // MARK: 5: scaling with the number of entries, and opening a large disk cache

    private func scaling() throws {
        let body = Data(repeating: 0x43, count: 100)
        var lookupMedians: [Double] = []
        var hitMedians: [Double] = []
        for size in scale.scalingSizes {
            let cache = CachingURLCache(memoryCapacity: 512 << 20, diskCapacity: 0, directory: directory("scaling-\(size)"))
            let urls = (0..<size).map { URL(string: "http://127.0.0.1:9/item/\($0)?v=1")! }
            for url in urls {
                let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                               headerFields: ["Cache-Control": "max-age=86400"])!
                cache.storeCachedResponse(CachedURLResponse(response: response, data: body), for: URLRequest(url: url))
            }
            // One untimed pass first: the first lookup of an entry builds the CachedURLResponse it
            // hands out (about 20 µs); later lookups reuse it. The timed lookups are the steady state.
            for url in urls where cache.cachedResponse(for: URLRequest(url: url)) == nil {
                throw BenchmarkError("entry missing at \(size) entries")
            }
            var generator = SystemRandomNumberGenerator()
            var lookups = Samples(capacity: 100)
            let batch = max(1, scale.lookups / 100)
            for _ in 0..<100 {
                let picks = (0..<batch).map { _ in URLRequest(url: urls[Int.random(in: 0..<size, using: &generator)]) }
                let start = DispatchTime.now().uptimeNanoseconds
                for request in picks where cache.cachedResponse(for: request) == nil {
                    throw BenchmarkError("lookup missed at \(size) entries")
                }
                lookups.append((DispatchTime.now().uptimeNanoseconds - start) / UInt64(batch))
            }
            let session = cachingSession(cache)
            // Random entries, each answered once untimed first: the first hit of an entry builds
            // the response it then reuses, and that cost does not depend on the cache's size.
            let picks = (0..<scale.latencyIterations).map { _ in urls[Int.random(in: 0..<size, using: &generator)] }
            for url in Set(picks) where roundTrip(session, url) != body {
                throw BenchmarkError("hit failed at \(size) entries")
            }
            var hits = Samples(capacity: scale.latencyIterations)
            for url in picks.shuffled(using: &generator) {
                try hits.time {
                    guard roundTrip(session, url) == body else { throw BenchmarkError("hit failed at \(size) entries") }
                }
            }
            session.invalidateAndCancel()
            lookupMedians.append(lookups.medianMicroseconds)
            hitMedians.append(hits.medianMicroseconds)
            record(BenchmarkResult(name: "lookup at \(size) entries", samples: lookups,
                                   ratio: lookups.medianMicroseconds / lookupMedians[0], target: "≈ 1 × smallest"))
            record(BenchmarkResult(name: "hit at \(size) entries", samples: hits,
                                   ratio: hits.medianMicroseconds / hitMedians[0], target: "≈ 1 × smallest"))
        }

        // Opening a disk cache that holds `openSize` entries.
        guard scale.openSize > 0 else { return }
        let openDirectory = directory("open")
        do {
            let filler = CachingURLCache(memoryCapacity: 0, diskCapacity: 4 << 30, directory: openDirectory)
            progress("writing \(scale.openSize) entries to disk…")
            for number in 0..<scale.openSize {
                let url = URL(string: "http://127.0.0.1:9/open/\(number)")!
                let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                               headerFields: ["Cache-Control": "max-age=86400"])!
                filler.storeCachedResponse(CachedURLResponse(response: response, data: body), for: URLRequest(url: url))
                if number % 10_000 == 9_999 { filler.waitUntilSettled() }
            }
            filler.waitUntilSettled()
        }
        var opens = Samples(capacity: 5)
        let probe = URLRequest(url: URL(string: "http://127.0.0.1:9/open/\(scale.openSize / 2)")!)
        for _ in 0..<5 {
            try opens.time {
                let cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 4 << 30, directory: openDirectory)
                guard cache.cachedResponse(for: probe)?.data == body else { throw BenchmarkError("reopened cache lost an entry") }
            }
        }
        let openMilliseconds = opens.medianMicroseconds / 1000
        record(BenchmarkResult(name: "open a disk cache of \(scale.openSize) entries + first lookup", samples: opens,
                               target: "< 300 ms", met: openMilliseconds < 300,
                               note: String(format: "%.2f ms (the index loads on the disk worker; this lookup reads the entry file)", openMilliseconds)))
        try launch(directory: openDirectory, probe: probe, body: body)
        try management(directory: openDirectory)
    }

    /// What an app's launch pays, each side in a fresh process (this program,
    /// `bench --launch-side SIDE`), as an app pays it once: Foundation's own first use of
    /// `URLSession.shared`, against the cache's init, `register(_:)` and that first use, with the
    /// `openSize` entries on disk and with an empty directory (target: ≤ 2 ms more than
    /// Foundation alone). The layered child then answers one hit from the disk cache through the
    /// shared session, timed from its launch.
    private func launch(directory: URL, probe: URLRequest, body: Data) throws {
        guard let demo = Self.demoExecutable else {
            return progress("no Demo executable beside \(ProcessInfo.processInfo.arguments[0]): skipping the launch in fresh processes")
        }
        let rounds = scale.openSize >= 10_000 ? 11 : 3
        var foundation = Samples(capacity: rounds), full = Samples(capacity: rounds), empty = Samples(capacity: rounds)
        var firstHits = Samples(capacity: rounds)
        progress("launch in fresh processes, \(rounds) rounds")
        for round in 0..<rounds {
            let sides = ["foundation", "layered", "layered-empty"]
            for side in round % 2 == 0 ? sides : sides.reversed() {
                let launchDirectory = side == "layered-empty" ? self.directory("launch-empty-\(round)") : directory
                let (launch, firstHit) = try Self.runLaunchChild(demo, side: side, directory: launchDirectory, probe: probe.url!)
                switch side {
                case "foundation": foundation.append(UInt64(launch * 1e6))
                case "layered":
                    full.append(UInt64(launch * 1e6))
                    if let firstHit { firstHits.append(UInt64(firstHit * 1e6)) }
                default: empty.append(UInt64(launch * 1e6))
                }
            }
        }
        let extra = (full.medianMicroseconds - foundation.medianMicroseconds) / 1000
        let extraEmpty = (empty.medianMicroseconds - foundation.medianMicroseconds) / 1000
        record(BenchmarkResult(
            name: "launch, fresh process, \(scale.openSize) entries: init + register() + URLSession.shared", samples: full,
            ratio: full.medianMicroseconds / foundation.medianMicroseconds, target: "≤ Foundation + 2 ms", met: extra <= 2,
            note: String(format: "Foundation's own first URLSession.shared %.2f ms; with the cache %.2f ms (+%.2f ms); "
                         + "with an empty directory %.2f ms (+%.2f ms); to the first hit from disk %.1f ms; medians of %d fresh processes each",
                         foundation.medianMicroseconds / 1000, full.medianMicroseconds / 1000, extra,
                         empty.medianMicroseconds / 1000, extraEmpty, firstHits.medianMicroseconds / 1000, rounds)))
    }

    /// Runs `bench --launch-side SIDE --directory D --probe URL` in a child process and reads its
    /// milliseconds: to the end of the launch, and to the first hit (layered sides).
    private static func runLaunchChild(_ demo: URL, side: String, directory: URL, probe: URL) throws -> (Double, Double?) {
        let arguments = ["bench", "--launch-side", side, "--directory", directory.path, "--probe", probe.absoluteString]
        let fields = try childWords(demo, arguments, count: 2, what: "the \(side) launch child").compactMap { Double($0) }
        guard fields.count == 2 else { throw BenchmarkError("the \(side) launch child printed no two numbers") }
        return (fields[0], fields[1] >= 0 ? fields[1] : nil)
    }

    /// Runs the Demo executable `demo` with `arguments` in a child process and returns the
    /// `count` words (split at white space) it printed; throws, naming `what`, when the child
    /// failed or printed another number of words.
    static func childWords(_ demo: URL, _ arguments: [String], count: Int, what: String) throws -> [Substring] {
        let child = Process()
        child.executableURL = demo
        child.arguments = arguments
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        let words = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard child.terminationStatus == 0, words.count == count else {
            throw BenchmarkError("\(what) failed (status \(child.terminationStatus)): \(String(decoding: data, as: UTF8.self))")
        }
        return words
    }

    /// The Demo executable, which runs the benchmarks' child processes (`bench --launch-side`,
    /// `bench --huge-side`): this program when it is the Demo, else the one built beside it (a
    /// test bundle runs the suite in-process); nil when there is none.
    static var demoExecutable: URL? {
        let running = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0])
        if running.lastPathComponent == "Demo" { return running }
        let sibling = running.deletingLastPathComponent().appendingPathComponent("Demo")
        return FileManager.default.isExecutableFile(atPath: sibling.path) ? sibling : nil
    }

    /// The child's side of `launch`: prints milliseconds to the end of the launch and to the
    /// first hit of `probe` through the shared session (-1 for Foundation's side).
    static func measureLaunch(side: String, directory: String, probe: String) throws -> String {
        let start = DispatchTime.now().uptimeNanoseconds
        func milliseconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 }
        guard side != "foundation" else {
            _ = URLSession.shared.configuration
            return String(format: "%.3f -1", milliseconds())
        }
        let cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 4 << 30, directory: URL(fileURLWithPath: directory))
        CachingURLProtocol.register(CachingConfiguration(cache: cache))
        _ = URLSession.shared.configuration
        let launched = milliseconds()
        guard side == "layered", let url = URL(string: probe) else { return String(format: "%.3f -1", launched) }
        guard roundTrip(URLSession.shared, url) != nil else { throw BenchmarkError("the first hit after launch missed") }
        return String(format: "%.3f %.3f", launched, milliseconds())
    }

    /// What a settings screen pays with `openSize` entries on disk: `entries()` (median of five,
    /// after the index has loaded; the note has the index load itself, on the disk worker),
    /// `usageByHost()` and a `purge(pathPrefix:)` that removes a ninth of the entries
    /// (`/open/1…`), once each.
    private func management(directory: URL) throws {
        let openStart = DispatchTime.now().uptimeNanoseconds
        let cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 4 << 30, directory: directory)
        _ = cache.statistics  // waits for the index to load
        let loadMilliseconds = Double(DispatchTime.now().uptimeNanoseconds - openStart) / 1e6
        cache.waitUntilSettled()
        var listings = Samples(capacity: 5)
        for _ in 0..<5 {
            try listings.time {
                guard cache.entries().count == scale.openSize else { throw BenchmarkError("entries() missed entries") }
            }
        }
        record(BenchmarkResult(name: "entries() at \(scale.openSize) entries", samples: listings,
                               note: String(format: "%.0f ms, median of 5 (one value per entry, newest first); the index with "
                                            + "its summaries loaded in %.0f ms on the disk worker", listings.medianMicroseconds / 1000,
                                            loadMilliseconds)))
        let usageStart = DispatchTime.now().uptimeNanoseconds
        let usage = cache.usageByHost()
        let usageMilliseconds = Double(DispatchTime.now().uptimeNanoseconds - usageStart) / 1e6
        let before = usage.values.reduce(0) { $0 + $1.entryCount }
        let purgeStart = DispatchTime.now().uptimeNanoseconds
        cache.purge(pathPrefix: "/open/1")
        let purgeMilliseconds = Double(DispatchTime.now().uptimeNanoseconds - purgeStart) / 1e6
        let after = cache.usageByHost().values.reduce(0) { $0 + $1.entryCount }
        guard before == scale.openSize, after < before else {
            throw BenchmarkError("usage counted \(before) entries of \(scale.openSize), \(after) after the purge")
        }
        record(BenchmarkResult(name: "usageByHost() at \(scale.openSize) entries", medianMicroseconds: usageMilliseconds * 1000,
                               p99Microseconds: .nan, note: String(format: "%.0f ms, once", usageMilliseconds)))
        record(BenchmarkResult(name: "purge(pathPrefix:) of \(before - after) of \(before) entries", medianMicroseconds: purgeMilliseconds * 1000,
                               p99Microseconds: .nan, note: String(format: "%.0f ms, once, until the files are gone", purgeMilliseconds)))
    }

    // MARK: 6: memory stays bounded while a lot of data streams through

    private func memoryBound() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = Data(repeating: 0x44, count: 1 << 20)
        origin.handle("/stream") { _ in Self.cacheableResponse(body) }
        let capacity = 10 << 20
        let cache = CachingURLCache(memoryCapacity: capacity, diskCapacity: 64 << 20, directory: directory("stream"))
        let session = cachingSession(cache)
        defer { session.invalidateAndCancel() }
        guard roundTrip(session, origin.url("/stream?warm")) == body else { throw BenchmarkError("stream warm-up failed") }
        cache.waitUntilSettled()
        ResidentMemory.resetPeak()
        let baseline = ResidentMemory.currentBytes ?? 0
        var samples = Samples(capacity: scale.streamResponses)
        for number in 0..<scale.streamResponses {
            try samples.time {
                guard roundTrip(session, origin.url("/stream?n=\(number)"))?.count == body.count else {
                    throw BenchmarkError("stream response \(number) truncated")
                }
            }
            if number % 128 == 127 { progress("streamed \(number + 1) MB…") }
        }
        cache.waitUntilSettled()
        let peak = ResidentMemory.peakBytes ?? 0
        let growth = max(0, peak - baseline)
        let overhead = growth - min(growth, cache.currentMemoryUsage)
        record(BenchmarkResult(
            name: "stream \(scale.streamResponses) MB through a 10 MB memory tier", samples: samples,
            note: String(format: "peak RSS growth %.1f MB (memory tier %.1f MB of %.1f MB capacity, overhead %.1f MB); baseline RSS %.1f MB",
                         Double(growth) / 1_048_576, Double(cache.currentMemoryUsage) / 1_048_576,
                         Double(capacity) / 1_048_576, Double(overhead) / 1_048_576, Double(baseline) / 1_048_576)))
    }

    // MARK: 7: the storage API against Foundation's URLCache

    private func storageAPI() throws {
        let count = scale.storageEntries
        let entries: [(URLRequest, CachedURLResponse)] = (0..<count).map { number in
            let url = URL(string: "https://example.com/api/items?id=\(number)")!
            let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                           headerFields: ["Cache-Control": "max-age=3600", "Content-Type": "application/json"])!
            let body = Data("{\"id\":\(number),\"payload\":\"\(String(repeating: "x", count: 1_000))\"}".utf8)
            return (URLRequest(url: url), CachedURLResponse(response: response, data: body))
        }

        let foundation = URLCache(memoryCapacity: 64 << 20, diskCapacity: 256 << 20, diskPath: directory("foundation").path)
        let ours = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 256 << 20, directory: directory("ours"))

        func storeRate(_ cache: URLCache) -> (Samples, Double) {
            var samples = Samples(capacity: count)
            let start = DispatchTime.now().uptimeNanoseconds
            for (request, response) in entries {
                samples.time { cache.storeCachedResponse(response, for: request) }
            }
            return (samples, Double(count) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
        }
        let (foundationStores, foundationStoreRate) = storeRate(foundation)
        let (ourStores, ourStoreRate) = storeRate(ours)
        let settleStart = DispatchTime.now().uptimeNanoseconds
        ours.waitUntilSettled()
        let settledRate = Double(count) / (Double(DispatchTime.now().uptimeNanoseconds - settleStart) / 1e9
            + Double(count) / ourStoreRate)
        record(BenchmarkResult(name: "store: Foundation URLCache", samples: foundationStores,
                               note: String(format: "%.0f stores/s", foundationStoreRate)))
        let storeRatio = ourStoreRate / foundationStoreRate
        record(BenchmarkResult(name: "store: CachingURLCache", samples: ourStores, ratio: storeRatio, target: "≥ 100 × Foundation",
                               met: storeRatio >= 100,
                               note: String(format: "%.0f stores/s on the caller's thread; %.0f/s until settled on disk", ourStoreRate, settledRate)))

        func lookupRate(_ cache: URLCache) -> (Samples, Double, Int) {
            var generator = SystemRandomNumberGenerator()
            var samples = Samples(capacity: 100)
            var wrong = 0
            let batch = max(1, scale.lookups / 100)
            var total: UInt64 = 0
            for _ in 0..<100 {
                let picks = (0..<batch).map { _ in Int.random(in: 0..<count, using: &generator) }
                let start = DispatchTime.now().uptimeNanoseconds
                for index in picks where cache.cachedResponse(for: entries[index].0)?.data != entries[index].1.data {
                    wrong += 1
                }
                let elapsed = DispatchTime.now().uptimeNanoseconds - start
                total += elapsed
                samples.append(elapsed / UInt64(batch))
            }
            return (samples, Double(batch * 100) / (Double(total) / 1e9), wrong)
        }
        let (foundationLookups, foundationLookupRate, foundationWrong) = lookupRate(foundation)
        let (ourLookups, ourLookupRate, ourWrong) = lookupRate(ours)
        record(BenchmarkResult(name: "lookup: Foundation URLCache", samples: foundationLookups,
                               note: String(format: "%.0f lookups/s, %d of %d answers wrong or missing (its key ignores the query)",
                                            foundationLookupRate, foundationWrong, scale.lookups)))
        let lookupRatio = ourLookupRate / foundationLookupRate
        record(BenchmarkResult(name: "lookup: CachingURLCache", samples: ourLookups, ratio: lookupRatio, target: "≥ 1 × Foundation",
                               met: lookupRatio >= 1,
                               note: String(format: "%.0f lookups/s, %d wrong or missing", ourLookupRate, ourWrong)))
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

