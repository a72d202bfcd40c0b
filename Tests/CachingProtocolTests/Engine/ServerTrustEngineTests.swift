import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Who judges the origin's certificate, at the engine seam: an upstream that raises a server-trust
/// challenge through the listener the engine gave it (as Apple's loader does during the TLS
/// handshake; swift-corelibs-foundation never does, so this runs only here), loads from a session
/// whose delegate judges trust (`DelegateTraits.trustJudge`) and from one the system's evaluation
/// serves. An answer reaches a judging session only from a connection whose challenge reached
/// one of its loads; nothing is shared or stored across judges.
final class ServerTrustEngineTests: EngineTestCase {
    private let url = URL(string: "https://example.com/feed")!

    /// A session whose delegate pins (implements a challenge method), and one of another type.
    private let pinned = SessionSettings(URLSessionConfiguration.default, delegate: DelegateTraits(trustJudge: "App.PinningDelegate"))
    private let otherJudge = SessionSettings(URLSessionConfiguration.default, delegate: DelegateTraits(trustJudge: "App.OtherDelegate"))

    private var key: String { CacheKey.make(method: "GET", url: url) }

    /// Starts a load from `settings` the way the protocol does; an answer at once (a fresh hit)
    /// is handed to the client here.
    @discardableResult
    private func load(from settings: SessionSettings, client: RecordingLoadClient = RecordingLoadClient()) -> RecordingLoadClient {
        engine.startLoad(CacheRequest(URLRequest(url: url), key: key), from: settings, client: client)
        return client
    }

    private func settle() {
        CacheEngine.queue.sync(flags: .barrier) {}
    }

    private func wait(_ clients: RecordingLoadClient...) {
        wait(for: clients.map(\.answered), timeout: 10)
    }

