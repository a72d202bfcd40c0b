#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// "What only a Mac can still prove" (Docs/platforms.md), M2: the layer learns what a delegate
/// decides by asking it `responds(to:)` — which must find the challenge and redirect methods of
/// delegates written in Swift, their `async` forms included — and leaves a task whose own
/// delegate judges server trust to the system, which needs `URLSessionTask.delegate` to be set
/// when the system asks `canInit(with task:)`; `data(for:)` without a delegate must leave it
/// unset (or set to nothing that judges trust), or no `async` load would be cached.
///
/// Foundation fact A22: a protocol cannot read its session's delegate, so the layer knows it only
/// when the app names it to `inject`. This is a claim about public API, so it is checked twice.
/// At compile time, `URLSessionTask` declares no `session`: see `SessionProbe` below, which the
/// type-check against each SDK runs. At run time, the task a protocol is asked about does not
/// lead to the session's delegate through `task.delegate`. The runtime's `responds(to:)` cannot
/// tell public API from private. A public decompilation of CFNetwork (iOS 18.2) shows
/// `NSURLSessionTask` implementing a private `session` method, so "tasks do not respond to
/// `session`" would fail although the claim holds, and it is not asserted.
final class DelegateDetectionClaimTests: CachingTestCase {
    func testM2_respondsToFindsTheChallengeMethodsOfSwiftDelegatesAsyncFormsIncluded() {
        XCTAssertTrue(DelegateTraits.judgesTrust(SessionChallengeDelegate()), "session level, completion handler")
        XCTAssertTrue(DelegateTraits.judgesTrust(TaskChallengeDelegate()), "task level, completion handler")
        XCTAssertTrue(DelegateTraits.judgesTrust(AsyncSessionChallengeDelegate()), "session level, async")
        XCTAssertTrue(DelegateTraits.judgesTrust(AsyncTaskChallengeDelegate()), "task level, async")
        XCTAssertFalse(DelegateTraits.judgesTrust(PlainDataDelegate()), "a delegate without a challenge method")
        XCTAssertNotNil(DelegateTraits.of(AsyncSessionChallengeDelegate()).trustJudge, "as inject(into:using:delegate:) reads it")
        XCTAssertNil(DelegateTraits.of(PlainDataDelegate()).trustJudge)
    }

    func testM2_respondsToFindsTheRedirectMethodOfSwiftDelegatesAsyncFormIncluded() {
        XCTAssertTrue(DelegateTraits.decidesRedirects(RedirectDelegate()), "completion handler")
        XCTAssertTrue(DelegateTraits.decidesRedirects(AsyncRedirectDelegate()), "async")
        XCTAssertFalse(DelegateTraits.decidesRedirects(PlainDataDelegate()))
        XCTAssertTrue(DelegateTraits.of(AsyncRedirectDelegate()).decidesRedirects, "as inject(into:using:delegate:) reads it")
    }

