import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Each row of the transparency table: the same app code without and with the layer sees the
/// same status, body, delegate calls and origin traffic.
final class SessionBehaviourPairTests: CachingTestCase {
    private func pair(_ headers: [String] = []) -> TransparencyPair {
        TransparencyPair(origin: origin, loggedHeaders: headers)
    }

    /// Runs a delegate-based data task for `request` and waits for its end.
    private func runTask(_ session: URLSession, _ delegate: AppDelegate, _ request: URLRequest) async -> String {
        let task = session.dataTask(with: request)
        task.resume()
        await fulfillment(of: [delegate.done], timeout: 20)
        let response = task.response as? HTTPURLResponse
        return "\(response?.statusCode ?? 0) \(response?.url?.path ?? "-") \(String(decoding: delegate.received, as: UTF8.self))"
    }

    /// Runs a completion-handler data task for `request`.
    private func runCompletionTask(_ session: URLSession, _ request: URLRequest) async -> String {
        await withCheckedContinuation { continuation in
            session.dataTask(with: request) { data, response, error in
                let http = response as? HTTPURLResponse
                let outcome = error.map { "error \(($0 as? URLError)?.code.rawValue ?? -1)" }
                    ?? "\(http?.statusCode ?? 0) \(http?.url?.path ?? "-") \(String(decoding: data ?? Data(), as: UTF8.self))"
                continuation.resume(returning: outcome)
            }.resume()
        }
    }

    private func serveRedirect(from path: String, to location: String, status: Int = 302, cookie: String? = nil) {
        origin.handle(path) { _ in
            var headers = [HTTPField("Location", location)]
            if let cookie { headers.append(HTTPField("Set-Cookie", cookie)) }
            return OriginResponse(status: status, headers: headers, body: Data("moved".utf8))
        }
    }

    // MARK: Redirects

