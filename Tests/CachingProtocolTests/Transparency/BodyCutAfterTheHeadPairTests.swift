import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An origin that sends a new response's head and part of its body, then fails, while a stored
/// copy could stand in for it (stale-if-error, or the cache's `504` for a `must-revalidate`
/// one): a load that took the head as it arrived — a task with a delegate, the delegate of an
/// `async` call — has seen part of that response, so it fails as it fails without the layer, with
/// the same error, and never ends with the stored copy's body or the `504` behind the new head.
/// What was stored stays stored, whole; nothing of the cut body is stored.
final class BodyCutAfterTheHeadPairTests: CachingTestCase {
    private let old = Data.pattern(1_628, seed: 1)
    private let new = Data.pattern(1_628, seed: 2)
    /// Whether the origin answers with the new version, cut by its fault (set by each run).
    private let cuts = Locked(false)

    private var pair: TransparencyPair { TransparencyPair(origin: origin) }

    /// Serves `path` whole with `headers` and `old`, or, once `cuts` is set, with `newHeaders`
    /// and `new`, acting out `fault`.
    private func serve(_ path: String, headers: [HTTPField], newHeaders: [HTTPField]? = nil, fault: OriginResponse.Fault) {
        let (old, new, cuts) = (self.old, self.new, self.cuts)
        origin.handle(path) { _ in
            cuts.withLock { $0 }
                ? OriginResponse(headers: newHeaders ?? headers, body: new, fault: fault)
                : OriginResponse(headers: headers, body: old)
        }
    }

    /// What `data` is, in terms of the two versions.
    private func describe(_ data: Data) -> String {
        if data == old { return "the old body" }
        if data == new { return "the new body" }
        if data.isEmpty { return "no bytes" }
        if new.starts(with: data) { return "the new body's first \(data.count) bytes" }
        if old.starts(with: data) { return "the old body's first \(data.count) bytes" }
        return "\(data.count) other bytes"
    }

