import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// An unsafe request for a URL with something stored goes through the layer (so the store is
/// invalidated only when the origin accepts it): the app sees what it sees without the layer —
/// redirects, challenges, bodies — as for GETs.
final class UnsafeRequestPairTests: CachingTestCase {
    /// The app code of each pair: a GET of `path` (which the layer stores), then `request`
    /// through a delegate task; its status, final path and body.
    private func getThen(_ request: URLRequest, storing path: String, _ session: URLSession,
                         _ delegate: AppDelegate) async -> String {
        _ = try? await session.data(from: origin.url(path))
        let response = await runDelegateTask(request, in: session, delegate: delegate)
        return "\(response?.statusCode ?? 0) \(response?.url?.path ?? "-") \(String(decoding: delegate.received, as: UTF8.self))"
    }

    private func servePostAnswering(_ path: String, _ answer: @escaping @Sendable (OriginRequest) -> OriginResponse) {
        origin.handle(path) { request in
            request.method == "GET" ? .text("stored", headers: [HTTPField("Cache-Control", "max-age=600")]) : answer(request)
        }
    }

    /// A POST of `body` to /account, and the credential the app's delegate answers its challenge with.
    private func postToAccount(_ body: Data) -> (URLRequest, URLCredential) {
        var post = URLRequest(url: origin.url("/account"))
        post.httpMethod = "POST"
        post.httpBody = body
        return (post, URLCredential(user: "alice", password: "secret", persistence: .forSession))
    }

    func testAPostAnswered303IsFollowedWithAGetAsWithoutTheLayer() async throws {
        servePostAnswering("/orders") { _ in OriginResponse(status: 303, headers: [HTTPField("Location", "/orders/9")]) }
        origin.handle("/orders/9") { _ in .text("order 9") }
        var post = URLRequest(url: origin.url("/orders"))
        post.httpMethod = "POST"
        post.httpBody = Data("item=1".utf8)
        let (without, with) = try await TransparencyPair(origin: origin).observe(caching: makeConfiguration()) { session, delegate in
            await getThen(post, storing: "/orders", session, delegate)
        }
        XCTAssertTrue(without.result.hasPrefix("200 /orders/9"), "\(without)")
        XCTAssertTrue(without.delegateCalls.contains { $0.hasPrefix("redirect 303") }, "\(without)")
        XCTAssertEqual(with, without)
        if CachingURLProtocol.everyBodyIsAStream {
            XCTAssertEqual(with.layerAnswers, 1, "Apple's loader rules: the GET; the POST and its 303 were Foundation's (its body)")
        } else {
            XCTAssertEqual(with.layerAnswers, 3, "the GET, the POST's 303 and the GET the layer followed it with went through the layer")
        }
    }

    func testAPostChallengedWithBasicAuthIsAnsweredByTheAppsDelegate() async throws {
        let expected = "Basic " + Data("alice:secret".utf8).base64EncodedString()
        servePostAnswering("/account") { request in
            guard request.header("Authorization") == expected else {
                return OriginResponse(status: 401, headers: [HTTPField("WWW-Authenticate", "Basic realm=\"members\"")],
                                      body: Data("who are you?".utf8))
            }
            return OriginResponse(status: 200, body: request.body)
        }
        let (post, credential) = postToAccount(Data("name=alice".utf8))
        let (without, with) = try await TransparencyPair(origin: origin, loggedHeaders: ["Authorization"]).observe(
            delegate: { AppDelegate(credential: credential) }, caching: makeConfiguration()) { session, delegate in
            await getThen(post, storing: "/account", session, delegate)
        }
        XCTAssertTrue(without.result.hasPrefix("200 /account") && without.result.hasSuffix("name=alice"), "\(without)")
        XCTAssertEqual(with, without)
        if CachingURLProtocol.everyBodyIsAStream {
            XCTAssertEqual(with.layerAnswers, 1, "Apple's loader rules: the GET; the POST was Foundation's (its body)")
        } else {
            XCTAssertGreaterThanOrEqual(with.layerAnswers, 2, "the GET and the POST went through the layer")
        }
    }

    /// A POST (Basic auth challenged, answered by the app's delegate, so sent twice) for a URL
    /// whose GET is stored; then the GET again. Returns the app's results and every body the
    /// origin received, in order.
    private func postChallengedThenGet(_ post: URLRequest, session: URLSession, delegate: AppDelegate,
                                       bodies: Locked<[String]>) async -> String {
        bodies.withLock { $0 = [] }
        _ = try? await session.data(from: origin.url("/account"))
        let response = await runDelegateTask(post, in: session, delegate: delegate)
        let posted = "\(response?.statusCode ?? 0) \(String(decoding: delegate.received, as: UTF8.self))"
        let data = (try? await session.data(from: origin.url("/account")))?.0 ?? Data()
        return "\(posted) | then GET: \(String(decoding: data, as: UTF8.self)) | origin got: \(bodies.withLock { $0 })"
    }

