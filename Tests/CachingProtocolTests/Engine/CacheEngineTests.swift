import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// The engine on its own: a fake upstream the test answers by hand, a fake store and recording
/// clients, as async-http-client's `RequestBagTests` drive its state machine. No URLSession, no
/// network, no disk; time moves only when the test moves it.
final class CacheEngineTests: EngineTestCase {
    private let url = URL(string: "https://example.com/feed")!

    private var key: String { CacheKey.make(method: "GET", url: url) }

    private func request(_ headers: [String: String] = [:]) -> CacheRequest {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return CacheRequest(request, key: key)
    }

    /// Starts a load the way the protocol does; returns its client and handle (nil handle: answered at once).
    @discardableResult
    private func load(_ request: CacheRequest? = nil, streams: Bool = false) -> (RecordingLoadClient, LoadHandle?) {
        let client = RecordingLoadClient(streams: streams)
        return (client, engine.startLoad(request ?? self.request(), from: .standard, client: client))
    }

    /// Waits until the engine's queue has run everything handed to it so far (loads joining).
    private func settle() {
        CacheEngine.queue.sync(flags: .barrier) {}
    }

    private func wait(_ clients: RecordingLoadClient...) {
        wait(for: clients.map(\.answered), timeout: 10)
    }

    /// Stores a response with `headers` as fetched at the clock's time.
    private func storeFetched(_ headers: [String: String], body: String = "stored") {
        let number = upstream.sent.count
        let (client, _) = load()
        upstream.waitForRequests(number + 1)
        upstream.respond(number, status: 200, headers: headers, body: Data(body.utf8))
        wait(client)
    }

    // MARK: Joining and leaving

