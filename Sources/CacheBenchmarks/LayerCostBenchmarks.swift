import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// 3: what the layer costs where it cannot help — misses, huge bodies, revalidations and
/// requests it passes by — each against the same request on a session without the layer,
/// measured in the same run, interleaved (direct, layered, direct, …).
extension BenchmarkSuite {
    func layerCosts() throws {
        try hitVersusMiss()

        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let small = Data(repeating: 0x41, count: 1_600)
        let large = Data((0..<(10 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        origin.handle("/small") { _ in Self.cacheableResponse(small) }
        origin.handle("/large") { _ in Self.cacheableResponse(large) }

        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 1 << 30, directory: directory("costs"))
        let layered = cachingSession(cache)
        let direct = Self.directSession()
        let forwarding = ForwardingFloorURLProtocol.session()
        defer {
            layered.invalidateAndCancel()
            direct.invalidateAndCancel()
            forwarding.invalidateAndCancel()
        }
        let smallIterations = max(2, scale.latencyIterations / 4)

        // Misses: a new URL on every request, so the layer fetches, stores and delivers each.
        // Nothing is set aside: the store's work (encoding, the write-behind) runs while the run
        // goes on and lands on whatever runs at that moment, as in an app.
        func misses(_ origin: String, small smallURL: @escaping (String) -> URL, large largeURL: @escaping (String) -> URL) throws {
            try compare("miss 1.6 KB, \(origin)", iterations: smallIterations, target: 1.10, basis: .floor, cache: cache,
                        direct: { try self.fetch(direct, smallURL("direct=\($0)"), expecting: small) },
                        floor: { try self.fetch(forwarding, smallURL("floor=\($0)"), expecting: small) },
                        layered: { try self.fetch(layered, smallURL("layered=\($0)"), expecting: small) })
            try compare("miss 10 MB, \(origin)", iterations: scale.largeIterations, target: 1.15, basis: .direct, cache: cache,
                        direct: { try self.fetch(direct, largeURL("direct=\($0)"), expecting: large) },
                        floor: { try self.fetch(forwarding, largeURL("floor=\($0)"), expecting: large) },
                        layered: { try self.fetch(layered, largeURL("layered=\($0)"), expecting: large) })
        }
        try misses("in-process origin", small: { origin.url("/small?\($0)") }, large: { origin.url("/large?\($0)") })
        // The same 10 MB miss through a cache whose largest entry is smaller than the body: the
        // layer passes it on and stores nothing, so this row is its work without the store's (no
        // target). Two sides only: with the forwarding floor taking turns, the direct requests
        // take longer (Docs/benchmarks.md, "Why new page-cache pages are slow here").
        let passingCache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 1 << 30, directory: directory("costs-passed"))
        passingCache.maximumEntrySize = 5 << 20
        let passing = cachingSession(passingCache)
        defer { passing.invalidateAndCancel() }
        try compare("miss 10 MB, in-process origin, over the largest entry", iterations: scale.largeIterations, target: nil,
                    cache: passingCache, note: "passed on, not stored (largest entry 5 MB)",
                    direct: { try self.fetch(direct, origin.url("/large?direct-passed=\($0)"), expecting: large) },
                    layered: { try self.fetch(passing, origin.url("/large?layered-passed=\($0)"), expecting: large) })
        guard passingCache.entries().isEmpty else { throw BenchmarkError("a body over the largest entry was stored") }
        // The same 10 MB miss timed until its body is on disk: what waiting for the store costs
        // where the disk is slower than the network (no target: it measures the disk).
        try compare("miss 10 MB, in-process origin, timed until on disk", iterations: scale.largeIterations, target: nil,
                    countsStoring: true, cache: cache,
                    direct: { try self.fetch(direct, origin.url("/large?direct-disk=\($0)"), expecting: large) },
                    layered: { try self.fetch(layered, origin.url("/large?layered-disk=\($0)"), expecting: large) })
        // The same 10 MB miss in fresh processes, as a new user meets it.
        try freshProcessMisses(bytes: 10 << 20, rounds: scale.freshRounds)
        // The same small miss without `Cache-Status`: the app then gets the origin's response
        // object itself, and the layer builds no `HTTPURLResponse` of its own.
        let withoutStatus = cachingSession(cache, addsCacheStatus: false)
        defer { withoutStatus.invalidateAndCancel() }
        try compare("miss 1.6 KB, in-process origin, Cache-Status off", iterations: smallIterations, target: 1.10, basis: .floor,
                    cache: cache,
                    direct: { try self.fetch(direct, origin.url("/small?direct-bare=\($0)"), expecting: small) },
                    floor: { try self.fetch(forwarding, origin.url("/small?floor-bare=\($0)"), expecting: small) },
                    layered: { try self.fetch(withoutStatus, origin.url("/small?layered-bare=\($0)"), expecting: small) })
        if NginxServer.isInstalled, let nginx = try? NginxServer() {
            defer { nginx.stop() }
            try nginx.write(small, to: "small.json")
            try nginx.write(large, to: "large.bin")
            try misses("nginx", small: { nginx.url("/small.json?\($0)") }, large: { nginx.url("/large.bin?\($0)") })
            try hugeBody()
        } else {
            progress("nginx is not available: skipping its misses and the huge body")
        }

        try revalidations(origin: origin, cache: cache, direct: direct, forwarding: forwarding, layered: layered)
        try passThrough(origin: origin, cache: cache, direct: direct, layered: layered)
    }

    // MARK: The pieces

    /// A session without the layer, configured like `cachingSession`'s.
    static func directSession() -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }

    /// One GET that must answer `expected` byte for byte.
    private func fetch(_ session: URLSession, _ url: URL, expecting expected: Data) throws {
        guard roundTrip(session, url) == expected else { throw BenchmarkError("\(url) answered something else") }
    }

    /// One request, waited for; returns its status (0 when it failed).
    @discardableResult
    private func send(_ session: URLSession, _ request: URLRequest) -> Int {
        let done = DispatchSemaphore(value: 0)
        let status = Locked(0)
        session.dataTask(with: request) { _, response, _ in
            status.withLock { $0 = (response as? HTTPURLResponse)?.statusCode ?? 0 }
            done.signal()
        }.resume()
        done.wait()
        return status.withLock { $0 }
    }

    /// What a ratio is taken against.
    enum Basis {
        /// The same request on a session without the layer.
        case direct
        /// The same request through `ForwardingFloorURLProtocol`, a protocol that only forwards:
        /// what any URLProtocol costs on this platform.
        case floor
    }

    /// Times `direct`, `floor` (when given: the same request through `ForwardingFloorURLProtocol`)
    /// and `layered` in turn, `iterations` times each (each round starts with the next side), and
    /// records the layered median over the `basis` one, with the others in the note. Nothing is
    /// set aside: the store's background work lands on whatever runs next, as in an app; with
    /// `countsStoring`, the layered side is timed until what it stored has reached the disk.
    private func compare(_ name: String, iterations: Int, target: Double?, basis: Basis = .direct, countsStoring: Bool = false,
                         cache: CachingURLCache, note: String? = nil,
                         direct: (Int) throws -> Void, floor: ((Int) throws -> Void)? = nil,
                         layered: (Int) throws -> Void) throws {
        progress(name)
        var directSamples = Samples(capacity: iterations)
        var floorSamples = Samples(capacity: iterations)
        var layeredSamples = Samples(capacity: iterations)
        for number in 0..<iterations {
            // The sides take turns going first, so none always runs just after another.
            let sides = floor == nil ? 2 : 3
            for turn in 0..<sides {
                switch (number + turn) % sides {
                case 0: try directSamples.time { try direct(number) }
                case 1 where sides == 3: try floorSamples.time { try floor?(number) }
                default:
                    try layeredSamples.time {
                        try layered(number)
                        if countsStoring { cache.waitUntilSettled() }
                    }
                }
            }
        }
        cache.waitUntilSettled()
        let reference = basis == .floor && floor != nil ? floorSamples : directSamples
        let ratio = layeredSamples.medianMicroseconds / reference.medianMicroseconds
        var notes = [String(format: "direct %.0f µs; the layer = %.2f × direct", directSamples.medianMicroseconds,
                            layeredSamples.medianMicroseconds / directSamples.medianMicroseconds)]
        if floor != nil {
            notes.append(String(format: "forwarding floor %.0f µs = %.2f × direct; the layer = %.2f × that floor",
                                floorSamples.medianMicroseconds, floorSamples.medianMicroseconds / directSamples.medianMicroseconds,
                                layeredSamples.medianMicroseconds / floorSamples.medianMicroseconds))
        }
        if countsStoring { notes.append("timed until stored on disk") }
        if let note { notes.append(note) }
        let basisName = basis == .floor && floor != nil ? "forwarding floor" : "direct"
        record(BenchmarkResult(name: name, samples: layeredSamples, ratio: ratio,
                               target: target.map { String(format: "≤ %.2f × %@", $0, basisName) },
                               met: target.map { ratio <= $0 }, note: notes.joined(separator: "; ")))
    }