    func testARedirectTheDelegateBlocksIsTheAnswer() async throws {
        serveRedirect(from: "/old", to: "/new")
        origin.handle("/new") { _ in .text("new", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (without, with) = try await pair().observe(delegate: { AppDelegate(followsRedirects: false) }, caching: makeConfiguration()) { session, delegate in
            await runTask(session, delegate, URLRequest(url: origin.url("/old")))
        }
        XCTAssertEqual(without.result, "302 /old moved", "\(without)")
        XCTAssertTrue(without.delegateCalls.contains { $0.hasPrefix("redirect 302") }, "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
    }

    func testARedirectTheDelegateAllowsIsFollowed() async throws {
        serveRedirect(from: "/old", to: "/new", status: 301)
        origin.handle("/new") { _ in .text("new", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (without, with) = try await pair().observe(caching: makeConfiguration()) { session, delegate in
            await runTask(session, delegate, URLRequest(url: origin.url("/old")))
        }
        XCTAssertEqual(without.result, "200 /new new", "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
    }

    func testARedirectToACustomSchemeReachesTheDelegate() async throws {
        serveRedirect(from: "/authorize", to: "myapp://callback?code=abc123")
        let (without, with) = try await pair().observe(delegate: { AppDelegate(followsRedirects: false) }, caching: makeConfiguration()) { session, delegate in
            await runTask(session, delegate, URLRequest(url: origin.url("/authorize")))
        }
        XCTAssertTrue(without.delegateCalls.contains("redirect 302 to myapp://callback?code=abc123"), "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
    }

    func testCompletionHandlerTasksFollowRedirectsWithoutADelegate() async throws {
        serveRedirect(from: "/old", to: "/new")
        origin.handle("/new") { _ in .text("new") }
        let observed = await withoutAndWithTheLayer { plain in
            await runCompletionTask(plain, URLRequest(url: origin.url("/old"))) + " " + origin.requests.map(\.target).joined(separator: ",")
        }
        XCTAssertEqual(observed.without, "200 /new new /old,/new")
        XCTAssertEqual(observed.with, observed.without)
    }

    func testACompletionHandlerTaskRedirectedToAnotherSchemeEndsAsWithoutTheLayer() async throws {
        serveRedirect(from: "/authorize", to: "myapp://callback?code=abc123")
        let observed = await withoutAndWithTheLayer { plain in
            await runCompletionTask(plain, URLRequest(url: origin.url("/authorize")))
        }
        XCTAssertEqual(observed.with, observed.without, "the layer follows to the other scheme as Foundation does")
    }

    // MARK: Cookies

    func testALoginCookieInAnEphemeralJarIsSentNextTime() async throws {
        origin.handle("/login") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Set-Cookie", "session=alice; Path=/")], body: Data("ok".utf8))
        }
        origin.handle("/me") { request in .text("me: \(request.header("Cookie") ?? "nobody")") }
        let (without, with) = try await pair(["Cookie"]).observe(caching: makeConfiguration()) { session, _ in
            _ = try await session.data(from: origin.url("/login"))
            let (data, _) = try await session.data(from: origin.url("/me"))
            return String(decoding: data, as: UTF8.self)
        }
        XCTAssertEqual(without.result, "me: session=alice", "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
        XCTAssertNil(HTTPCookieStorage.shared.cookies(for: origin.url("/"))?.first { $0.name == "session" },
                     "nothing lands in the shared jar")
    }

    /// A `Cookie` the app set on its request while the jar holds a cookie for the URL, directly
    /// and through a redirect: the origin receives what it receives without the layer (corelibs
    /// puts the jar's in its place before any protocol sees the request, Docs/foundation-facts.md,
    /// L16; Apple's loader sends the app's, A25).
    func testACookieTheAppSetReachesTheOriginAsWithoutTheLayer() async throws {
        serveRedirect(from: "/start", to: "/me")
        origin.handle("/me") { request in
            .text("me: \(request.header("Cookie") ?? "nobody")", headers: [HTTPField("Cache-Control", "no-store")])
        }
        let jarCookie = HTTPCookie(properties: [.domain: "127.0.0.1", .path: "/", .name: "jar", .value: "1"])!
        let (without, with) = try await pair(["Cookie"]).observe(
            configure: { $0.httpCookieStorage?.setCookie(jarCookie) }, sessionHasDelegate: false, caching: makeConfiguration()
        ) { session, _ in
            var results: [String] = []
            for path in ["/me", "/start", "/me"] {
                var request = URLRequest(url: origin.url(path))
                request.setValue("app=2", forHTTPHeaderField: "Cookie")
                let (data, _) = try await session.data(for: request)
                results.append(String(decoding: data, as: UTF8.self))
            }
            return results.joined(separator: " | ")
        }
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
        #if canImport(FoundationNetworking)
        XCTAssertEqual(without.result, "me: jar=1 | me: jar=1 | me: jar=1", "\(without)")
        #endif
    }

    func testACookieSetOnARedirectHopIsSentOnTheNextHop() async throws {
        serveRedirect(from: "/start", to: "/landing", cookie: "hop=1; Max-Age=7776000; path=/")
        origin.handle("/landing") { request in .text("landing: \(request.header("Cookie") ?? "none")") }
        let observed = await withoutAndWithTheLayer { plain in
            await runCompletionTask(plain, URLRequest(url: origin.url("/start")))
        }
        XCTAssertEqual(observed.without, "200 /landing landing: hop=1")
        XCTAssertEqual(observed.with, observed.without)
    }

    /// corelibs adds no cookies to the request a delegate gives back for a redirect (only to a
    /// redirect it follows on its own): the layer gives the app the same.
    func testARedirectHopTheDelegateAllowsCarriesWhatTheDelegateGave() async throws {
        serveRedirect(from: "/start", to: "/landing", cookie: "hop=1; Max-Age=7776000; path=/")
        origin.handle("/landing") { request in .text("landing: \(request.header("Cookie") ?? "none")") }
        let (without, with) = try await pair(["Cookie"]).observe(caching: makeConfiguration()) { session, delegate in
            await runTask(session, delegate, URLRequest(url: origin.url("/start")))
        }
        XCTAssertTrue(without.delegateCalls.contains { $0.hasPrefix("redirect 302") }, "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
    }

    /// An API answers 302 to another origin (a presigned storage URL), loaded twice so the second
    /// redirect is the stored one. What reaches each origin — the `Authorization` the app set and
    /// the cookies — is the same with the layer as without, for a task nobody is asked about and
    /// for one whose delegate allows the redirect (corelibs copies the request's header fields
    /// to the next hop, and adds the jar's cookies only when it follows on its own).
    func testACrossOriginRedirectSendsEachOriginWhatFoundationSends() async throws {
        let storage = try LoopbackOrigin(now: clock.read)
        defer { storage.stop() }
        let target = URL(string: "http://localhost:\(storage.port)/blob?signature=abc")!
        origin.handle("/file") { _ in
            OriginResponse(status: 302, headers: [HTTPField("Location", target.absoluteString),
                                                  HTTPField("Cache-Control", "public, max-age=600")], body: Data("moved".utf8))
        }
        storage.handle("/blob") { _ in .text("blob", headers: [HTTPField("Cache-Control", "public, max-age=600")]) }
        for hasDelegate in [false, true] {
            var observed: [String] = []
            var answeredByTheLayer = 0
            for withLayer in [false, true] {
                origin.resetLog()
                storage.resetLog()
                cache.removeAll()
                let configuration = URLSessionConfiguration.ephemeral
                let jar = configuration.httpCookieStorage!
                jar.setCookie(HTTPCookie(properties: [.domain: "127.0.0.1", .path: "/", .name: "api", .value: "1"])!)
                jar.setCookie(HTTPCookie(properties: [.domain: "localhost", .path: "/", .name: "store", .value: "2"])!)
                let caching = makeConfiguration()
                if withLayer { CachingURLProtocol.inject(into: configuration, using: caching) }
                let delegate = AppDelegate()
                let session = URLSession(configuration: configuration, delegate: hasDelegate ? delegate : nil, delegateQueue: nil)
                defer { session.finishTasksAndInvalidate() }
                var request = URLRequest(url: origin.url("/file"))
                request.setValue("Bearer app-token", forHTTPHeaderField: "Authorization")
                var results: [String] = []
                for _ in 0..<2 {
                    if hasDelegate {
                        let response = await runDelegateTask(request, in: session, delegate: delegate)
                        results.append("\(response?.statusCode ?? 0) \(response?.url?.path ?? "-")")
                    } else {
                        results.append(await runCompletionTask(session, request))
                    }
                }
                // Each distinct request once: through the layer the second load is answered from the cache.
                let traffic = Set(origin.requests.map { "api \($0.method) \($0.target)" + Self.credentials($0) }
                                  + storage.requests.map { "storage \($0.method) \($0.target)" + Self.credentials($0) })
                observed.append((results + traffic.sorted()).joined(separator: "\n"))
                if withLayer { answeredByTheLayer = caching.statistics.hits }
            }
            XCTAssertTrue(observed[0].contains("storage GET /blob?signature=abc"), observed[0])
            if SessionSettings.redirectsPerHop, !hasDelegate {
                // Apple's loader rules on Linux: the layer makes the hop it follows as Apple's loader
                // makes it, without the `Authorization` to another origin (Docs/foundation-facts.md,
                // A19), where corelibs, the loader without the layer here, copies it. And corelibs
                // put the jar's cookie on the request before the layer saw it (L16), so the layer
                // takes it for one the app set, which Apple's loader copies to the hop (A25); on Apple
                // the protocol never sees the jar's (A6) and the hop gets the jar's for its own URL
                // (`AppCookieTests`).
                let asApple = observed[0].replacingOccurrences(of: "storage GET /blob?signature=abc authorization=Bearer app-token cookie=store=2",
                                                               with: "storage GET /blob?signature=abc authorization=- cookie=api=1")
                XCTAssertEqual(observed[1], asApple, "delegate: \(hasDelegate)")
            } else {
                XCTAssertEqual(observed[1], observed[0], "delegate: \(hasDelegate)")
            }
            XCTAssertGreaterThan(answeredByTheLayer, 0, "the second time the layer answered from the cache")
        }
    }

    private static func credentials(_ request: OriginRequest) -> String {
        " authorization=\(request.header("Authorization") ?? "-") cookie=\(request.header("Cookie") ?? "-")"
    }

    func testACookieJarThatAcceptsNothingStaysEmpty() async throws {
        origin.handle("/login") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Set-Cookie", "session=alice; Path=/")], body: Data("ok".utf8))
        }
        origin.handle("/me") { request in .text("me: \(request.header("Cookie") ?? "nobody")") }
        let (without, with) = try await pair(["Cookie"]).observe(configure: { $0.httpCookieAcceptPolicy = .never }, caching: makeConfiguration()) { session, _ in
            _ = try await session.data(from: origin.url("/login"))
            let (data, _) = try await session.data(from: origin.url("/me"))
            return String(decoding: data, as: UTF8.self)
        }
        XCTAssertEqual(without.result, "me: nobody", "\(without)")
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
    }

    // MARK: Session settings

    func testASessionThatReloadsAlwaysReachesTheOrigin() async throws {
        let counter = Locked(0)
        origin.handle("/feed") { _ in
            let number = counter.withLock { $0 += 1; return $0 }
            return .text("v\(number)", headers: [HTTPField("Cache-Control", "max-age=86400")])
        }
        let (without, with) = try await pair().observe(configure: { $0.requestCachePolicy = .reloadIgnoringLocalCacheData }, caching: makeConfiguration()) { session, _ in
            var bodies: [String] = []
            for _ in 0..<3 {
                let (data, _) = try await session.data(from: origin.url("/feed"))
                bodies.append(String(decoding: data, as: UTF8.self))
            }
            return "\(bodies.count) answers"
        }
        XCTAssertEqual(without.originTraffic.count, 3)
        XCTAssertEqual(with, without)
        XCTAssertGreaterThan(with.layerAnswers, 0, "the layer answered")
        XCTAssertEqual(counter.withLock { $0 }, 6, "every GET of both runs reached the origin")
    }

    // MARK: Streams

    func testAnEventStreamReachesTheDelegateAsItArrives() async throws {
        origin.handle("/events") { _ in
            OriginResponse(status: 200, headers: [HTTPField("Content-Type", "text/event-stream")],
                           body: Data("data: one\n\ndata: two\n\n".utf8), transfer: .chunked(chunkSize: 11))
        }
        let (without, with) = try await pair(["Accept"]).observe(caching: makeConfiguration()) { session, delegate in
            var request = URLRequest(url: origin.url("/events"))
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            return await runTask(session, delegate, request)
        }
        XCTAssertEqual(with, without)
        XCTAssertEqual(with.layerAnswers, 0, "an event stream passes the layer by")
        XCTAssertEqual(cache.statistics.memory.entryCount, 0, "an event stream is not the cache's")
    }

    /// An `async` call with its own delegate (`data(from:delegate:)`): the delegate is told the
    /// response and given the body, from the origin and from the cache, as without the layer.
    func testAnAsyncCallsOwnDelegateGetsTheBody() async throws {
        origin.handle("/capital") { _ in .text("London", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (without, with) = try await pair().observe(caching: makeConfiguration()) { session, _ in
            var seen: [String] = []
            for _ in 0..<2 {
                let taskDelegate = AppDelegate()
                let (data, _) = try await session.data(from: origin.url("/capital"), delegate: taskDelegate)
                // Calls to a task delegate of an `async` call go through the session's (serial)
                // delegate queue; one more operation there runs after them. Such a delegate is
                // not told of the completion on Linux, with or without the layer.
                await withCheckedContinuation { done in session.delegateQueue.addOperation { done.resume() } }
                seen.append("\(String(decoding: data, as: UTF8.self)) delegate: \(taskDelegate.calls) "
                            + "\(String(decoding: taskDelegate.received, as: UTF8.self))")
            }
            return seen.joined(separator: " | ")
        }
        XCTAssertEqual(with.result, without.result)
        XCTAssertEqual(with.delegateCalls, without.delegateCalls)
        XCTAssertEqual(without.originTraffic, ["GET /capital", "GET /capital"])
        XCTAssertEqual(without.result, Array(repeating: "London delegate: [\"response 200\"] London", count: 2)
            .joined(separator: " | "))
        XCTAssertEqual(with.layerAnswers, 2, "one load from the origin, one from the cache")
        XCTAssertEqual(with.originTraffic, ["GET /capital"])
    }

    // MARK: Task kinds

    /// corelibs finishes a download only through its own protocol (Docs/foundation-facts.md, L17):
    /// the layer hands download tasks to it, so they work as without the layer (uncached).
    func testDownloadTasksWorkAsWithoutTheLayer() async throws {
        let body = Data.pattern(50_000, seed: 4)
        origin.handle("/file") { _ in OriginResponse(status: 200, headers: [HTTPField("Cache-Control", "max-age=600")], body: body) }
        let observed = await withoutAndWithTheLayer { downloads in
            let outcome: String = await withCheckedContinuation { continuation in
                downloads.downloadTask(with: origin.url("/file")) { location, response, error in
                    let contents = location.flatMap { try? Data(contentsOf: $0) }
                    continuation.resume(returning: "\((response as? HTTPURLResponse)?.statusCode ?? 0) "
                                        + "\(contents == body ? "same bytes" : "different bytes") \(error.map { "\($0)" } ?? "no error")")
                }.resume()
            }
            return outcome + " " + origin.requests.map(\.method).joined(separator: ",")
        }
        XCTAssertEqual(observed.without, "200 same bytes no error GET")
        XCTAssertEqual(observed.with, observed.without)
    }

    /// Foundation looks in a session's `urlCache` before every data task
    /// (Docs/foundation-facts.md, L18); with the layer answering from the same cache, that lookup is not made twice.
    func testASessionWhoseURLCacheIsTheCachePaysOneLookupPerRequest() async throws {
        origin.handle("/feed") { _ in .text("feed", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = cache
        CachingURLProtocol.inject(into: configuration, using: makeConfiguration())
        let layered = URLSession(configuration: configuration)
        defer { layered.finishTasksAndInvalidate() }
        let before = cache.statistics.memory
        for _ in 0..<5 { _ = try await layered.data(from: origin.url("/feed")) }
        let after = cache.statistics.memory
        XCTAssertEqual((after.hits + after.misses) - (before.hits + before.misses), 5, "one memory lookup per request")
        XCTAssertEqual(after.hits - before.hits, 4)
        XCTAssertEqual(originMethods("/feed"), ["GET"])
    }
}

/// Requests the foreign URLSession suite found the layer mishandling.
final class UnsendableRequestTests: CachingTestCase {
    /// corelibs traps when a request without a URL is changed: the layer leaves it alone, and
    /// Foundation answers it as without the layer.
    func testARequestWithoutAURLIsLeftToFoundation() async throws {
        var request = URLRequest(url: origin.url("/anything"))
        request.url = nil
        XCTAssertFalse(CachingURLProtocol.canInit(with: request))
        let (data, response, error) = await withCheckedContinuation { continuation in
            session.dataTask(with: request) { data, response, error in
                continuation.resume(returning: (data, response, error as? URLError))
            }.resume()
        }
        XCTAssertNil(data)
        XCTAssertNil(response)
        XCTAssertEqual(error?.code, .unsupportedURL)
    }

    /// A port no connection can use is Foundation's to refuse (with `badURL`, and `task.error`
    /// set, which a protocol cannot set on Linux).
    func testAURLWithAnImpossiblePortIsLeftToFoundation() {
        XCTAssertFalse(CachingURLProtocol.canInit(with: URLRequest(url: URL(string: "http://127.0.0.1:999999/x")!)))
        XCTAssertTrue(CachingURLProtocol.canInit(with: URLRequest(url: origin.url("/x"))))
    }
}
