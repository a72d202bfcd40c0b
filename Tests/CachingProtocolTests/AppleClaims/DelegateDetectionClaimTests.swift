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
