import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// `CachingConfiguration.prefetch`: the cache filled ahead of time through the same engine as
/// the app's loads.
final class PrefetchTests: CachingTestCase {
    private func serveItems(_ count: Int) {
        for number in 0..<count {
            origin.handle("/item/\(number)") { _ in
                .text("item \(number)", headers: [HTTPField("Cache-Control", "max-age=600")])
            }
        }
    }

    private func urls(_ range: Range<Int>) -> [URL] { range.map { origin.url("/item/\($0)") } }

    func testPrefetchFetchesWhatIsNotFreshAndTheAppsLoadsThenMakeNoRequest() async throws {
        serveItems(20)
        for number in 0..<5 { _ = try await get("/item/\(number)") }   // five already fresh
        origin.resetLog()

        let summary = await configuration.prefetch(urls(0..<20))
        XCTAssertEqual(summary, PrefetchSummary(fetched: 15, alreadyFresh: 5))
        XCTAssertEqual(origin.requests.count, 15, "only what was not fresh")
        XCTAssertEqual(Set(origin.requests.map(\.path)), Set((5..<20).map { "/item/\($0)" }))

        origin.resetLog()
        for number in 0..<20 {
            let (data, _) = try await get("/item/\(number)")
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "item \(number)")
        }
        XCTAssertEqual(origin.requests.count, 0, "the app's loads were all answered from the cache")
    }

    func testAStaleEntryIsRevalidatedAndRulesAndLimitsApply() async throws {
        let resource = OriginResource(body: Data("v1".utf8), etag: "\"v1\"", lastModified: .none,
                                      headers: [HTTPField("Cache-Control", "max-age=60")])
        origin.serve("/stale", resource)
        origin.handle("/skipped") { _ in .text("x", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/huge") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: Data(count: 2 << 20))
        }
        origin.handle("/missing") { _ in .text("no", status: 404) }
        installSession(makeConfiguration().with { $0.rules = [.bypass(pathPrefix: "/skipped")] })
        _ = try await get("/stale")
        clock.advance(by: 120)
        cache.maximumEntrySize = 1 << 20
        origin.resetLog()

        let summary = await configuration.prefetch([origin.url("/stale"), origin.url("/skipped"), origin.url("/huge"),
                                                    origin.url("/missing")])
        XCTAssertEqual(summary, PrefetchSummary(fetched: 2, bypassed: 1, failed: 1))
        XCTAssertEqual(origin.requests.map { "\($0.method) \($0.path)" }.sorted(),
                       ["GET /huge", "GET /missing", "HEAD /stale"], "revalidated with a HEAD; the bypassed URL never sent")
        XCTAssertNil(cache.cachedResponse(for: URLRequest(url: origin.url("/huge"))), "larger than maximumEntrySize: not stored")
        origin.resetLog()
        _ = try await get("/stale")
        XCTAssertEqual(origin.requests.count, 0, "the revalidated entry is fresh again")
    }

    func testPrefetchAndRedirectsUseTheKeyRules() async throws {
        // Given a key rule that ignores a CDN's signature, and a short link to a signed image
        origin.handle("/img") { _ in .text("pixels", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/short") { _ in OriginResponse(status: 301, headers: [HTTPField("Location", "/img?sig=2")]) }
        installSession(makeConfiguration().with { $0.rules = [.ignoringQueryItems(["sig"])] })
        // When the image is prefetched with one signature
        let summary = await configuration.prefetch([origin.url("/img?sig=1")])
        XCTAssertEqual(summary, PrefetchSummary(fetched: 1))
        // Then the app's load with another signature, and the redirect to a third, are hits
        let (direct, _) = try await get("/img?sig=3")
        let (redirected, _) = try await get("/short")
        XCTAssertEqual([direct, redirected].map { String(decoding: $0, as: UTF8.self) }, ["pixels", "pixels"])
        XCTAssertEqual(origin.requests.map(\.target), ["/img?sig=1", "/short"], "one image request, with the real URL")
    }

    func testAPrefetchAndAnAppLoadOfTheSameURLShareOneRequest() async throws {
        let arrived = expectation(description: "the request reached the origin")
        let release = DispatchSemaphore(value: 0)
        origin.handle("/shared") { _ in
            arrived.fulfill()
            _ = release.wait(timeout: .now() + 30)
            return .text("shared", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        let url = origin.url("/shared")
        let configuration: CachingConfiguration = self.configuration
        let session: URLSession = self.session
        let prefetch = Task { await configuration.prefetch([url]) }
        await fulfillment(of: [arrived], timeout: 10)
        let appLoad = Task { try? await session.data(from: url).0 }
        // The origin holds its answer until the app's load has joined the prefetch's exchange.
        let engine = Installation.engine(for: configuration)
        let key = CacheKey.make(method: "GET", url: url)
        await waitUntil("the app's load joined") { engine.exchanges.waitingLoads(forKey: key) == 2 }
        release.signal()
        let data = await value(of: appLoad, within: 20, "the app's load ended") ?? nil
        XCTAssertEqual(data.map { String(decoding: $0, as: UTF8.self) }, "shared")
        let summary = await value(of: prefetch, within: 20, "the prefetch ended")
        XCTAssertEqual(summary?.fetched, 1)
        XCTAssertEqual(origin.requests(to: "/shared").count, 1, "one request for both")
        XCTAssertEqual(configuration.statistics.collapsed, 1)
    }

    func testCancellingThePrefetchingTaskSendsNothingMoreAndCancelsWhatRuns() async throws {
        let arrivals = Locked(0)
        let twoArrived = expectation(description: "two requests reached the origin")
        for number in 0..<10 {
            origin.handle("/slow/\(number)") { _ in
                if arrivals.withLock({ $0 += 1; return $0 }) == 2 { twoArrived.fulfill() }
                return OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")],
                                      body: Data("late".utf8), fault: .stall(30))
            }
        }
        let urls = (0..<10).map { origin.url("/slow/\($0)") }
        let started = Date()
        let configuration: CachingConfiguration = self.configuration
        let prefetch = Task { await configuration.prefetch(urls, maximumConcurrent: 2) }
        await fulfillment(of: [twoArrived], timeout: 10)
        prefetch.cancel()
        let summary = await value(of: prefetch, within: 20, "the cancelled prefetch ended")
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "the running requests were cancelled, not waited for")
        XCTAssertEqual(summary, PrefetchSummary(failed: 10))
        XCTAssertEqual(origin.requests.count, 2, "nothing was sent after the cancellation")
        for url in urls { XCTAssertNil(cache.cachedResponse(for: URLRequest(url: url))) }
    }
}

private extension CachingConfiguration {
    /// A copy changed by `change` (a new installation, as any changed copy is).
    func with(_ change: (inout CachingConfiguration) -> Void) -> CachingConfiguration {
        var copy = self
        change(&copy)
        return copy
    }
}