    private func serveAccountChallengingPosts(recordingBodiesIn bodies: Locked<[String]>) {
        let expected = "Basic " + Data("alice:secret".utf8).base64EncodedString()
        origin.handle("/account") { request in
            if request.method == "GET" {
                // The profile's version: how many POSTs the origin accepted in this run.
                let version = bodies.withLock { $0.filter { $0.hasPrefix("accepted") }.count }
                return .text("profile v\(version)", headers: [HTTPField("Cache-Control", "max-age=600")])
            }
            bodies.withLock { $0.append("\(request.method) [\(String(decoding: request.body, as: UTF8.self))]") }
            guard request.header("Authorization") == expected else {
                return OriginResponse(status: 401, headers: [HTTPField("WWW-Authenticate", "Basic realm=\"members\"")],
                                      body: Data("who are you?".utf8))
            }
            bodies.withLock { $0.append("accepted") }
            return OriginResponse(status: 200, body: request.body)
        }
    }

    /// A POST whose body is a stream, for a URL whose GET is stored, challenged and sent again
    /// with the app's credential: the origin gets the same bytes as without the layer (on Linux
    /// corelibs re-sends the consumed stream empty, with or without it), and the GET stored
    /// before is not served after the origin accepted the POST (RFC 9111 §4.4). The layer leaves
    /// such a body to Foundation, which alone can ask the app for the stream again and report
    /// upload progress, and drops the stored GET before it leaves. Before, the layer sent the
    /// POST, corelibs sent it again past the layer, and the old GET was served afterwards.
    func testAPostWithAStreamBodyChallengedAndSentAgainIsSentAsWithoutTheLayerAndDropsTheStoredGet() async throws {
        let bodies = Locked<[String]>([])
        serveAccountChallengingPosts(recordingBodiesIn: bodies)
        let payload = Data("name=alice&avatar=0123456789".utf8)
        let (post, credential) = postToAccount(payload)
        let (without, with) = try await TransparencyPair(origin: origin, loggedHeaders: ["Authorization"]).observe(
            delegate: { AppDelegate(credential: credential) }, caching: makeConfiguration()) { session, delegate in
            var streamed = post
            streamed.httpBody = nil
            streamed.httpBodyStream = InputStream(data: payload)
            return await postChallengedThenGet(streamed, session: session, delegate: delegate, bodies: bodies)
        }
        XCTAssertTrue(without.result.contains("then GET: profile v1"), "\(without)")
        XCTAssertTrue(without.result.contains("POST [name=alice&avatar=0123456789]"), "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the GETs went through the layer")
    }

    /// The same with a body the layer sends itself (`httpBody`, on Linux): the app's session
    /// sends the POST again with its credential past the layer (corelibs raises the 401's
    /// challenge itself), so the layer drops the stored GET when it hands the app the 401.
    /// Before, the old GET was served after the origin accepted the POST.
    func testAPostWithADataBodyChallengedAndSentAgainDropsTheStoredGet() async throws {
        let bodies = Locked<[String]>([])
        serveAccountChallengingPosts(recordingBodiesIn: bodies)
        let (post, credential) = postToAccount(Data("name=alice".utf8))
        let (without, with) = try await TransparencyPair(origin: origin, loggedHeaders: ["Authorization"]).observe(
            delegate: { AppDelegate(credential: credential) }, caching: makeConfiguration()) { session, delegate in
            await postChallengedThenGet(post, session: session, delegate: delegate, bodies: bodies)
        }
        XCTAssertTrue(without.result.contains("then GET: profile v1"), "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0)
    }

    /// Which bodies the layer leaves to Foundation: a stream everywhere; on Apple, where a
    /// protocol may get any body as a stream, every body.
    func testABodyOnlyFoundationCanSendAgainIsLeftToIt() {
        var request = URLRequest(url: origin.url("/account"))
        request.httpMethod = "POST"
        XCTAssertFalse(CachingURLProtocol.leavesBodyToFoundation(request, everyBodyIsAStream: true), "no body")
        request.httpBody = Data("a".utf8)
        XCTAssertFalse(CachingURLProtocol.leavesBodyToFoundation(request, everyBodyIsAStream: false))
        XCTAssertTrue(CachingURLProtocol.leavesBodyToFoundation(request, everyBodyIsAStream: true))
        request.httpBodyStream = InputStream(data: Data("a".utf8))
        XCTAssertTrue(CachingURLProtocol.leavesBodyToFoundation(request, everyBodyIsAStream: false))
    }
}