    /// Fetches and stores `body` for a load from `settings` (a forwarding client that accepts the
    /// server, as a pinning delegate that recognises the certificate does).
    private func storeFetched(from settings: SessionSettings, _ headers: [String: String], body: String) {
        let number = upstream.sent.count
        let client = load(from: settings, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        upstream.waitForRequests(number + 1)
        upstream.respond(number, status: 200, headers: headers, body: Data(body.utf8))
        wait(client)
    }

    // MARK: Revalidations

    func testAStaleWhileRevalidateAnswerOfAPinningSessionWaitsForARevalidationItsDelegateJudges() {
        storeFetched(from: pinned, ["ETag": "\"v1\"", "Cache-Control": "max-age=60, stale-while-revalidate=600"], body: "stored")
        clock.advance(by: 120)
        let client = load(from: pinned, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        upstream.waitForRequests(2)
        XCTAssertEqual(upstream.sent[1].header("If-None-Match"), "\"v1\"", "a revalidation")
        XCTAssertEqual(client.summary, "no answer", "the stale answer waits for it")
        XCTAssertEqual(upstream.challenge(1, method: serverTrustAuthenticationMethod), .useCredential,
                       "the app's delegate judged the certificate, and its answer went upstream")
        XCTAssertEqual(client.challenges, [serverTrustAuthenticationMethod])
        upstream.respond(1, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60, stale-while-revalidate=600"])
        wait(client)
        XCTAssertEqual(client.summary, "200 stored")
        XCTAssertEqual(client.outcome, .revalidatedNotModified)
        XCTAssertEqual(upstream.sent.count, 2)
    }

    func testAStaleWhileRevalidateAnswerOfASessionTheSystemServesComesAtOnceAndRevalidatesInTheBackground() {
        storeFetched(from: .standard, ["ETag": "\"v1\"", "Cache-Control": "max-age=60, stale-while-revalidate=600"], body: "stored")
        clock.advance(by: 120)
        let client = load(from: .standard, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        wait(client)
        XCTAssertEqual(client.summary, "200 stored")
        XCTAssertEqual(client.outcome, .staleHit)
        upstream.waitForRequests(2)
        XCTAssertEqual(upstream.challenge(1, method: serverTrustAuthenticationMethod), .performDefaultHandling,
                       "nobody waits: the system's evaluation, which is this session's judge")
        XCTAssertEqual(client.challenges, [], "the load was answered before")
        upstream.respond(1, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        XCTAssertEqual(engine.exchanges.background.wait(timeout: .now() + 10), .success)
    }

    func testNoBackgroundExchangeStartsForAPinningSession() throws {
        storeFetched(from: pinned, ["ETag": "\"v1\"", "Cache-Control": "max-age=60"], body: "stored")
        let entry = try XCTUnwrap(store.entry(key))
        let conditions = try XCTUnwrap(RevalidationConditions(entry))
        CacheEngine.queue.sync {
            engine.runExchange(.revalidate(entry, conditions), for: pinned.partitioned(CacheRequest(URLRequest(url: url), key: key)),
                            from: pinned, waiting: nil)
            engine.runExchange(.revalidate(entry, conditions), for: CacheRequest(URLRequest(url: url), key: key), from: .standard,
                            waiting: nil)
        }
        upstream.waitForRequests(2)
        settle()
        XCTAssertEqual(upstream.sent.count, 2, "the stored fetch and the system-judged session's revalidation, nothing for the pinning one")
        upstream.respond(1, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        XCTAssertEqual(engine.exchanges.background.wait(timeout: .now() + 10), .success)
    }

    // MARK: Challenges nobody of the app's can judge

    func testAServerTrustChallengeNoLoadOfAPinningSessionCanTakeIsCancelledAndNothingIsStored() {
        // A client that cannot pass challenges to its app (Linux's, or one whose load stopped).
        let client = load(from: pinned, client: RecordingLoadClient(forwardsChallenges: false))
        upstream.waitForRequests(1)
        XCTAssertEqual(upstream.challenge(0, method: serverTrustAuthenticationMethod), .cancelAuthenticationChallenge,
                       "never default handling for a session whose delegate judges trust")
        XCTAssertEqual(upstream.challenge(0, method: NSURLAuthenticationMethodHTTPBasic), .performDefaultHandling,
                       "other challenges are the client's to answer, as before")
        upstream.fail(0, URLError(.cancelled))
        wait(client)
        XCTAssertEqual(client.summary, "error \(URLError.Code.cancelled.rawValue)")
        XCTAssertNil(store.entry(key), "nothing from that connection is kept")
    }

    func testASessionTheSystemServesStillGetsDefaultHandlingWhereItsClientCannotForward() {
        let client = load(from: .standard, client: RecordingLoadClient(forwardsChallenges: false))
        upstream.waitForRequests(1)
        XCTAssertEqual(upstream.challenge(0, method: serverTrustAuthenticationMethod), .performDefaultHandling)
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("fresh".utf8))
        wait(client)
        XCTAssertEqual(client.summary, "200 fresh")
    }

    // MARK: Nothing shared across judges

    func testLoadsJudgedDifferentlyShareNeitherAnUpstreamRequestNorAStoredAnswer() {
        let system = load(from: .standard)
        upstream.waitForRequests(1)
        let pinning = load(from: pinned, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        upstream.waitForRequests(2)
        settle()
        XCTAssertEqual(upstream.sent.count, 2, "identical loads, two judges: two upstream requests")
        XCTAssertEqual(upstream.challenge(1, method: serverTrustAuthenticationMethod), .useCredential)
        XCTAssertEqual(pinning.challenges, [serverTrustAuthenticationMethod], "the pinning session's own load took its challenge")
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("system".utf8))
        upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("pinned".utf8))
        wait(system, pinning)
        XCTAssertEqual([system.summary, pinning.summary], ["200 system", "200 pinned"])

        // Each judge's stored answer is a hit for that judge only.
        XCTAssertEqual(load(from: .standard).summary, "200 system")
        XCTAssertEqual(load(from: pinned).summary, "200 pinned")
        XCTAssertEqual(upstream.sent.count, 2, "both were hits")
        let other = load(from: otherJudge, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        upstream.waitForRequests(3)
        XCTAssertEqual(upstream.challenge(2, method: serverTrustAuthenticationMethod), .useCredential)
        XCTAssertEqual(other.challenges, [serverTrustAuthenticationMethod], "another delegate type judges its own connection")
        upstream.respond(2, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("other".utf8))
        wait(other)
        XCTAssertEqual(other.summary, "200 other")
        XCTAssertEqual(store.peek(key)?.variants.count, 3, "three answers under one URL, one per judge")
    }

    func testSessionsJudgedDifferentlyGetProtocolClassesAndSoUpstreamSessionsOfTheirOwn() {
        XCTAssertNotEqual(pinned, .standard)
        XCTAssertNotEqual(pinned, otherJudge)
        XCTAssertEqual(pinned, SessionSettings(URLSessionConfiguration.default, delegate: DelegateTraits(trustJudge: "App.PinningDelegate")))
        XCTAssertTrue(pinned.judgesServerTrust)
        XCTAssertFalse(SessionSettings.standard.judgesServerTrust)
        // `URLSessionUpstream` and `ExchangeTable` key by the settings; classes by settings too.
        let pinnedClass: AnyClass = SessionClasses.protocolClass(for: pinned, engine: engine)
        XCTAssertTrue(pinnedClass != CachingURLProtocol.self)
        XCTAssertTrue(SessionClasses.protocolClass(for: otherJudge, engine: engine) != pinnedClass)
        XCTAssertTrue(SessionClasses.protocolClass(for: pinned, engine: engine) == pinnedClass)
        XCTAssertTrue(SessionClasses.protocolClass(for: SessionSettings(URLSessionConfiguration.default), engine: engine) != pinnedClass)
    }

    /// The partition's judge is a digest of the judge's name, the same in every launch, and kept
    /// apart from the user (a signed-in pinning session is not an anonymous one).
    func testTheJudgesPartitionIsStableAndKeepsCredentialsApart() {
        let anonymous = CacheRequest(URLRequest(url: url), key: key)
        var signed = URLRequest(url: url)
        signed.setValue("Bearer a", forHTTPHeaderField: "Authorization")
        let signedIn = CacheRequest(signed, key: key)
        XCTAssertEqual(anonymous.partition, .anonymous)
        XCTAssertEqual(anonymous.judged(by: "App.PinningDelegate").partition,
                       anonymous.judged(by: "App.PinningDelegate").partition)
        XCTAssertNil(anonymous.judged(by: "App.PinningDelegate").partition.user, "a judge is no user")
        XCTAssertNotEqual(anonymous.judged(by: "App.PinningDelegate").partition,
                          anonymous.judged(by: "App.OtherDelegate").partition)
        XCTAssertNotEqual(signedIn.judged(by: "App.PinningDelegate").partition,
                          anonymous.judged(by: "App.PinningDelegate").partition)
        XCTAssertEqual(signedIn.judged(by: "App.PinningDelegate").partition.user, signedIn.partition.user)
        XCTAssertFalse(anonymous.judged(by: "App.PinningDelegate").sendsCredentials,
                       "a judge is no credential: answers to anonymous requests are still stored")
        XCTAssertTrue(signedIn.judged(by: "App.PinningDelegate").sendsCredentials)
    }

    // MARK: A delegate the app did not name

    /// A session injected without naming its delegate, where the loader raises server-trust
    /// challenges (Apple): what `inject(into:using:)` records for it. Its delegate pins here.
    private let unnamed = SessionSettings(URLSessionConfiguration.default,
                                          delegate: .unnamed(in: URLSessionConfiguration.default, raisesServerTrust: true))

    /// The README's form — `inject(into: cfg)`, then `URLSession(configuration: cfg, delegate:
    /// pinner)` — with Apple's rules: none of the session's answers comes from a connection its
    /// loads did not judge. It shares no upstream request (nor upstream session, nor so its
    /// connections) with `URLSession.shared`'s loads, finds none of their stored answers, its
    /// own request's server-trust challenge reaches its delegate (which rejects the certificate
    /// here: nothing is stored), a stale answer waits for a revalidation its delegate judges,
    /// and work nobody of it waits for (a background revalidation, a prefetch) has its
    /// challenge cancelled. Before, such a session had the settings of `URLSession.shared`:
    /// it joined the shared session's upstream request and was served its stored answer.
    func testASessionWhosePinningDelegateWasNotNamedGetsNoAnswerFromAConnectionItDidNotJudge() throws {
        XCTAssertTrue(unnamed.judgesServerTrust)
        XCTAssertNotEqual(unnamed, .standard, "a protocol class, an upstream session and exchanges of its own")

        // URLSession.shared fetches the feed; the system's evaluation judges its connection.
        let shared = load(from: .standard)
        upstream.waitForRequests(1)
        let pinning = load(from: unnamed, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .cancelAuthenticationChallenge))
        guard upstream.waitForRequests(2) else { return XCTFail("joined to the shared session's request") }
        settle()
        XCTAssertEqual(upstream.sent.count, 2, "not joined to the shared session's request")
        XCTAssertEqual(upstream.sent[0].settings, .standard)
        XCTAssertEqual(upstream.sent[1].settings, unnamed, "sent through an upstream session of its own")
        XCTAssertEqual(upstream.challenge(0, method: serverTrustAuthenticationMethod), .performDefaultHandling)
        XCTAssertEqual(upstream.challenge(1, method: serverTrustAuthenticationMethod), .cancelAuthenticationChallenge,
                       "its own connection is judged by its delegate, which rejects it")
        XCTAssertEqual(pinning.challenges, [serverTrustAuthenticationMethod])
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60, stale-while-revalidate=600", "ETag": "\"v1\""],
                         body: Data("from a connection the system judged".utf8))
        upstream.fail(1, URLError(.cancelled))
        wait(shared, pinning)
        XCTAssertEqual(pinning.summary, "error \(URLError.Code.cancelled.rawValue)")

        // The shared session's stored answer is a hit for the shared session only.
        XCTAssertEqual(load(from: .standard).summary, "200 from a connection the system judged")
        let again = load(from: unnamed, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        guard upstream.waitForRequests(3) else { return XCTFail("served the shared session's answer: \(again.summary)") }
        XCTAssertEqual(upstream.challenge(2, method: serverTrustAuthenticationMethod), .useCredential)
        XCTAssertEqual(again.challenges, [serverTrustAuthenticationMethod], "judged by its delegate, which accepts it this time")
        upstream.respond(2, status: 200, headers: ["Cache-Control": "max-age=60, stale-while-revalidate=600", "ETag": "\"v1\""],
                         body: Data("pinned".utf8))
        wait(again)
        XCTAssertEqual(again.summary, "200 pinned")

        // Stale: the load waits for a revalidation its delegate judges; nothing runs unwaited for.
        clock.advance(by: 120)
        let stale = load(from: unnamed, client: RecordingLoadClient(forwardsChallenges: true, appAnswer: .useCredential))
        guard upstream.waitForRequests(4) else { return XCTFail("no revalidation: \(stale.summary)") }
        XCTAssertEqual(stale.summary, "no answer", "not answered before its revalidation")
        XCTAssertEqual(upstream.sent[3].settings, unnamed)
        XCTAssertEqual(upstream.challenge(3, method: serverTrustAuthenticationMethod), .useCredential)
        upstream.respond(3, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        wait(stale)
        XCTAssertEqual(stale.summary, "200 pinned")
        let entry = try XCTUnwrap(store.peek(key)?.variants.first { $0.body == Data("pinned".utf8) })
        let conditions = try XCTUnwrap(RevalidationConditions(entry))
        CacheEngine.queue.sync {
            engine.runExchange(.revalidate(entry, conditions), for: unnamed.partitioned(CacheRequest(URLRequest(url: url), key: key)),
                            from: unnamed, waiting: nil)
        }
        settle()
        XCTAssertEqual(upstream.sent.count, 4, "no background exchange for it")
        XCTAssertEqual(store.peek(key)?.variants.count, 2, "one answer per judge: the system's and its delegate's")

        // A load with no app to pass a challenge to (a prefetch's): its certificate is judged by
        // nobody, so the challenge is cancelled, never given default handling.
        let other = URL(string: "https://example.com/other")!
        let prefetch = RecordingLoadClient(forwardsChallenges: false)
        let otherKey = CacheKey.make(method: "GET", url: other)
        guard engine.startLoad(CacheRequest(URLRequest(url: other), key: otherKey), from: unnamed, client: prefetch) != nil else {
            return XCTFail("a miss")
        }
        guard upstream.waitForRequests(5) else { return XCTFail("nothing sent: \(prefetch.summary)") }
        XCTAssertEqual(upstream.challenge(4, method: serverTrustAuthenticationMethod), .cancelAuthenticationChallenge)
        upstream.fail(4, URLError(.cancelled))
        wait(prefetch)
        XCTAssertNil(store.peek(otherKey))
    }

    /// What `inject(into:using:)` records when the delegate is not named: where the loader raises
    /// server-trust challenges, a judge standing for the unknown delegate and the settings — the
    /// same name in every launch and for equal settings, another for other settings; where it
    /// raises none (Linux), nothing changes: the session gets the settings and protocol class of a
    /// session injected with no delegate.
    func testADelegateThatWasNotNamedIsTreatedAsAJudgeWhereTheLoaderRaisesServerTrust() {
        let plain = URLSessionConfiguration.default
        let withHeader = URLSessionConfiguration.default
        withHeader.httpAdditionalHeaders = ["X-Api-Key": "k"]
        let judge = DelegateTraits.unnamed(in: plain, raisesServerTrust: true).trustJudge
        XCTAssertNotNil(judge)
        XCTAssertEqual(judge, DelegateTraits.unnamed(in: URLSessionConfiguration.default, raisesServerTrust: true).trustJudge)
        XCTAssertNotEqual(judge, DelegateTraits.unnamed(in: withHeader, raisesServerTrust: true).trustJudge)
        XCTAssertNotEqual(judge, DelegateTraits.unnamed(in: URLSessionConfiguration.ephemeral, raisesServerTrust: true).trustJudge,
                          "a jar of its own")
        XCTAssertEqual(DelegateTraits.unnamed(in: plain, raisesServerTrust: false), .none)
        XCTAssertEqual(DelegateTraits.unnamed(in: plain).trustJudge != nil, DelegateTraits.platformRaisesServerTrust)

        let injected = URLSessionConfiguration.default
        CachingURLProtocol.inject(into: injected)
        let named = URLSessionConfiguration.default
        CachingURLProtocol.inject(into: named, delegate: nil)
        defer { CachingURLProtocol.unregister() }
        func layer(_ configuration: URLSessionConfiguration) -> ObjectIdentifier? {
            (configuration.protocolClasses?.first { $0 is CachingURLProtocol.Type }).map(ObjectIdentifier.init)
        }
        XCTAssertNotNil(layer(named))
        if DelegateTraits.platformRaisesServerTrust {
            XCTAssertNotEqual(layer(injected), layer(named), "Apple's loader rules: a class of its own")
        } else {
            XCTAssertEqual(layer(injected), layer(named), "corelibs' loader rules: as before, the class of a session with no delegate")
        }
    }

    // MARK: Which delegates judge

    func testADelegateJudgesTrustWhenItImplementsAChallengeMethod() {
        #if canImport(FoundationNetworking)
        XCTAssertEqual(DelegateTraits.of(PinningDelegate()), .none,
                       "Linux: corelibs raises no server-trust challenge, so no delegate judges one")
        #else
        XCTAssertEqual(DelegateTraits.of(PinningDelegate()).trustJudge, String(reflecting: PinningDelegate.self))
        XCTAssertEqual(DelegateTraits.of(TaskLevelDelegate()).trustJudge, String(reflecting: TaskLevelDelegate.self))
        XCTAssertNil(DelegateTraits.of(QuietDelegate()).trustJudge)
        #endif
        XCTAssertEqual(DelegateTraits.of(nil), .none)
    }
}

/// A delegate that pins: it implements the session-level challenge method.
private final class PinningDelegate: NSObject, URLSessionDelegate, Sendable {
    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        completionHandler(.performDefaultHandling, nil)
    }
}

/// A delegate that answers challenges at the task level only (the system's fallback for server trust).
private final class TaskLevelDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        completionHandler(.performDefaultHandling, nil)
    }
}

/// A delegate that answers no challenge.
private final class QuietDelegate: NSObject, URLSessionDataDelegate, Sendable {}
