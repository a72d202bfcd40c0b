import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An app that reloads (`.reloadIgnoringLocalCacheData`, `.reloadIgnoringLocalAndRemoteCacheData`)
/// or asks for revalidation (`.reloadRevalidatingCacheData`) asked not to get stored data the
/// origin did not give or confirm: when the origin fails it gets what it gets without the layer —
/// the origin's error, or its 5xx — never the stored copy or the cache's `504`. What was stored
/// stays stored for the loads that let the cache decide.
final class ReloadPairTests: CachingTestCase {
    private let old = Data.pattern(1_628, seed: 1)
    /// What the origin answers once the app reloads (nil: the stored response, whole).
    private let failure = Locked<OriginResponse?>(nil)

    /// A completion-handler task (the whole body at its end, nothing streamed): its status and
    /// body, or its error.
    private func load(_ request: URLRequest, in session: URLSession) async -> String {
        await withCheckedContinuation { done in
            session.dataTask(with: request) { [old] data, response, error in
                if let error {
                    return done.resume(returning: "URLError \((error as? URLError)?.code.rawValue ?? 0)")
                }
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                let body = data ?? Data()
                done.resume(returning: "\(status) with \(body == old ? "the stored body" : "\(body.count) other bytes")")
            }.resume()
        }
    }

    func testAReloadWhenTheOriginFailsGetsWhatItGetsWithoutTheLayer() async throws {
        let new = Data.pattern(1_628, seed: 2)
        let unavailable = OriginResponse(status: 503, headers: [HTTPField("Retry-After", "60")], body: Data("busy".utf8))
        let cases: [(String, URLRequest.CachePolicy, [HTTPField], OriginResponse, String)] = [
            ("reload, connection reset mid-body", .reloadIgnoringLocalCacheData, [HTTPField("Cache-Control", "max-age=600")],
             OriginResponse(body: new, fault: .resetAfterBodyBytes(814)), "URLError -1005"),
            ("reload, 503", .reloadIgnoringLocalCacheData, [HTTPField("Cache-Control", "max-age=600")], unavailable, "503 with 4 other bytes"),
            ("reload from the origin, connection reset", .reloadIgnoringLocalAndRemoteCacheData,
             [HTTPField("Cache-Control", "max-age=600")], OriginResponse(body: new, fault: .resetAfterBodyBytes(0)), "URLError -1005"),
            ("reload of a must-revalidate response, connection reset", .reloadIgnoringLocalCacheData,
             [HTTPField("Cache-Control", "max-age=600, must-revalidate")], OriginResponse(body: new, fault: .resetAfterBodyBytes(814)),
             "URLError -1005"),
            ("revalidation, 503", .reloadRevalidatingCacheData, [HTTPField("Cache-Control", "max-age=600"), HTTPField("ETag", "\"v1\"")],
             unavailable, "503 with 4 other bytes"),
        ]
        for (index, (name, cachePolicy, headers, failing, expected)) in cases.enumerated() {
            var caching = makeConfiguration()
            caching.revalidation = .conditionalGet
            let path = "/reload/\(index)"
            let (old, failure) = (self.old, self.failure)
            origin.handle(path) { _ in failure.withLock { $0 } ?? OriginResponse(headers: headers, body: old) }
            let (without, with) = try await TransparencyPair(origin: origin).observe(sessionHasDelegate: false, caching: caching) { session, _ in
                failure.withLock { $0 = nil }
                let first = await load(request(path), in: session)
                failure.withLock { $0 = failing }
                return "first: \(first); reloaded: \(await load(request(path, cachePolicy: cachePolicy), in: session))"
            }
            XCTAssertEqual(without.result, "first: 200 with the stored body; reloaded: \(expected)", "\(name)\n\(without)")
            XCTAssertEqual(with, without, name)
            XCTAssertEqual(with.layerAnswers, 2, name)
            // What was stored stays: a load that lets the cache decide, through a session made as
            // the pair's (its answers are kept under the same partition), is a hit.
            failure.withLock { $0 = nil }
            origin.resetLog()
            let again = URLSessionConfiguration.ephemeral
            again.timeoutIntervalForRequest = 10
            CachingURLProtocol.inject(into: again, using: caching)
            let sameKind = URLSession(configuration: again)
            defer { sameKind.finishTasksAndInvalidate() }
            let (data, _) = try await sameKind.data(for: request(path))
            XCTAssertEqual(data, old, name)
            XCTAssertEqual(origin.requests(to: path).count, 0, "\(name): a hit")
        }
    }

    func testAReloadMadeWhileAnIdenticalOneIsOnItsWayGetsAnAnswerOfItsOwn() async throws {
        // Given an origin that numbers its answers and holds each at a gate
        let gate = Locked(OriginGate())
        let answered = Locked(0)
        origin.handle("/reload-twice") { _ in
            let number = answered.withLock { $0 += 1; return $0 }
            gate.withLock { $0 }.pass()
            return OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: Data("answer \(number)".utf8))
        }
        let (without, with) = try await withoutAndWithTheLayer { session in
            answered.withLock { $0 = 0 }
            let held = OriginGate()
            gate.withLock { $0 = held }
            defer { held.open() }
            // When the app reloads, and reloads again while the first reload's answer is held
            let reloading = request("/reload-twice", cachePolicy: .reloadIgnoringLocalCacheData)
            func reload() -> Task<String, Error> {
                Task {
                    let (data, _) = try await session.data(for: reloading)
                    return String(decoding: data, as: UTF8.self)
                }
            }
            let first = reload()
            XCTAssertTrue(held.waitUntilWaiting(1, timeout: 10), "the first reload reaches the origin")
            let second = reload()
            // (Joined to the first's request, the second would never reach the origin: this gives up after 2 s.)
            let bothArrived = held.waitUntilWaiting(2, timeout: 2)
            held.open()
            return "first: \(try await first.value); second: \(try await second.value); both reached the origin: \(bothArrived)"
        }
        // Then the second gets an answer to a request sent after it was made, as without the layer
        XCTAssertEqual(without, "first: answer 1; second: answer 2; both reached the origin: true")
        XCTAssertEqual(with, without)
    }
}
