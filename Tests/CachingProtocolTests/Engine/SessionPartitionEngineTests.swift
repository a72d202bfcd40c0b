import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Loads no app session makes — a prefetch, cached-then-fresh, the `URLCache` API — read and fill
/// what the session they are for reads, and a refreshed token keeps its session's judge, upstream
/// session and partition: at the engine seam, with Apple's rule for a session whose delegate was
/// not named (`DelegateTraits.unnamed(in:raisesServerTrust: true)`: a judge of its own), which
/// Linux's loader never applies. The `User-Agent` and `Accept-Language` stand-ins Apple's loader
/// adds are applied by the same `SessionSettings.partitioned` call (they are empty on Linux).
final class SessionPartitionEngineTests: EngineTestCase {
    private let url = URL(string: "http://example.com/feed")!
    private var key: String { CacheKey.make(method: "GET", url: url) }

    /// A session configuration injected the README's way on Apple: its delegate not named.
    private func unnamed(_ configuration: URLSessionConfiguration = .default) -> SessionSettings {
        SessionSettings(configuration, delegate: .unnamed(in: configuration, raisesServerTrust: true))
    }

    private func signed(_ token: String) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer \(token)"]
        return configuration
    }

    /// Whether a load of `url` from `settings` is a hit now (answered on the calling thread).
    private func isHit(from settings: SessionSettings, _ request: URLRequest? = nil) -> Bool {
        let request = settings.apply(to: request ?? URLRequest(url: url))
        if case .answered = engine.lookUp(CacheRequest(request, key: key), from: settings) { return true }
        return false
    }

    /// A prefetch for a session whose delegate was not named (and so is its own trust judge on
    /// Apple) stores what that session's loads then find: a hit for it, and still a miss for
    /// `URLSession.shared`'s settings. Before, the prefetch stored outside the judge's partition:
    /// the session's next load missed.
    func testAPrefetchForASessionWhoseDelegateWasNotNamedFillsWhatThatSessionReads() async {
        let session = unnamed(signed("alice"))
        XCTAssertTrue(session.judgesServerTrust)
        let (engine, url) = (self.engine!, self.url)
        let prefetching = Task { await engine.prefetch([url], from: session, maximumConcurrent: 1) }
        guard upstream.waitForRequests(1) else { return XCTFail("nothing sent") }
        XCTAssertEqual(upstream.sent[0].header("Authorization"), "Bearer alice", "sent as the session sends it")
        XCTAssertEqual(upstream.sent[0].settings, session, "through the session's upstream session")
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=600"], body: Data("prefetched".utf8))
        let summary = await prefetching.value
        XCTAssertEqual(summary.fetched, 1)
        XCTAssertTrue(isHit(from: session), "the session's load finds the prefetched answer")
        XCTAssertFalse(isHit(from: unnamed(signed("bob"))), "another user of such a session does not")
        XCTAssertFalse(isHit(from: .standard), "URLSession.shared's settings do not: another judge, no user")
    }

    /// The `URLCache` API of an installation last injected into such a session reads and stores
    /// as that session: an answer stored through it is the session's hit, and an answer the
    /// session stored is what `cachedResponse(for:)` returns for a plain `URLRequest`.
    func testTheURLCacheAPIReadsAndStoresAsTheSessionItIsFor() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("partition-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 0, directory: directory)
        let configuration = CachingConfiguration(cache: cache, now: clock.read)
        let installed = Installation.engine(for: configuration)
        defer { CachingURLProtocol.unregister() }
        let session = unnamed(signed("alice"))
        _ = SessionClasses.protocolClass(for: session, engine: installed)

        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=600"])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data("stored by the app".utf8)), for: URLRequest(url: url))
        let request = CacheRequest(session.apply(to: URLRequest(url: url)), key: key)
        guard case .answered(let answer) = installed.lookUp(request, from: session), case .response(_, let body) = answer else {
            return XCTFail("the session's load did not find what the URLCache API stored for it")
        }
        XCTAssertEqual(body, Data("stored by the app".utf8))
        XCTAssertEqual(cache.cachedResponse(for: URLRequest(url: url))?.data, Data("stored by the app".utf8))
        guard case .goesOn = installed.lookUp(CacheRequest(URLRequest(url: url), key: key), from: .standard) else {
            return XCTFail("URLSession.shared's settings found the session's answer")
        }
    }

    /// `cachedThenFresh` for such a session yields what that session stored first.
    func testCachedThenFreshForASessionWhoseDelegateWasNotNamedReadsItsAnswers() async throws {
        let session = unnamed(signed("alice"))
        let first = RecordingLoadClient()
        guard engine.startLoad(CacheRequest(session.apply(to: URLRequest(url: url)), key: key), from: session, client: first) != nil else {
            return XCTFail("a miss first")
        }
        guard upstream.waitForRequests(1) else { return XCTFail("nothing sent") }
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60", "ETag": "\"v1\""], body: Data("stored".utf8))
        await fulfillment(of: [first.answered], timeout: 10)
        let stream = engine.cachedThenFresh(URLRequest(url: url), from: session)
        let answers = Task {
            var answers: [String] = []
            for try await answer in stream { answers.append("\(answer.source) \(String(decoding: answer.data, as: UTF8.self))") }
            return answers
        }
        guard upstream.waitForRequests(2) else { return XCTFail("no revalidation") }
        XCTAssertEqual(upstream.sent[1].header("If-None-Match"), "\"v1\"", "revalidating the session's own answer")
        upstream.respond(1, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        let yielded = try await answers.value
        XCTAssertEqual(yielded, ["cache(isStale: false) stored"])
    }

    /// A session made again for each refreshed token (the token in `httpAdditionalHeaders`),
    /// its delegate not named: one judge, so one upstream session (`upstreamKey`) and one
    /// partition. Before, each token value was a judge of its own.
    func testARefreshedTokenKeepsTheJudgeAndTheUpstreamSession() {
        let first = unnamed(signed("alice.1"))
        let refreshed = unnamed(signed("alice.2"))
        XCTAssertEqual(first.delegate.trustJudge, refreshed.delegate.trustJudge)
        XCTAssertEqual(first.upstreamKey, refreshed.upstreamKey, "one upstream session, its connections and TLS sessions")
        XCTAssertNotEqual(first, refreshed, "still two sets of settings: each session's own header field")
        let other = URLSessionConfiguration.default
        other.httpAdditionalHeaders = ["X-Api-Key": "k"]
        XCTAssertNotEqual(first.delegate.trustJudge, unnamed(other).delegate.trustJudge, "other header fields: other settings")
    }

    /// With an identity that names the token's user, the refreshed session's load is a hit on
    /// the first session's answer, sent through the same upstream session; another user's is not.
    func testWithAnIdentityARefreshedTokensLoadIsAHitUnderTheSameJudge() async {
        configuration(identity: .custom { request in
            request.value(forHTTPHeaderField: "Authorization").map { String($0.dropFirst(7).prefix { $0 != "." }) }
        })
        let first = unnamed(signed("alice.1"))
        let client = RecordingLoadClient()
        guard engine.startLoad(CacheRequest(first.apply(to: URLRequest(url: url)), key: key), from: first, client: client) != nil else {
            return XCTFail("a miss first")
        }
        guard upstream.waitForRequests(1) else { return XCTFail("nothing sent") }
        upstream.respond(0, status: 200, headers: ["Cache-Control": "private, max-age=600"], body: Data("alice's".utf8))
        await fulfillment(of: [client.answered], timeout: 10)
        XCTAssertTrue(isHit(from: unnamed(signed("alice.2"))), "the refreshed token's session: a hit")
        XCTAssertFalse(isHit(from: unnamed(signed("bob.1"))), "a user switch: a miss")
        XCTAssertEqual(upstream.sent.count, 1)
    }

    /// Remakes the engine with `identity`.
    private func configuration(identity: CachingUserIdentity) {
        var configuration = engine.configuration
        configuration.userIdentity = identity
        engine = CacheEngine(configuration: configuration, store: store, upstream: upstream)
    }
}
