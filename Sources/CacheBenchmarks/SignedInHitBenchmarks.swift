import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// "users": a memory hit for a signed-in request against the same hit for an anonymous one, in
/// the same run, interleaved: what keeping users apart costs on the hit path (the digest of the
/// request's credentials, or the identity the app configured).
extension BenchmarkSuite {
    func signedInHits() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = Data((0..<1_024).map { UInt8(truncatingIfNeeded: $0 &* 11) })
        origin.handle("/feed") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "private, max-age=86400"),
                                     HTTPField("Content-Type", "application/json")], body: body)
        }
        let url = origin.url("/feed")
        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 64 << 20, directory: directory("users"))
        let plain = cachingSession(cache)
        let named = cachingSession(cache, userIdentity: .cookie(named: "session"))
        defer {
            plain.invalidateAndCancel()
            named.invalidateAndCancel()
        }
        let anonymous = URLRequest(url: url)
        var bearer = URLRequest(url: url)
        bearer.setValue("Bearer eyJhbGciOiJIUzI1NiJ9.\(String(repeating: "x", count: 180)).signature", forHTTPHeaderField: "Authorization")
        var cookie = URLRequest(url: url)
        cookie.setValue("lb=node-7; session=\(String(repeating: "s", count: 40)); theme=dark", forHTTPHeaderField: "Cookie")
        // Each signed side against an anonymous hit on the same session (a session of its own per
        // identity: its class, queue and binding are the same for both of its sides).
        let sides: [(name: String, session: URLSession, request: URLRequest, reference: Int)] = [
            ("anonymous", plain, anonymous, 0), ("bearer token", plain, bearer, 0), ("session cookie", plain, cookie, 0),
            ("anonymous, named identity", named, anonymous, 3), ("session cookie, named identity", named, cookie, 3),
        ]
        for side in sides {
            // Stored, then a hit, before timing.
            guard Self.roundTrip(side.session, side.request) == body, Self.roundTrip(side.session, side.request) == body else {
                throw BenchmarkError("\(side.name): warm-up failed")
            }
        }
        var samples = sides.map { _ in Samples(capacity: scale.latencyIterations) }
        for iteration in 0..<scale.latencyIterations {
            // The sides take turns going first.
            for turn in 0..<sides.count {
                let index = (iteration + turn) % sides.count
                samples[index].time { Self.roundTrip(sides[index].session, sides[index].request) }
            }
        }
        cache.waitUntilSettled()
        for (index, side) in sides.enumerated() {
            guard side.reference != index else {
                record(BenchmarkResult(name: "memory hit 1 KB, \(side.name)", samples: samples[index]))
                continue
            }
            let reference = samples[side.reference].medianMicroseconds
            let ratio = samples[index].medianMicroseconds / reference
            record(BenchmarkResult(name: "memory hit 1 KB, \(side.name)", samples: samples[index], ratio: ratio,
                                   target: "≤ 1.05 × anonymous", met: ratio <= 1.05,
                                   note: String(format: "anonymous on the same session %.1f µs", reference)))
        }
    }

    /// One completion-handler data task for `request`, waited for.
    @discardableResult
    static func roundTrip(_ session: URLSession, _ request: URLRequest) -> Data? {
        let done = DispatchSemaphore(value: 0)
        let received = Locked<Data?>(nil)
        session.dataTask(with: request) { data, _, _ in
            received.withLock { $0 = data }
            done.signal()
        }.resume()
        done.wait()
        return received.withLock { $0 }
    }
}