    /// One GET of `scale.hugeBytes` from nginx per side, each in a fresh child process (this
    /// program, `bench --huge-side SIDE`), twice per side alternating: time, and the growth of
    /// resident memory from before the request to its peak. In this process the heap keeps what
    /// an earlier side freed, which hides the later side's growth; a child starts clean. The body
    /// is larger than the largest storable entry, so the layer delivers it without storing it.
    private func hugeBody() throws {
        let size = scale.hugeBytes
        progress("GET \(size >> 20) MB, each side in a child process")
        var samples: [String: [HugeSample]] = [:]
        for round in 0..<2 {
            for side in round == 0 ? ["direct", "layered"] : ["layered", "direct"] {
                samples[side, default: []].append(try Self.runHugeChild(side: side, bytes: size))
            }
        }
        func best(_ side: String) -> HugeSample {
            let runs = samples[side] ?? []
            return HugeSample(microseconds: runs.map(\.microseconds).min() ?? .nan,
                              peakGrowth: runs.map(\.peakGrowth).min() ?? 0, stored: runs.contains { $0.stored })
        }
        let direct = best("direct"), layered = best("layered")
        let ratio = layered.microseconds / direct.microseconds
        let extraMegabytes = Double(layered.peakGrowth - direct.peakGrowth) / 1_048_576
        record(BenchmarkResult(
            name: "GET \(size >> 20) MB once, nginx", medianMicroseconds: layered.microseconds, p99Microseconds: .nan,
            ratio: ratio, target: "≤ 1.10 × direct, peak RSS ≤ direct + 16 MB", met: ratio <= 1.10 && extraMegabytes <= 16,
            note: String(format: "direct %.0f ms; peak RSS growth %.0f MB direct, %.0f MB layered (%+.0f MB); best of 2 fresh processes each; stored: %@",
                         direct.microseconds / 1e3, Double(direct.peakGrowth) / 1_048_576, Double(layered.peakGrowth) / 1_048_576,
                         extraMegabytes, layered.stored ? "yes" : "no")))
    }

    /// What one child measured.
    struct HugeSample {
        var microseconds: Double
        var peakGrowth: Int
        var stored: Bool
    }

    /// Runs `bench --huge-side SIDE --bytes N` in a child process and reads its one line.
    private static func runHugeChild(side: String, bytes: Int) throws -> HugeSample {
        guard let demo = demoExecutable else { throw BenchmarkError("no Demo executable to run the \(side) child") }
        let fields = try childWords(demo, ["bench", "--huge-side", side, "--bytes", String(bytes)], count: 3, what: "the \(side) child")
        guard let microseconds = Double(fields[0]), let growth = Int(fields[1]) else {
            throw BenchmarkError("the \(side) child printed \(fields.joined(separator: " "))")
        }
        return HugeSample(microseconds: microseconds, peakGrowth: growth, stored: fields[2] == "stored")
    }