    func testIdenticalLoadsJoinOneUpstreamRequestAndAllGetItsAnswer() {
        let (first, _) = load()
        upstream.waitForRequests(1)
        let (second, _) = load()
        let (third, _) = load()
        settle()
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("fresh".utf8))
        wait(first, second, third)
        XCTAssertEqual(upstream.sent.count, 1, "one upstream request for three loads")
        XCTAssertEqual([first.summary, second.summary, third.summary], ["200 fresh", "200 fresh", "200 fresh"])
        XCTAssertEqual(engine.configuration.statistics.fetched, 3)
        XCTAssertEqual(engine.configuration.statistics.collapsed, 2)
        XCTAssertEqual(store.entry(key)?.body, Data("fresh".utf8), "stored once")
    }

    func testTheLastWaiterLeavingCancelsTheUpstreamRequestAndNothingIsStored() {
        let (first, firstHandle) = load()
        upstream.waitForRequests(1)
        settle()
        let (second, secondHandle) = load()
        settle()
        firstHandle?.cancel()
        XCTAssertFalse(upstream.isCancelled(0), "another load still waits")
        secondHandle?.cancel()
        XCTAssertTrue(upstream.isCancelled(0), "nobody waits: the request is cancelled")
        upstream.fail(0, URLError(.cancelled))
        XCTAssertEqual([first.summary, second.summary], ["no answer", "no answer"], "a cancelled load gets nothing")
        XCTAssertNil(store.entry(key))
        // The abandoned exchange is retired: the next load sends its own request.
        let (third, _) = load()
        upstream.waitForRequests(2)
        upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("late".utf8))
        wait(third)
        XCTAssertEqual(third.summary, "200 late")
    }

    /// The upstream client asks the listener just before it starts a transfer
    /// (`UpstreamListener.isWanted`): a load cancelled while its request was being made leaves
    /// nobody wanting it.
    func testAnExchangeEveryLoadLeftIsNoLongerWanted() {
        let (first, firstHandle) = load()
        upstream.waitForRequests(1)
        settle()
        let (second, secondHandle) = load()
        settle()
        let listener = upstream.sent[0].listener
        XCTAssertEqual(listener?.isWanted, true)
        firstHandle?.cancel()
        XCTAssertEqual(listener?.isWanted, true, "another load still waits")
        secondHandle?.cancel()
        XCTAssertEqual(listener?.isWanted, false, "nobody waits")
        upstream.fail(0, URLError(.cancelled))
        XCTAssertEqual([first.summary, second.summary], ["no answer", "no answer"])
    }

    func testALoadCancelledWhileItsRevalidationRunsCancelsIt() {
        storeFetched(["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        clock.advance(by: 120)
        let (client, handle) = load()
        upstream.waitForRequests(2)
        XCTAssertEqual(upstream.sent[1].method, "HEAD")
        settle()
        handle?.cancel()
        XCTAssertTrue(upstream.isCancelled(1))
        upstream.fail(1, URLError(.cancelled))
        XCTAssertEqual(client.summary, "no answer")
        XCTAssertEqual(store.entry(key)?.body, Data("stored".utf8), "the stored response stays")
    }

    /// Apple's rules: the load that started an exchange gets a challenge (forwarded to its app
    /// through the real delivery seam), and stops before its app answered. The challenge is
    /// cancelled with it, and the load that joined does not hang on it nor inherit the
    /// cancellation: it starts again on its own and gets the origin's answer. Before, the
    /// challenge stayed unanswered and the joined load waited for ever.
    func testAJoinedLoadCompletesWhenTheStarterStopsWithAChallengePending() throws {
        let appClient = RecordingClient()
        let owner = URLProtocol(request: URLRequest(url: url), cachedResponse: nil, client: appClient)
        let delivery = ClientDelivery(owner: owner, executor: CallingThreadExecutor(), rules: .init(
            streamsBodies: true, holdsLockAcrossClientCalls: false, forwardsChallenges: true, reportsRedirects: true))
        guard let starter = engine.startLoad(request(), from: .standard, client: DeliveringClient(delivery: delivery)) else {
            return XCTFail("a miss")
        }
        upstream.waitForRequests(1)
        let (joined, _) = load()
        settle()
        XCTAssertEqual(engine.exchanges.waitingLoads(forKey: key), 2, "joined")

        let answered = Locked<[URLSession.AuthChallengeDisposition]>([])
        let challenge = URLAuthenticationChallenge(
            protectionSpace: URLProtectionSpace(host: "example.com", port: 443, protocol: "https", realm: "members",
                                                authenticationMethod: NSURLAuthenticationMethodHTTPBasic),
            proposedCredential: nil, previousFailureCount: 0, failureResponse: nil, error: nil, sender: RecordingClient.NoSender())
        upstream.sent[0].listener?.upstreamDidReceiveChallenge(challenge) { disposition, _ in answered.withLock { $0.append(disposition) } }
        XCTAssertEqual(appClient.calls, ["challenge members"], "forwarded to the starter's app")
        XCTAssertEqual(answered.withLock { $0 }, [], "which has not answered")

        // The app's session stops the starter (`stopLoading`: the delivery, then the load).
        delivery.stop()
        starter.cancel()
        XCTAssertEqual(answered.withLock { $0 }, [.cancelAuthenticationChallenge], "the pending challenge is answered")
        upstream.fail(0, URLError(.cancelled))   // what the upstream session does with a cancelled challenge

        guard upstream.waitForRequests(2) else { return XCTFail("the joined load did not start again: \(joined.summary)") }
        XCTAssertFalse(upstream.isCancelled(1))
        upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("fresh".utf8))
        wait(joined)
        XCTAssertEqual(joined.summary, "200 fresh", "the joined load went on by itself")
        withExtendedLifetime(owner) {}
    }

    // MARK: Revalidation

    func testA304MergesItsFieldsIntoTheStoredResponseAndServesTheStoredBody() {
        storeFetched(["ETag": "\"v1\"", "Cache-Control": "max-age=60", "X-Version": "1"])
        clock.advance(by: 120)
        let (client, _) = load()
        upstream.waitForRequests(2)
        XCTAssertEqual(upstream.sent[1].method, "HEAD")
        XCTAssertEqual(upstream.sent[1].header("If-None-Match"), "\"v1\"")
        upstream.respond(1, status: 304, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=300", "X-Version": "2"])
        wait(client)
        XCTAssertEqual(client.summary, "200 stored", "the stored body, as a 200")
        XCTAssertEqual(client.outcome, .revalidatedNotModified)
        XCTAssertEqual(client.cacheStatus, "CachingProtocol; fwd=stale; fwd-status=304; stored; ttl=300")
        let merged = store.entry(key)
        XCTAssertEqual(merged?.headers["X-Version"], "2", "the 304's fields replace the stored ones")
        XCTAssertEqual(merged?.freshnessLifetime, 300)
        XCTAssertEqual(merged?.responseDate, clock.now, "freshened now")
        XCTAssertEqual(upstream.sent.count, 2, "no GET after a 304")
    }

    func testAChangedResourceFoundByTheHeadIsFetchedWithAGetAndReplacesTheStoredOne() {
        storeFetched(["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        clock.advance(by: 120)
        let (client, _) = load()
        upstream.waitForRequests(2)
        upstream.respond(1, status: 200, headers: ["ETag": "\"v2\"", "Content-Length": "7"])
        upstream.waitForRequests(3)
        XCTAssertEqual(upstream.sent[2].method, "GET")
        XCTAssertNil(upstream.sent[2].header("If-None-Match"), "the body is fetched unconditionally")
        upstream.respond(2, status: 200, headers: ["ETag": "\"v2\"", "Cache-Control": "max-age=60"], body: Data("changed".utf8))
        wait(client)
        XCTAssertEqual(client.summary, "200 changed")
        XCTAssertEqual(client.outcome, .revalidatedChanged)
        XCTAssertEqual(store.entry(key)?.body, Data("changed".utf8))
    }

    // MARK: Fields the loader adds

    /// Apple's rules: the loader adds `Accept-Language` (and `User-Agent`) after the protocol saw
    /// the request, so the origin's `Vary: Accept-Language` answer is matched on the language the
    /// loader sends. After the user changed the app's language, the variant stored for the old
    /// one is not served; a request that sets the field itself is matched on its own value.
    /// Before, the layer matched on a field it never saw, and kept serving the old variant.
    func testVaryIsMatchedOnTheFieldsTheLoaderAddsWhenItSends() {
        func load(language: String, own: String? = nil) -> RecordingLoadClient {
            var request = URLRequest(url: url)
            if let own { request.setValue(own, forHTTPHeaderField: "Accept-Language") }
            let sent = CacheRequest(request, key: key).sent(with: ["accept-language": language, "user-agent": "App/1 CFNetwork/1 Darwin/1"])
            let client = RecordingLoadClient()
            engine.startLoad(sent, from: .standard, client: client)
            return client
        }
        let english = load(language: "en-GB, en;q=0.9")
        upstream.waitForRequests(1)
        XCTAssertNil(upstream.sent[0].header("Accept-Language"), "never sent by the layer: the upstream session adds its own")
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=600", "Vary": "Accept-Language", "Content-Language": "en"],
                         body: Data("hello".utf8))
        wait(english)
        XCTAssertEqual(store.entry(key)?.varyFields, [CacheEntry.VaryField(name: "accept-language", value: "en-gb,en;q=0.9")])
        XCTAssertEqual(load(language: "en-GB, en;q=0.9").summary, "200 hello", "the same language: a hit")

        let french = load(language: "fr-FR, fr;q=0.9")
        guard upstream.waitForRequests(2) else { return XCTFail("another language was answered with \(french.summary)") }
        upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=600", "Vary": "Accept-Language", "Content-Language": "fr"],
                         body: Data("bonjour".utf8))
        wait(french)
        XCTAssertEqual(french.summary, "200 bonjour", "another language: not the English variant")
        XCTAssertEqual(load(language: "de-DE", own: "fr-FR, fr;q=0.9").summary, "200 bonjour", "the request's own field wins")
        XCTAssertEqual(upstream.sent.count, 2)
        XCTAssertEqual(SessionSettings.acceptLanguage(for: ["en-GB", "en", "fr"]), "en-GB, en;q=0.9, fr;q=0.8")
        if LoaderRules.current.addsFieldsAfterProtocols {
            XCTAssertEqual(Set(SessionSettings.fieldsAddedWhenSent.keys), ["accept-language", "user-agent"], "Apple's loader rules")
        } else {
            XCTAssertEqual(SessionSettings.fieldsAddedWhenSent, [:], "corelibs' loader rules: matched as before")
        }
    }

    // MARK: Errors

    func testAStaleAnswerWhenTheOriginCannotBeReached() {
        storeFetched(["ETag": "\"v1\"", "Cache-Control": "max-age=60"])
        clock.advance(by: 120)
        let (client, _) = load()
        upstream.waitForRequests(2)
        upstream.fail(1, URLError(.cannotConnectToHost))
        wait(client)
        XCTAssertEqual(client.summary, "200 stored")
        XCTAssertEqual(client.outcome, .staleAfterError)
        XCTAssertEqual(client.cacheStatus, "CachingProtocol; fwd=stale; ttl=-60; detail=stale-if-error")
        XCTAssertEqual(store.entry(key)?.body, Data("stored".utf8), "kept for the next failure")
    }

    func testAMustRevalidateResponseTheOriginCannotValidateIsA504() {
        storeFetched(["ETag": "\"v1\"", "Cache-Control": "max-age=60, must-revalidate"])
        clock.advance(by: 120)
        let (client, _) = load()
        upstream.waitForRequests(2)
        upstream.fail(1, URLError(.cannotConnectToHost))
        wait(client)
        XCTAssertEqual(client.summary, "504 ")
        XCTAssertEqual(client.outcome, .failed)
        XCTAssertEqual(client.cacheStatus, "CachingProtocol; fwd=stale; detail=origin-unreachable")
    }

    /// A load that took the new response's head and part of its body gets the origin's error
    /// when the body fails, not the stale copy behind that head; a load that joined without
    /// taking the body as it arrives still gets the stale copy, and the stored response stays.
    func testALoadThatTookTheHeadGetsTheOriginsErrorAndAJoinedLoadTheStaleCopy() {
        storeFetched(["Cache-Control": "max-age=60"])
        clock.advance(by: 120)
        let (streaming, _) = load(streams: true)
        upstream.waitForRequests(2)
        let (whole, _) = load()
        settle()
        XCTAssertEqual(engine.exchanges.waitingLoads(forKey: key), 2, "the second load joined the first one's request")
        upstream.sendHead(1, status: 200, headers: ["Cache-Control": "max-age=60", "Content-Length": "10"])
        upstream.sendBody(1, Data("fresh".utf8))
        upstream.fail(1, URLError(.networkConnectionLost))
        wait(streaming, whole)
        XCTAssertEqual(streaming.streamed, ["head 200", "fresh"])
        XCTAssertEqual(streaming.summary, "error \(URLError.Code.networkConnectionLost.rawValue)")
        XCTAssertEqual(streaming.outcome, .failed)
        XCTAssertEqual(whole.streamed, [])
        XCTAssertEqual(whole.summary, "200 stored")
        XCTAssertEqual(whole.outcome, .staleAfterError)
        XCTAssertEqual(store.entry(key)?.body, Data("stored".utf8), "kept for the next failure")
        XCTAssertEqual(upstream.sent.count, 2)
    }

    func testAFailureWithNothingStoredIsTheOriginsError() {
        let (client, _) = load()
        upstream.waitForRequests(1)
        upstream.fail(0, URLError(.timedOut))
        wait(client)
        XCTAssertEqual(client.summary, "error \(URLError.Code.timedOut.rawValue)")
        XCTAssertEqual(client.outcome, .failed)
    }

    // MARK: Hits

    func testAFreshHitIsAnsweredOnTheCallersThreadWithoutTheUpstream() {
        storeFetched(["Cache-Control": "max-age=60"])
        guard case .answered(let answer) = engine.lookUp(request(), from: .standard) else { return XCTFail("a fresh hit answers at once") }
        guard case .response(let response, let body) = answer else { return XCTFail("a response") }
        XCTAssertEqual(body, Data("stored".utf8))
        XCTAssertEqual(response.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Age"), "0")
        XCTAssertEqual(upstream.sent.count, 1, "only the first fetch")
        XCTAssertEqual(engine.configuration.statistics.hits, 1)
    }

    /// A fresh hit's response is built once per second of age and reused (`storedAnswer`): an
    /// answer not stored, which says why in its `Cache-Status`, changes nothing of it.
    func testAFreshHitKeepsReusingItsResponseWhileAnswersNotStoredSayWhy() throws {
        storeFetched(["Cache-Control": "max-age=60"])
        func hit() throws -> HTTPURLResponse {
            guard case .answered(.response(let response, _)) = engine.lookUp(request(), from: .standard) else {
                return try XCTUnwrap(nil as HTTPURLResponse?, "a fresh hit answers at once")
            }
            return response
        }
        let first = try hit()
        let other = URL(string: "https://example.com/secret")!
        let client = RecordingLoadClient()
        guard engine.startLoad(CacheRequest(URLRequest(url: other), key: CacheKey.make(method: "GET", url: other)),
                               from: .standard, client: client) != nil else { return XCTFail("a miss") }
        upstream.waitForRequests(2)
        upstream.respond(1, status: 200, headers: ["Cache-Control": "no-store"], body: Data("secret".utf8))
        wait(client)
        XCTAssertEqual(client.cacheStatus, "CachingProtocol; fwd=uri-miss; fwd-status=200; detail=noStore")
        let second = try hit()
        XCTAssertTrue(first === second, "the same response object, reused")
        XCTAssertEqual(second.value(forHTTPHeaderField: "Cache-Status"), "CachingProtocol; hit")
    }
}

/// A load's client that goes through the delivery seam, as the protocol's own does.
private struct DeliveringClient: LoadClient {
    let delivery: ClientDelivery

    func receive(_ answer: Answer, outcome: CacheEvent.Outcome) {
        delivery.deliver(answer)
    }

    func forward(_ challenge: URLAuthenticationChallenge,
                reply: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        delivery.forward(challenge, reply: reply)
    }

    var forwardsChallenges: Bool { delivery.rules.forwardsChallenges }
}