    /// Nothing of the new body is stored; the old response is, whole.
    private func assertTheOldResponseStaysStored(_ path: String, file: StaticString = #filePath, line: UInt = #line) {
        cache.waitUntilSettled()
        XCTAssertEqual(storedBody(path), old, "the old body stays stored, whole", file: file, line: line)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: new.prefix(512)), [], "no byte of the new body on disk",
                       file: file, line: line)
    }

    /// A task of the session's delegate reloads a stored, stale URL (no validator: a plain GET
    /// with the stored copy as its fallback); the connection is reset after half the new body.
    func testADelegateTaskWhoseBodyIsCutAfterItsHeadFailsAsWithoutTheLayer() async throws {
        serve("/doc", headers: [HTTPField("Cache-Control", "max-age=60")], fault: .resetAfterBodyBytes(814))
        let (without, with) = try await pair.observe(caching: configuration) { session, delegate in
            cuts.withLock { $0 = false }
            _ = await runDelegateTask(request("/doc"), in: session, delegate: delegate)
            let first = delegate.received
            clock.advance(by: 61)
            cuts.withLock { $0 = true }
            _ = await runDelegateTask(request("/doc"), in: session, delegate: delegate)
            return "first: \(describe(first)); then: \(describe(delegate.received.dropFirst(first.count)))"
        }
        XCTAssertEqual(without.delegateCalls, ["response 200", "complete ok", "response 200", "complete error -1005"], "\(without)")
        XCTAssertEqual(without.result, "first: the old body; then: the new body's first 814 bytes")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 2)
        assertTheOldResponseStaysStored("/doc")
    }

    /// An `async` call with a delegate (`data(for:delegate:)`) revalidates a stored URL with a
    /// conditional GET; the origin's `200` with a new `ETag` dies after half its body. Without
    /// the fix the call returned the new head with the old body.
    func testAnAsyncCallWhoseBodyIsCutAfterItsHeadThrowsAsWithoutTheLayer() async throws {
        var caching = makeConfiguration()
        caching.revalidation = .conditionalGet
        serve("/doc", headers: [HTTPField("Cache-Control", "max-age=60"), HTTPField("ETag", "\"v1\"")],
              newHeaders: [HTTPField("Cache-Control", "max-age=60"), HTTPField("ETag", "\"v2\"")], fault: .closeAfterBodyBytes(814))
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: caching) { session, callDelegate in
            cuts.withLock { $0 = false }
            let (first, _) = try await session.data(for: request("/doc"), delegate: callDelegate)
            clock.advance(by: 61)
            cuts.withLock { $0 = true }
            do {
                let (data, response) = try await session.data(for: request("/doc"), delegate: callDelegate)
                let etag = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag") ?? "-"
                return "first: \(describe(first)); then \(etag) with \(describe(data))"
            } catch {
                // The call's delegate is called on the session's (serial) delegate queue: one more
                // operation there runs after those calls.
                await withCheckedContinuation { done in session.delegateQueue.addOperation { done.resume() } }
                return "first: \(describe(first)); then URLError \((error as? URLError)?.code.rawValue ?? 0); "
                    + "its delegate got \(describe(callDelegate.received.dropFirst(first.count)))"
            }
        }
        XCTAssertEqual(without.result, "first: the old body; then URLError -1; its delegate got the new body's first 814 bytes",
                       "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 2)
        assertTheOldResponseStaysStored("/doc")
    }

    /// A stored `must-revalidate` response is stale; the origin sends its new head, then closes
    /// before any byte of the body. The cache may not serve the stale copy and would answer with
    /// its `504`; the call took the head already, and without the fix returned that `200` with an
    /// empty body.
    func testAMustRevalidateResponseWhoseBodyIsCutAfterItsHeadThrowsAsWithoutTheLayer() async throws {
        serve("/strict", headers: [HTTPField("Cache-Control", "max-age=60, must-revalidate")], fault: .closeAfterBodyBytes(0))
        let (without, with) = try await pair.observe(sessionHasDelegate: false, caching: configuration) { session, callDelegate in
            cuts.withLock { $0 = false }
            let (first, _) = try await session.data(for: request("/strict"), delegate: callDelegate)
            clock.advance(by: 61)
            cuts.withLock { $0 = true }
            do {
                let (data, response) = try await session.data(for: request("/strict"), delegate: callDelegate)
                return "first: \(describe(first)); then \((response as? HTTPURLResponse)?.statusCode ?? 0) with \(describe(data))"
            } catch {
                await withCheckedContinuation { done in session.delegateQueue.addOperation { done.resume() } }
                return "first: \(describe(first)); then URLError \((error as? URLError)?.code.rawValue ?? 0); "
                    + "its delegate: \(callDelegate.calls)"
            }
        }
        XCTAssertEqual(without.result, "first: the old body; then URLError -1; its delegate: [\"response 200\", \"response 200\"]",
                       "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 2)
        assertTheOldResponseStaysStored("/strict")
    }

    /// With a policy that stores parts, a task of the session's delegate asks for the first half
    /// of a resource; the stored part is stale (no validator: a range GET with the part as its
    /// fallback), and the origin's new `206` is reset after half its body. Without the fix the
    /// task ended without an error with fewer bytes than its `Content-Range` states.
    func testARangeWhoseBodyIsCutAfterItsHeadFailsAsWithoutTheLayer() async throws {
        var caching = makeConfiguration()
        caching.policy = .rfc9111
        let (old, new, cuts) = (self.old, self.new, self.cuts)
        origin.handle("/media") { request in
            let range = "bytes 0-1627/3256"
            guard cuts.withLock({ $0 }) else {
                return OriginResponse(status: 206, headers: [HTTPField("Cache-Control", "max-age=60"), HTTPField("Content-Range", range)],
                                      body: old)
            }
            return OriginResponse(status: 206, headers: [HTTPField("Cache-Control", "max-age=60"), HTTPField("Content-Range", range)],
                                  body: new, fault: .resetAfterBodyBytes(814))
        }
        var firstHalf = request("/media")
        firstHalf.setValue("bytes=0-1627", forHTTPHeaderField: "Range")
        let pair = TransparencyPair(origin: origin, loggedHeaders: ["Range"])
        let (without, with) = try await pair.observe(caching: caching) { session, delegate in
            cuts.withLock { $0 = false }
            _ = await runDelegateTask(firstHalf, in: session, delegate: delegate)
            let first = delegate.received
            clock.advance(by: 61)
            cuts.withLock { $0 = true }
            let response = await runDelegateTask(firstHalf, in: session, delegate: delegate)
            return "first: \(describe(first)); then \(response?.statusCode ?? 0) "
                + "\(response?.value(forHTTPHeaderField: "Content-Range") ?? "-") with \(describe(delegate.received.dropFirst(first.count)))"
        }
        XCTAssertEqual(without.delegateCalls, ["response 206", "complete ok", "response 206", "complete error -1005"], "\(without)")
        XCTAssertEqual(without.result, "first: the old body; then 206 bytes 0-1627/3256 with the new body's first 814 bytes")
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 2)
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.files(in: directory, containing: new.prefix(512)), [], "no byte of the new part on disk")
    }
}