    /// `data(for:delegate:)` with a delegate that judges server trust: the system has set the
    /// task's delegate when it asks the protocol about the task, so the layer leaves both loads
    /// to the system (no `Cache-Status`, nothing the layer counted). With a task delegate that
    /// judges nothing, the layer takes them (the second is a hit): the delegate the protocol sees
    /// is the app's, not a stand-in that implements every method.
    func testM2_theTasksOwnDelegateIsSetWhenTheSystemAsksTheProtocolAboutTheTask() async throws {
        origin.handle("/judged") { _ in .text("judged", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        origin.handle("/plain") { _ in .text("plain", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        for _ in 0..<2 {
            let (data, response) = try await session.data(for: request("/judged"), delegate: TaskChallengeDelegate())
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "judged")
            XCTAssertNil((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"), "left to the system")
        }
        XCTAssertEqual(events.count, 0, "the layer answered none of them")

        var statuses: [String?] = []
        for _ in 0..<2 {
            let (data, response) = try await session.data(for: request("/plain"), delegate: PlainDataDelegate())
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "plain")
            statuses.append((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"))
        }
        XCTAssertEqual(statuses.last, "CachingProtocol; hit", "taken by the layer: \(statuses)")
        XCTAssertEqual(origin.requestCount(path: "/plain"), 1)
    }

    /// `data(for:)` without a delegate: whatever the system puts behind an `async` call, the layer
    /// takes the task (the second load is a hit), so `async` loads are cached.
    func testM2_dataForWithoutADelegateIsTakenByTheLayer() async throws {
        origin.handle("/async") { _ in .text("async", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        var statuses: [String?] = []
        for _ in 0..<2 {
            let (data, response) = try await session.data(for: request("/async"))
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "async")
            statuses.append((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"))
        }
        XCTAssertEqual(statuses.last, "CachingProtocol; hit", "\(statuses)")
        XCTAssertEqual(origin.requestCount(path: "/async"), 1)
    }

    // MARK: A22

    /// A session whose delegate judges server trust, and a protocol asked first that takes
    /// nothing. For a completion-handler task and for `async data(for:)`, the task the protocol
    /// is asked about has no delegate that is the session's or that judges trust. That compiles
    /// at all only because `task.session` in `TaskDelegateWatcher` is this file's probe (A22's
    /// compile-time half).
    func testA22_theTaskAProtocolIsAskedAboutDoesNotLeadToTheSessionsDelegate() async throws {
        origin.handle("/a22") { _ in .text("a22", headers: [HTTPField("Cache-Control", "no-store")]) }
        TaskDelegateWatcher.seen.withLock { $0 = [] }
        let sessionDelegate = SessionChallengeDelegate()
        XCTAssertTrue(DelegateTraits.judgesTrust(sessionDelegate), "a delegate the watcher would recognise")
        let session = sessionAskingFirst(TaskDelegateWatcher.self, delegate: sessionDelegate)
        defer { session.finishTasksAndInvalidate() }

        let done = XCTestExpectation(description: "completion handler")
        session.dataTask(with: request("/a22")) { _, _, _ in done.fulfill() }.resume()
        await fulfillment(of: [done], timeout: 10)
        _ = try await session.data(for: request("/a22"))

        let seen = TaskDelegateWatcher.seen.withLock { $0 }
        XCTAssertGreaterThanOrEqual(seen.count, 2, "the watcher was asked about both tasks: \(seen)")
        XCTAssertEqual(seen.filter { $0.contains("SessionChallengeDelegate") || $0.hasSuffix("judges trust") }, [],
                       "the task led to the session's delegate")
        XCTAssertEqual(origin.requestCount(path: "/a22"), 2)
    }
}

/// What `task.session` means in this file. The SDKs declare no `session` on `URLSessionTask`
/// (A22), so the name resolves to this protocol extension's member, of a type of its own. If an
/// SDK declared a public `session`, the class's own member would win over a protocol
/// extension's, `task.session` would be a `URLSession`, and `TaskDelegateWatcher` would not
/// compile against that SDK. (Checked on Linux with a class standing in for `URLSessionTask`:
/// with a `session` member the assignment fails to compile, without one it compiles.)
private struct NoPublicSession {}

private protocol SessionProbe {}

extension SessionProbe {
    var session: NoPublicSession { NoPublicSession() }
}

extension URLSessionTask: SessionProbe {}

/// A protocol asked first that takes nothing. It records the delegate of each task it is asked
/// about: its type, and whether it judges server trust.
private final class TaskDelegateWatcher: URLProtocol {
    static let seen = Locked<[String]>([])

    override class func canInit(with request: URLRequest) -> Bool {
        false
    }

    override class func canInit(with task: URLSessionTask) -> Bool {
        // The public way from a task to its session, if there were one. Read without a type
        // context, so that a `session` the SDK declared would win, and then not convert: see
        // `SessionProbe`.
        let session = task.session
        let _: NoPublicSession = session
        let delegate = task.delegate.map { "\(type(of: $0))" + (DelegateTraits.judgesTrust($0) ? " judges trust" : "") }
        seen.withLock { $0.append(delegate ?? "no delegate") }
        return false
    }
}

// Delegates as apps write them in Swift: each implements one form of one method.

private final class SessionChallengeDelegate: NSObject, URLSessionDelegate, Sendable {
    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        completionHandler(.performDefaultHandling, nil)
    }
}

private final class TaskChallengeDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        completionHandler(.performDefaultHandling, nil)
    }
}

private final class AsyncSessionChallengeDelegate: NSObject, URLSessionDelegate, Sendable {
    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge) async
        -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        (.performDefaultHandling, nil)
    }
}

private final class AsyncTaskChallengeDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge) async
        -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        (.performDefaultHandling, nil)
    }
}

private final class RedirectDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(request)
    }
}

private final class AsyncRedirectDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest) async -> URLRequest? {
        request
    }
}

/// A task delegate that judges nothing: it only watches the body arrive.
private final class PlainDataDelegate: NSObject, URLSessionDataDelegate, Sendable {
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {}
}
#endif
