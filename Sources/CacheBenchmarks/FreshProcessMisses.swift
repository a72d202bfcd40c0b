import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// 3c: one miss as a new user meets it — in a fresh process, where nothing is warm (the
/// session, libcurl, the heap, the cache directory) — timed until the app has the answer and
/// until the entry is on disk (`waitUntilSettled()`), against the same GET without the layer in
/// a fresh process of its own. The sides take turns, one child process per request.
extension BenchmarkSuite {
    /// Runs `rounds` pairs of children (`bench --fresh-side SIDE --bytes N`), the side going
    /// first alternating, and records the layered medians over the direct one.
    func freshProcessMisses(bytes: Int, rounds: Int) throws {
        let label = bytes >= 1 << 20 ? "\(bytes >> 20) MB" : String(format: "%.1f KB", Double(bytes) / 1000)
        progress("miss \(label), each request in a fresh process")
        var direct = Samples(capacity: rounds), answered = Samples(capacity: rounds), settled = Samples(capacity: rounds)
        for round in 0..<rounds {
            for side in round % 2 == 0 ? ["direct", "layered"] : ["layered", "direct"] {
                let sample = try Self.runFreshChild(side: side, bytes: bytes)
                if side == "direct" {
                    direct.append(sample.answer)
                } else {
                    answered.append(sample.answer)
                    settled.append(sample.settled)
                }
            }
        }
        let note = String(format: "direct %.0f µs; %d fresh processes per side", direct.medianMicroseconds, rounds)
        record(BenchmarkResult(name: "miss \(label), fresh process", samples: answered,
                               ratio: answered.medianMicroseconds / direct.medianMicroseconds,
                               target: bytes >= 1 << 20 ? "≤ 1.15 × direct" : nil,
                               met: bytes >= 1 << 20 ? answered.medianMicroseconds / direct.medianMicroseconds <= 1.15 : nil,
                               note: note))
        record(BenchmarkResult(name: "miss \(label), fresh process, until on disk", samples: settled,
                               ratio: settled.medianMicroseconds / direct.medianMicroseconds,
                               target: bytes >= 1 << 20 ? "≤ 1.30 × direct" : nil,
                               met: bytes >= 1 << 20 ? settled.medianMicroseconds / direct.medianMicroseconds <= 1.30 : nil,
                               note: note + "; the miss, then waitUntilSettled()"))
    }

    /// Runs `bench --fresh-side SIDE --bytes N` in a child process: nanoseconds to the answer and
    /// to the settled store.
    private static func runFreshChild(side: String, bytes: Int) throws -> (answer: UInt64, settled: UInt64) {
        guard let demo = demoExecutable else { throw BenchmarkError("no Demo executable to run the \(side) child") }
        let fields = try childWords(demo, ["bench", "--fresh-side", side, "--bytes", String(bytes)], count: 2, what: "the \(side) child")
        guard let answer = UInt64(fields[0]), let settled = UInt64(fields[1]) else {
            throw BenchmarkError("the \(side) child printed \(fields.joined(separator: " "))")
        }
        return (answer, settled)
    }

    /// The child's side of `freshProcessMisses`: an in-process origin serves `bytes` (cacheable
    /// for a day), and one completion-handler GET goes through a session without the layer
    /// (`direct`) or with it (`layered`: a new cache of 64 MB memory and 1 GB disk in a new
    /// directory). Prints the nanoseconds from `resume()` to the completion handler and, for the
    /// layered side, to the end of `waitUntilSettled()` (the direct side prints the answer twice).
    static func measureFreshMiss(side: String, bytes: Int) throws -> String {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        origin.handle("/fresh") { _ in cacheableResponse(body) }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("CachingProtocol-fresh-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let cache = CachingURLCache(memoryCapacity: 64 << 20, diskCapacity: 1 << 30, directory: root)
        let session: URLSession
        if side == "layered" {
            let configuration = URLSessionConfiguration.default
            configuration.urlCache = nil
            CachingURLProtocol.inject(into: configuration, using: CachingConfiguration(cache: cache))
            session = URLSession(configuration: configuration)
        } else {
            session = directSession()
        }
        defer { session.invalidateAndCancel() }
        let url = origin.url("/fresh?\(UUID().uuidString)")
        let start = DispatchTime.now().uptimeNanoseconds
        let received = roundTrip(session, url)
        let answer = DispatchTime.now().uptimeNanoseconds - start
        if side == "layered" { cache.waitUntilSettled() }
        let settled = DispatchTime.now().uptimeNanoseconds - start
        guard received == body else { throw BenchmarkError("the body arrived changed") }
        if side == "layered", cache.cachedResponse(for: URLRequest(url: url)) == nil {
            throw BenchmarkError("the layered side stored nothing")
        }
        return "\(answer) \(settled)"
    }
}