    /// The child's side of `hugeBody`: nginx serves `bytes`, one GET through a session without
    /// the layer (`direct`) or with it (`layered`); prints microseconds, peak growth in bytes and
    /// whether the layer stored the body.
    static func measureHugeGet(side: String, bytes: Int) throws -> String {
        guard NginxServer.isInstalled else { throw BenchmarkError("nginx is not installed") }
        let nginx = try NginxServer()
        defer { nginx.stop() }
        let body = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try nginx.write(body, to: "huge.bin")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocol-huge-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 1 << 30, directory: root)
        let session: URLSession
        if side == "layered" {
            let configuration = URLSessionConfiguration.default
            configuration.urlCache = nil
            CachingURLProtocol.inject(into: configuration, using: CachingConfiguration(cache: cache), delegate: nil)
            session = URLSession(configuration: configuration)
        } else {
            session = directSession()
        }
        defer { session.invalidateAndCancel() }
        let url = nginx.url("/huge.bin")
        let baseline = ResidentMemory.currentBytes ?? 0
        ResidentMemory.resetPeak()
        let start = DispatchTime.now().uptimeNanoseconds
        let received = roundTrip(session, url)
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3
        let growth = max(0, (ResidentMemory.peakBytes ?? 0) - baseline)
        guard received == body else { throw BenchmarkError("the \(bytes >> 20) MB body arrived changed") }
        cache.waitUntilSettled()
        let stored = cache.cachedResponse(for: URLRequest(url: url)) != nil
        return String(format: "%.0f %d %@", elapsed, growth, stored ? "stored" : "not-stored")
    }

    /// A revalidation answered 304 against a direct conditional GET (and that conditional GET
    /// through the forwarding floor); a changed resource (HEAD, then GET) against one direct GET.
    private func revalidations(origin: LoopbackOrigin, cache: CachingURLCache, direct: URLSession, forwarding: URLSession,
                               layered: URLSession) throws {
        let body = Data(repeating: 0x45, count: 1_600)
        origin.handle("/validated") { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return OriginResponse(status: 304, headers: [HTTPField("ETag", "\"v1\"")], body: Data())
            }
            return OriginResponse(headers: [HTTPField("ETag", "\"v1\""), HTTPField("Cache-Control", "max-age=0")], body: body)
        }
        let version = Locked(0)
        origin.handle("/changing") { _ in
            let current = version.withLock { $0 += 1; return $0 }
            return OriginResponse(headers: [HTTPField("ETag", "\"v\(current)\""), HTTPField("Cache-Control", "max-age=0")], body: body)
        }
        try fetch(layered, origin.url("/validated"), expecting: body)
        try fetch(layered, origin.url("/changing"), expecting: body)
        cache.waitUntilSettled()
        var conditional = URLRequest(url: origin.url("/validated"))
        conditional.setValue("\"v1\"", forHTTPHeaderField: "If-None-Match")
        let iterations = max(2, scale.latencyIterations / 4)
        try compare("revalidated, 304 (HEAD)", iterations: iterations, target: 1.10, cache: cache,
                    note: "against a direct conditional GET answered 304",
                    direct: { _ in guard send(direct, conditional) == 304 else { throw BenchmarkError("no 304") } },
                    // The same conditional GET through a URLProtocol that only forwards it.
                    floor: { _ in guard self.send(forwarding, conditional) == 304 else { throw BenchmarkError("no 304 forwarded") } },
                    layered: { _ in try fetch(layered, origin.url("/validated"), expecting: body) })
        try compare("revalidated, changed (HEAD, then GET)", iterations: iterations, target: nil, cache: cache,
                    note: "against one direct GET",
                    direct: { _ in try fetch(direct, origin.url("/changing"), expecting: body) },
                    layered: { _ in try fetch(layered, origin.url("/changing"), expecting: body) })
    }

    /// Requests the layer passes by or forwards as they are: POST, PUT, a byte range it cannot
    /// answer, a request marked no-store, a response marked no-store.
    private func passThrough(origin: LoopbackOrigin, cache: CachingURLCache, direct: URLSession, layered: URLSession) throws {
        let body = Data(repeating: 0x46, count: 1_600)
        origin.handle("/submit") { _ in OriginResponse(status: 200, headers: [], body: Data("ok".utf8)) }
        origin.handle("/private") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "no-store")], body: body)
        }
        origin.handle("/ranged") { request in
            guard request.header("Range") == "bytes=0-99" else { return Self.cacheableResponse(body) }
            return OriginResponse(status: 206, headers: [HTTPField("Content-Range", "bytes 0-99/\(body.count)")], body: body.prefix(100))
        }
        let iterations = max(2, scale.latencyIterations / 4)
        for method in ["POST", "PUT"] {
            var request = URLRequest(url: origin.url("/submit"))
            request.httpMethod = method
            request.httpBody = Data("x".utf8)
            try compare("pass-through \(method) 1 byte", iterations: iterations, target: 1.02, cache: cache,
                        direct: { _ in guard send(direct, request) == 200 else { throw BenchmarkError("\(method) failed") } },
                        layered: { _ in guard send(layered, request) == 200 else { throw BenchmarkError("\(method) failed") } })
        }
        // A POST for a URL with something stored goes through the layer (RFC 9111 §4.4: it drops
        // the stored response once the origin accepted it); answered 409 here, so the URL stays
        // stored and every POST takes that path.
        origin.handle("/stored-target") { request in
            request.method == "GET" ? Self.cacheableResponse(body) : OriginResponse(status: 409, body: Data("no".utf8))
        }
        try fetch(layered, origin.url("/stored-target"), expecting: body)
        var refused = URLRequest(url: origin.url("/stored-target"))
        refused.httpMethod = "POST"
        refused.httpBody = Data("x".utf8)
        try compare("POST 1 byte to a stored URL (through the layer)", iterations: iterations, target: nil, cache: cache,
                    note: "answered 409, so nothing is invalidated and the URL stays stored",
                    direct: { _ in guard send(direct, refused) == 409 else { throw BenchmarkError("no 409") } },
                    layered: { _ in guard send(layered, refused) == 409 else { throw BenchmarkError("no 409") } })
        var ranged = URLRequest(url: origin.url("/ranged"))
        ranged.setValue("bytes=0-99", forHTTPHeaderField: "Range")
        try compare("pass-through Range (not stored)", iterations: iterations, target: 1.02, cache: cache,
                    direct: { _ in guard send(direct, ranged) == 206 else { throw BenchmarkError("no 206") } },
                    layered: { _ in guard send(layered, ranged) == 206 else { throw BenchmarkError("no 206") } })
        // A request that says `no-store` itself: `canInit` leaves it to Foundation (a new URL each
        // time, so nothing learned or stored could matter).
        func noStoreRequest(_ url: URL) -> URLRequest {
            var request = URLRequest(url: url)
            request.setValue("no-store", forHTTPHeaderField: "Cache-Control")
            return request
        }
        try compare("pass-through no-store request", iterations: iterations, target: 1.02, cache: cache,
                    direct: { guard send(direct, noStoreRequest(origin.url("/ranged?direct=\($0)"))) == 200 else { throw BenchmarkError("no 200") } },
                    layered: { guard send(layered, noStoreRequest(origin.url("/ranged?layered=\($0)"))) == 200 else { throw BenchmarkError("no 200") } })
        try compare("pass-through no-store response", iterations: iterations, target: 1.02, cache: cache,
                    direct: { try fetch(direct, origin.url("/private?direct=\($0)"), expecting: body) },
                    layered: { try fetch(layered, origin.url("/private?layered=\($0)"), expecting: body) })
        // The same no-store URL again: its first answer taught the layer to leave it to Foundation.
        let again = origin.url("/private?again")
        try fetch(layered, again, expecting: body)
        try compare("no-store URL requested again (left to Foundation)", iterations: iterations, target: 1.02, cache: cache,
                    direct: { _ in try fetch(direct, again, expecting: body) },
                    layered: { _ in try fetch(layered, again, expecting: body) })
    }
}
