import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Which ends of an upstream response the engine takes where the transfer ends — on Linux in the
/// upstream session's callback, on corelibs' queue (`TransferRouter.end`) — instead of on a
/// global queue: only those after which nothing sends a request, reads a file or waits, since
/// there a new task or a wait for corelibs' queue deadlocks. Asked through the listener the
/// engine gave the upstream request (`ExchangeListener.upstreamMayEndInPlace`).
final class InPlaceEndTests: EngineTestCase {
    private let url = URL(string: "https://example.com/feed")!

    private var key: String { CacheKey.make(method: "GET", url: url) }

    @discardableResult
    private func load(headers: [String: String] = [:]) -> RecordingLoadClient {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let client = RecordingLoadClient()
        engine.startLoad(CacheRequest(request, key: key), from: .standard, client: client)
        return client
    }

    /// Stores a response with `headers`, fetched at the clock's time.
    private func storeFetched(_ headers: [String: String]) {
        let number = upstream.sent.count
        let client = load()
        upstream.waitForRequests(number + 1)
        upstream.respond(number, status: 200, headers: headers, body: Data("stored".utf8))
        wait(for: [client.answered], timeout: 10)
    }

    /// What the listener of upstream request `number` says of a whole response to it.
    private func mayEndInPlace(_ number: Int, status: Int, headers: [String: String] = [:], kept: Bool = true) -> Bool {
        let sent = upstream.sent[number]
        let response = HTTPURLResponse(url: sent.request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        let head = ReceivedHead(response: response, route: .direct, requestDate: clock.now, responseDate: clock.now)
        let received = ReceivedResponse(head: head, body: kept ? Data("fresh".utf8) : Data(), transferSeconds: 0.001,
                                        bodyLength: 5, isBodyKept: kept)
        return sent.listener?.upstreamMayEndInPlace(received) ?? false
    }

    func testAFetchedResponseWhoseBodyIsTheAnswerMayEndWhereItsTransferEnds() {
        let client = load()
        upstream.waitForRequests(1)
        XCTAssertTrue(mayEndInPlace(0, status: 200, headers: ["Cache-Control": "max-age=60"]), "stored, and the answer")
        XCTAssertTrue(mayEndInPlace(0, status: 200, headers: ["Cache-Control": "no-store"]), "the answer, not stored")
        XCTAssertTrue(mayEndInPlace(0, status: 404), "an error the origin sent is the answer too")
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("fresh".utf8))
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.summary, "200 fresh")
        XCTAssertEqual(store.entry(key)?.body, Data("fresh".utf8))
    }

    func testAnEndAfterWhichAnotherRequestIsSentDoesNot() {
        load()
        upstream.waitForRequests(1)
        XCTAssertFalse(mayEndInPlace(0, status: 301, headers: ["Location": "https://example.com/moved"]),
                       "a redirect is followed through the cache")
        upstream.respond(0, status: 200, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"], body: Data("stored".utf8))

        clock.advance(by: 120)
        load()
        upstream.waitForRequests(2)
        XCTAssertEqual(upstream.sent[1].method, "HEAD")
        XCTAssertFalse(mayEndInPlace(1, status: 200, headers: ["ETag": "\"v2\""]), "a changed resource is fetched with a GET")
        XCTAssertFalse(mayEndInPlace(1, status: 304, headers: ["ETag": "\"v1\""]), "the answer is the stored body")
    }

    func testAnEndThatReadsTheStoreOrWaitsForItDoesNot() {
        storeFetched(["Cache-Control": "max-age=60"])
        clock.advance(by: 120)
        load()
        upstream.waitForRequests(2)
        XCTAssertEqual(upstream.sent[1].method, "GET", "nothing to revalidate with: fetched again")
        XCTAssertFalse(mayEndInPlace(1, status: 503), "the stale stored response answers an error")
        XCTAssertFalse(mayEndInPlace(1, status: 206, headers: ["Content-Range": "bytes 0-4/10"]),
                       "a part is combined with what is stored")
        XCTAssertFalse(mayEndInPlace(1, status: 200, kept: false), "a body not kept whole: loads that joined fetch again")
        XCTAssertTrue(mayEndInPlace(1, status: 200, headers: ["Cache-Control": "max-age=60"]))
        store.isBacklogged.withLock { $0 = true }
        XCTAssertFalse(mayEndInPlace(1, status: 200, headers: ["Cache-Control": "max-age=60"]),
                       "storing would wait for the disk")
    }

    #if canImport(FoundationNetworking)
    /// The disk tier may fall behind between the question and the store (another thread stores
    /// meanwhile): a store made in the upstream callback, on corelibs' queue, is told not to wait
    /// for it; one made elsewhere waits as every store does.
    func testAStoreMadeWhereTheTransferEndsNeverWaitsForTheDisk() {
        let inPlace = load()
        upstream.waitForRequests(1)
        UpstreamCallback.run {
            upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("fresh".utf8))
        }
        wait(for: [inPlace.answered], timeout: 10)
        XCTAssertEqual(store.waitsIfBehind.withLock { $0 }, [false], "stored on corelibs' queue")

        clock.advance(by: 120)
        let offTheQueue = load()
        upstream.waitForRequests(2)
        upstream.respond(1, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("newer".utf8))
        wait(for: [offTheQueue.answered], timeout: 10)
        XCTAssertEqual(store.waitsIfBehind.withLock { $0 }, [false, true])
        XCTAssertEqual(store.entry(key)?.body, Data("newer".utf8))
    }
    #endif
}

/// With an observer, no end is taken in place: the observer is the app's code, called before
/// the answer, and may wait for a session.
final class InPlaceEndWithObserverTests: EngineTestCase {
    override func configure(_ configuration: inout CachingConfiguration) {
        configuration.observer = { _ in }
    }

    func testNoEndIsTakenWhereTheTransferEnds() {
        let url = URL(string: "https://example.com/feed")!
        let client = RecordingLoadClient()
        engine.startLoad(CacheRequest(URLRequest(url: url), key: CacheKey.make(method: "GET", url: url)), from: .standard,
                         client: client)
        upstream.waitForRequests(1)
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=60"])!
        let head = ReceivedHead(response: response, route: .direct, requestDate: clock.now, responseDate: clock.now)
        let received = ReceivedResponse(head: head, body: Data("fresh".utf8), transferSeconds: 0.001)
        XCTAssertEqual(upstream.sent[0].listener?.upstreamMayEndInPlace(received), false)
        upstream.respond(0, status: 200, headers: ["Cache-Control": "max-age=60"], body: Data("fresh".utf8))
        wait(for: [client.answered], timeout: 10)
        XCTAssertEqual(client.summary, "200 fresh")
    }
}
