import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// One user's response is never another's, secrets stay out of files and logs, and deleting
/// really deletes.
final class SecurityTests: CachingTestCase {
    private let logged = Locked<[String]>([])

    override func makeConfiguration() -> CachingConfiguration {
        var configuration = super.makeConfiguration()
        configuration.log = { [logged] message in logged.withLock { $0.append(message) } }
        return configuration
    }

    /// Serves `path` with a body naming the request's credentials, so a test can tell whose
    /// response it got: "body for <Authorization>|<Cookie>", or with `mirrored`, the same
    /// reversed (so that the credential itself is not in the body, for tests that look for
    /// it in files).
    private func servePerCredential(_ path: String, headers: [HTTPField], mirrored: Bool = false) {
        origin.handle(path) { request in
            let owner = "\(request.header("Authorization") ?? "-")|\(request.header("Cookie") ?? "-")"
            let text = "body for \(owner)"
            return OriginResponse(headers: headers, body: Data((mirrored ? String(text.reversed()) : text).utf8))
        }
    }

    private func getText(_ path: String, _ headers: [String: String] = [:]) async throws -> String {
        let (data, _) = try await get(path, headers: headers)
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: Credentials

    /// The opt-out (`storesCredentialedResponses` false: a directory that must never hold an
    /// answer to a signed request): nothing of a credentialed answer without `public` is written.
    func testWithTheOptOutCredentialedResponsesAreNotStoredWithoutPublic() async throws {
        var configuration = makeConfiguration()
        configuration.policy.storesCredentialedResponses = false
        installSession(configuration)
        for credential in [["Authorization": "Bearer token-a"], ["Cookie": "session=a"]] {
            // Given a response that says max-age but not public, to a request with credentials
            let path = "/private-\(credential.keys.first!)"
            servePerCredential(path, headers: [HTTPField("Cache-Control", "max-age=600")])
            // When it is requested twice with the same credentials
            let first = try await getText(path, credential)
            let second = try await getText(path, credential)
            // Then both went to the origin, and nothing was written
            XCTAssertEqual(first, second)
            XCTAssertEqual(originMethods(path), ["GET", "GET"], path)
            cache.waitUntilSettled()
            XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(first.utf8)), [], path)
        }
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [])
    }

    func testPublicCredentialedResponseIsNeverServedToAnotherCredential() async throws {
        // Given a response marked public, so it is stored although the request had credentials
        servePerCredential("/profile", headers: [HTTPField("Cache-Control", "public, max-age=600")])
        let alice = ["Authorization": "Bearer alice-token"]
        let bob = ["Authorization": "Bearer bob-token"]
        let aliceCookie = ["Cookie": "session=alice"]
        // When several users ask, repeatedly and interleaved
        let answers = [
            try await getText("/profile", alice), try await getText("/profile", bob),
            try await getText("/profile"), try await getText("/profile", aliceCookie),
            try await getText("/profile", alice), try await getText("/profile", bob),
            try await getText("/profile"), try await getText("/profile", aliceCookie),
        ]
        // Then each got only their own response, and each credential went to the origin once
        XCTAssertEqual(answers, [
            "body for Bearer alice-token|-", "body for Bearer bob-token|-", "body for -|-", "body for -|session=alice",
            "body for Bearer alice-token|-", "body for Bearer bob-token|-", "body for -|-", "body for -|session=alice",
        ])
        XCTAssertEqual(originMethods("/profile").count, 4)
    }

    func testOptInStoresPerCredentialAndStillKeepsUsersApart() async throws {
        // Given an app that opts in to storing credentialed responses
        var policy = CachingPolicy.heuristic()
        policy.storesCredentialedResponses = true
        var configuration = makeConfiguration()
        configuration.policy = policy
        installSession(configuration)
        origin.handle("/inbox") { request in
            let user = request.header("Authorization") == "Bearer alice-token" ? "alice" : "bob"
            return .text("inbox of \(user)", headers: [HTTPField("Cache-Control", "max-age=600")])
        }
        let alice = ["Authorization": "Bearer alice-token"], bob = ["Authorization": "Bearer bob-token"]
        // When two users each ask twice
        let answers = [try await getText("/inbox", alice), try await getText("/inbox", bob),
                       try await getText("/inbox", alice), try await getText("/inbox", bob)]
        // Then each was stored for its own credential only
        XCTAssertEqual(answers, ["inbox of alice", "inbox of bob", "inbox of alice", "inbox of bob"])
        XCTAssertEqual(originMethods("/inbox").count, 2)
        // And the credentials themselves are not on disk (only a fingerprint is)
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, 1, "one record, two variants")
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data("alice-token".utf8)), [])
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data("bob-token".utf8)), [])
    }

    func testConcurrentRequestsWithDifferentCredentialsAreNotCollapsed() async throws {
        // Given an origin that answers only once two requests are in (or after 5 s)
        let arrived = Locked(0)
        let bothIn = DispatchSemaphore(value: 0)
        origin.handle("/feed") { request in
            if arrived.withLock({ $0 += 1; return $0 }) == 2 {
                bothIn.signal()
                bothIn.signal()
            }
            _ = bothIn.wait(timeout: .now() + 5)
            return OriginResponse(headers: [HTTPField("Cache-Control", "public, max-age=600")],
                                  body: Data("feed for \(request.header("Authorization") ?? "-")".utf8))
        }
        // When two users ask at the same moment
        let session = self.session!
        let url = origin.url("/feed")
        @Sendable func fetch(_ authorization: String) async throws -> String {
            var request = URLRequest(url: url)
            request.setValue(authorization, forHTTPHeaderField: "Authorization")
            let (data, _) = try await session.data(for: request)
            return String(decoding: data, as: UTF8.self)
        }
        async let alice = fetch("Bearer alice")
        async let bob = fetch("Bearer bob")
        let (forAlice, forBob) = try await (alice, bob)
        // Then each request reached the origin and got its own answer
        XCTAssertEqual(forAlice, "feed for Bearer alice")
        XCTAssertEqual(forBob, "feed for Bearer bob")
        XCTAssertEqual(originMethods("/feed").count, 2)
        XCTAssertFalse(events.contains { $0.collapsed })
    }

    func testVaryOnCredentialsDoesNotWriteTheCredentialToDisk() async throws {
        // Given public responses that vary on Authorization and on Cookie
        let varyOn = { (field: String) in [HTTPField("Cache-Control", "public, max-age=600"), HTTPField("Vary", field)] }
        servePerCredential("/vary-auth", headers: varyOn("Authorization"), mirrored: true)
        servePerCredential("/vary-cookie", headers: varyOn("Cookie"), mirrored: true)
        let token = "Bearer secret-token-\(UUID().uuidString)"
        let cookie = "session=secret-cookie-\(UUID().uuidString)"
        func mirrored(_ text: String) -> String { String(text.reversed()) }
        // When they are fetched and hit
        _ = try await getText("/vary-auth", ["Authorization": token])
        _ = try await getText("/vary-cookie", ["Cookie": cookie])
        let hitAuth = try await getText("/vary-auth", ["Authorization": token])
        let hitCookie = try await getText("/vary-cookie", ["Cookie": cookie])
        XCTAssertEqual(hitAuth, mirrored("body for \(token)|-"))
        XCTAssertEqual(hitCookie, mirrored("body for -|\(cookie)"))
        XCTAssertEqual(origin.requestCount(), 2, "both were stored and hit")
        // Then neither secret is in any file of the cache directory
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, 2)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(token.utf8)), [])
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(cookie.utf8)), [])
        // And after a restart (variants matched from disk) the same credential hits and another misses
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 32 << 20, directory: directory)
        installSession(makeConfiguration())
        let sameAfterRestart = try await getText("/vary-auth", ["Authorization": token])
        let otherAfterRestart = try await getText("/vary-auth", ["Authorization": "Bearer other"])
        let cookieAfterRestart = try await getText("/vary-cookie", ["Cookie": cookie])
        XCTAssertEqual(sameAfterRestart, mirrored("body for \(token)|-"))
        XCTAssertEqual(otherAfterRestart, mirrored("body for Bearer other|-"))
        XCTAssertEqual(cookieAfterRestart, mirrored("body for -|\(cookie)"))
        XCTAssertEqual(originMethods("/vary-auth").count, 2)
        XCTAssertEqual(originMethods("/vary-cookie").count, 1)
    }

    /// The app session puts the cookies of its own jar on the request before the protocol sees
    /// it (corelibs does it when the task is created), so they count as credentials.
    func testCookiesFromTheAppSessionsJarCountAsCredentials() async throws {
        // Given a logged-in user whose session cookie is in the shared jar the session uses
        let session = HTTPCookie(properties: [.name: "session", .value: "alice-\(UUID().uuidString)",
                                              .domain: "127.0.0.1", .path: "/"])!
        HTTPCookieStorage.shared.setCookie(session)
        defer { HTTPCookieStorage.shared.deleteCookie(session) }
        servePerCredential("/me", headers: [HTTPField("Cache-Control", "max-age=600")])
        // When the app (which sets no Cookie header itself) asks twice, logs out, and asks again
        let first = try await getText("/me")
        let second = try await getText("/me")
        HTTPCookieStorage.shared.deleteCookie(session)
        let afterLogout = try await getText("/me")
        // Then the personalised response was stored for the cookie's user and hit by it, and the
        // logged-out request got its own
        XCTAssertEqual(first, "body for -|session=\(session.value)")
        XCTAssertEqual(second, first)
        XCTAssertEqual(afterLogout, "body for -|-", "never the logged-in user's response")
        XCTAssertEqual(originMethods("/me").count, 2)
    }

    /// The cache's own upstream session must not add cookies of its own: an ephemeral app
    /// session's requests must not carry the shared jar's cookies (which the cache would not see,
    /// so it would store a personalised response as anonymous and serve it after a logout).
    func testUpstreamRequestsCarryOnlyTheAppSessionsCookies() async throws {
        // Given a cookie in the shared jar, and an app session with a jar of its own
        let shared = HTTPCookie(properties: [.name: "session", .value: "shared-\(UUID().uuidString)",
                                             .domain: "127.0.0.1", .path: "/"])!
        HTTPCookieStorage.shared.setCookie(shared)
        defer { HTTPCookieStorage.shared.deleteCookie(shared) }
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        CachingURLProtocol.inject(into: sessionConfiguration, using: configuration)
        let own = HTTPCookie(properties: [.name: "own", .value: "ephemeral", .domain: "127.0.0.1", .path: "/"])!
        let appSession = URLSession(configuration: sessionConfiguration)
        defer { appSession.invalidateAndCancel() }
        servePerCredential("/me", headers: [HTTPField("Cache-Control", "max-age=600")])
        servePerCredential("/you", headers: [HTTPField("Cache-Control", "max-age=600")])
        func text(_ path: String) async throws -> String {
            let (data, _) = try await appSession.data(from: origin.url(path))
            return String(decoding: data, as: UTF8.self)
        }
        // When it asks with an empty jar, then with a cookie in its own jar
        let anonymous = try await text("/me")
        let anonymousAgain = try await text("/me")
        sessionConfiguration.httpCookieStorage?.setCookie(own)
        let withOwnCookie = try await text("/you")
        let withOwnCookieAgain = try await text("/you")
        // Then the shared jar's cookie never left, and the session's own cookie did, as a credential
        XCTAssertEqual(anonymous, "body for -|-")
        XCTAssertEqual(anonymousAgain, anonymous)
        XCTAssertEqual(originMethods("/me").count, 1, "an anonymous response is stored")
        XCTAssertEqual(withOwnCookie, "body for -|own=ephemeral")
        XCTAssertEqual(withOwnCookieAgain, withOwnCookie)
        XCTAssertEqual(originMethods("/you").count, 1, "a response to a request with cookies is stored for their user")
        XCTAssertFalse(origin.requests.contains { $0.header("Cookie")?.contains(shared.value) == true })
    }

    /// A response that sets a cookie is stored (RFC 9111 §7.1) and replayed, but only in memory:
    /// the cookie's value never reaches a cache file, and the answer goes only to requests with
    /// the credentials it was fetched with.
    func testSetCookieResponseIsKeptInMemoryOnly() async throws {
        origin.handle("/login") { _ in
            .text("welcome", headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("Set-Cookie", "session=s3cr3t")])
        }
        let (_, first) = try await get("/login")
        XCTAssertEqual(first.value(forHTTPHeaderField: "Set-Cookie"), "session=s3cr3t")
        CachingTestCase.removeLoopbackCookies()   // the jar got it; the next request carries no cookie again
        let (_, replayed) = try await get("/login")
        XCTAssertEqual(replayed.value(forHTTPHeaderField: "Set-Cookie"), "session=s3cr3t", "the stored Set-Cookie is replayed")
        XCTAssertEqual(originMethods("/login"), ["GET"])
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data("s3cr3t".utf8)), [])
        let reopened = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: directory)
        XCTAssertNil(reopened.cachedResponse(for: request("/login")), "nothing of it on disk")
    }

    /// Stores the three kinds of answer kept in memory only, each with its own secret: a
    /// response with a `Set-Cookie` (through the protocol), one variant of a `Vary` resource that
    /// set a cookie beside one that did not (the record is written to disk for the other), and a
    /// response stored through the `URLCache` API with `.allowedInMemoryOnly`. Returns the secrets.
    private func storeMemoryOnlyAnswers() async throws -> [String] {
        origin.handle("/login") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600"), HTTPField("Set-Cookie", "session=c00kie-s3cr3t"),
                                     HTTPField("X-Token", "h3ader-s3cr3t")],
                           body: Data("b0dy-s3cr3t welcome".utf8))
        }
        origin.handle("/greeting") { request in
            let french = request.header("Accept-Language") == "fr"
            var headers = [HTTPField("Cache-Control", "max-age=600"), HTTPField("Vary", "Accept-Language")]
            if !french { headers.append(HTTPField("Set-Cookie", "visit=v4riant-s3cr3t")) }
            return OriginResponse(headers: headers, body: Data((french ? "bonjour" : "hello v4riant-b0dy").utf8))
        }
        let (_, login) = try await get("/login")
        XCTAssertEqual(login.value(forHTTPHeaderField: "Set-Cookie"), "session=c00kie-s3cr3t")
        CachingTestCase.removeLoopbackCookies()   // the next requests carry no cookie, as a new visitor's
        _ = try await get("/greeting", headers: ["Accept-Language": "en"])
        CachingTestCase.removeLoopbackCookies()
        _ = try await get("/greeting", headers: ["Accept-Language": "fr"])
        CachingTestCase.removeLoopbackCookies()
        let api = request("/api/me")
        let response = HTTPURLResponse(url: api.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=600", "X-Account": "acc0unt-s3cr3t"])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data("ap1-b0dy-s3cr3t".utf8), userInfo: nil,
                                                    storagePolicy: .allowedInMemoryOnly), for: api)
        // All four are answers from memory now.
        _ = try await get("/login")
        _ = try await get("/greeting", headers: ["Accept-Language": "en"])
        _ = try await get("/greeting", headers: ["Accept-Language": "fr"])
        XCTAssertEqual(originMethods("/login"), ["GET"])
        XCTAssertEqual(originMethods("/greeting"), ["GET", "GET"])
        XCTAssertEqual(cache.cachedResponse(for: api)?.data, Data("ap1-b0dy-s3cr3t".utf8))
        return ["c00kie-s3cr3t", "h3ader-s3cr3t", "b0dy-s3cr3t", "v4riant-s3cr3t", "v4riant-b0dy", "acc0unt-s3cr3t", "ap1-b0dy-s3cr3t"]
    }

    private func assertNoFileHolds(_ secrets: [String], file: StaticString = #filePath, line: UInt = #line) {
        for secret in secrets {
            XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(secret.utf8)), [], secret, file: file, line: line)
        }
    }

    /// `flushMemoryToDisk()` writes what memory holds and the disk lacks — never what is kept in
    /// memory only: no file holds a secret of those answers afterwards, while the variant that
    /// may be written is on disk.
    func testMemoryOnlyAnswersReachNoFileWhenMemoryIsFlushed() async throws {
        let secrets = try await storeMemoryOnlyAnswers()
        cache.waitUntilSettled()
        assertNoFileHolds(secrets)
        cache.flushMemoryToDisk()
        cache.waitUntilSettled()
        assertNoFileHolds(secrets)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data("bonjour".utf8)).count, 1, "the other variant is on disk")
        XCTAssertEqual(cache.statistics.memory.entryCount, 0)
        // And the memory-only answers are gone, not moved: the next requests reach the origin
        _ = try await get("/login")
        XCTAssertEqual(originMethods("/login"), ["GET", "GET"])
        XCTAssertNil(cache.cachedResponse(for: request("/api/me")))
    }

    /// A memory warning (UIKit's, posted by name as UIKit posts it; observed here on Linux too)
    /// runs the same move, off the posting thread: no file holds a secret of those answers once
    /// it settled.
    func testMemoryOnlyAnswersReachNoFileOnAMemoryWarning() async throws {
        cache.observeMemoryWarnings(true)
        let secrets = try await storeMemoryOnlyAnswers()
        NotificationCenter.default.post(name: CachingURLCache.memoryWarningNotification, object: nil)
        cache.waitUntilSettled()
        assertNoFileHolds(secrets)
        XCTAssertEqual(cache.statistics.memory.entryCount, 0, "the warning emptied memory")
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data("bonjour".utf8)).count, 1)
    }

    // MARK: Cache-Control private and no-store

    func testNoStoreIsNeverWrittenAndRemovesAnOlderCopy() async throws {
        // Given a stored response
        let old = Data("old copy \(UUID().uuidString)".utf8)
        origin.handle("/account") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: old) }
        _ = try await get("/account")
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.files(in: directory, containing: old).count, 1)
        // When a reload gets a no-store answer
        let new = Data("new copy \(UUID().uuidString)".utf8)
        origin.handle("/account") { _ in OriginResponse(headers: [HTTPField("Cache-Control", "no-store")], body: new) }
        let (data, _) = try await get("/account", cachePolicy: .reloadIgnoringLocalCacheData)
        XCTAssertEqual(data, new)
        // Then neither copy is on disk any more, and the next request goes to the origin
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.files(in: directory, containing: old), [])
        XCTAssertEqual(CacheFiles.files(in: directory, containing: new), [])
        _ = try await get("/account")
        XCTAssertEqual(originMethods("/account").count, 3)
    }

    func testNoStoreRequestIsNeitherAnsweredFromNorWrittenToTheCache() async throws {
        origin.handle("/r") { _ in .text("fresh \(UUID().uuidString)", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        let (stored, _) = try await get("/r")
        let (bypassed, _) = try await get("/r", headers: ["Cache-Control": "no-store"])
        XCTAssertNotEqual(bypassed, stored, "not answered from the cache")
        let (hit, _) = try await get("/r")
        XCTAssertEqual(hit, stored, "the no-store request's answer did not replace the stored one")
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.files(in: directory, containing: bypassed), [])
    }

    /// This is a private cache, as both presets say: `private` responses are stored, with
    /// credentials too (each for its user); with the opt-out, `private` is not `public`, so with
    /// credentials they are not.
    func testPrivateIsStoredByThisPrivateCacheAndWithCredentialsUnlessOptedOut() async throws {
        servePerCredential("/mine", headers: [HTTPField("Cache-Control", "private, max-age=600")])
        servePerCredential("/mine-too", headers: [HTTPField("Cache-Control", "private, max-age=600")])
        _ = try await getText("/mine")
        _ = try await getText("/mine")
        XCTAssertEqual(originMethods("/mine").count, 1, "stored without credentials")
        let signedIn = try await getText("/mine", ["Authorization": "Bearer a"])
        let again = try await getText("/mine", ["Authorization": "Bearer a"])
        XCTAssertEqual([signedIn, again], ["body for Bearer a|-", "body for Bearer a|-"])
        XCTAssertEqual(originMethods("/mine").count, 2, "stored with credentials, for them")

        var configuration = makeConfiguration()
        configuration.policy.storesCredentialedResponses = false
        installSession(configuration)
        _ = try await getText("/mine-too", ["Authorization": "Bearer a"])
        _ = try await getText("/mine-too", ["Authorization": "Bearer a"])
        XCTAssertEqual(originMethods("/mine-too").count, 2, "with the opt-out, not stored with credentials")
    }

    // MARK: Permissions

    func testCacheDirectoryIsOwnerOnlyWhateverTheUmask() async throws {
        // Given a permissive umask and a cache directory whose parents do not exist yet
        let previous = umask(0)
        defer { umask(previous) }
        let nested = directory.appendingPathComponent("a/b/cache")
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 32 << 20, directory: nested)
        installSession(makeConfiguration())
        origin.handle("/r") { _ in .text("x", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        // When something is stored
        _ = try await get("/r")
        cache.waitUntilSettled()
        // Then every directory the cache created is 0700 and every file 0600
        let files = CacheFiles.all(in: nested)
        XCTAssertTrue(files.contains { $0.hasSuffix("/journal") || $0.hasSuffix("/index") }, "\(files)")
        XCTAssertEqual(files.filter { $0.contains("/entries/") }.count, 1)
        for file in files { XCTAssertEqual(CacheFiles.mode(file), 0o600, file) }
        for created in [directory.appendingPathComponent("a"), directory.appendingPathComponent("a/b"), nested,
                        nested.appendingPathComponent("entries")] {
            XCTAssertEqual(CacheFiles.mode(created.path), 0o700, created.path)
        }
    }

    func testExistingSharedDirectoryStillKeepsEntriesOwnerOnly() async throws {
        // Given a cache directory the app created world-readable
        let shared = directory.appendingPathComponent("shared")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 32 << 20, directory: shared)
        installSession(makeConfiguration())
        origin.handle("/r") { _ in .text("x", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        _ = try await get("/r")
        cache.waitUntilSettled()
        // Then the entries directory and every file are still owner-only
        XCTAssertEqual(CacheFiles.mode(shared.appendingPathComponent("entries").path), 0o700)
        for file in CacheFiles.all(in: shared) { XCTAssertEqual(CacheFiles.mode(file), 0o600, file) }
    }

    // MARK: Deleting

    /// Stores `count` responses with recognisable bodies through the protocol and returns them.
    private func storeSecrets(_ count: Int, prefix: String = "/secret") async throws -> [(path: String, body: Data)] {
        var stored: [(String, Data)] = []
        for index in 0..<count {
            let body = Data("secret body \(index) \(UUID().uuidString)".utf8) + Data.pattern(2_000, seed: UInt8(index))
            let path = "\(prefix)\(index)"
            origin.handle(path) { _ in OriginResponse(headers: [HTTPField("Cache-Control", "max-age=600")], body: body) }
            _ = try await get(path)
            stored.append((path, body))
        }
        return stored
    }

    func testPurgeDeletesTheBytesFromDiskBeforeItReturns() async throws {
        // Given three stored responses on disk
        let secrets = try await storeSecrets(3)
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory).count, 3)
        // And a disk tier busy with other writes
        let busy = (0..<300).map { index in
            CachedURLResponse(response: HTTPURLResponse(url: origin.url("/busy\(index)"), statusCode: 200, httpVersion: "HTTP/1.1",
                                                        headerFields: ["Cache-Control": "max-age=600"])!,
                              data: Data.pattern(4_000, seed: UInt8(index % 251)))
        }
        for (index, response) in busy.enumerated() { cache.storeCachedResponse(response, for: request("/busy\(index)")) }
        // When one URL is purged
        cache.purge(url: origin.url(secrets[0].path))
        // Then, as soon as purge returns, its bytes are in no file, and its URL in none either
        XCTAssertEqual(CacheFiles.files(in: directory, containing: secrets[0].body.prefix(50)), [])
        XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(secrets[0].path.utf8)), [])
        XCTAssertNil(cache.cachedResponse(for: request(secrets[0].path)))
        // And the others are untouched
        XCTAssertEqual(CacheFiles.files(in: directory, containing: secrets[1].body.prefix(50)).count, 1)
        // And the next request for the purged URL goes to the origin
        _ = try await get(secrets[0].path)
        XCTAssertEqual(originMethods(secrets[0].path).count, 2)
    }

    func testRemoveAllDeletesEveryBodyFromDiskBeforeItReturns() async throws {
        // Given stored responses, some still being written
        let secrets = try await storeSecrets(20)
        // When everything is removed
        cache.removeAll()
        // Then, as soon as it returns, no entry file is left and no file holds any body
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [])
        for secret in secrets {
            XCTAssertEqual(CacheFiles.files(in: directory, containing: secret.body.prefix(50)), [], secret.path)
        }
        XCTAssertEqual(cache.currentMemoryUsage, 0)
        // And nothing comes back after the writes settle or after a restart
        cache.waitUntilSettled()
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [])
        let reopened = CachingURLCache(memoryCapacity: 0, diskCapacity: 32 << 20, directory: directory)
        reopened.waitUntilSettled()
        XCTAssertNil(reopened.cachedResponse(for: request(secrets[0].path)))
        XCTAssertEqual(reopened.statistics.disk.entryCount, 0)
    }

    func testURLCacheRemovalCallsDeleteTheBytesToo() async throws {
        let secrets = try await storeSecrets(2)
        cache.removeCachedResponse(for: request(secrets[0].path))
        XCTAssertEqual(CacheFiles.files(in: directory, containing: secrets[0].body.prefix(50)), [])
        cache.removeAllCachedResponses()
        XCTAssertEqual(CacheFiles.files(in: directory, containing: secrets[1].body.prefix(50)), [])
        XCTAssertEqual(CacheFiles.entryNames(in: directory), [])
    }

    // MARK: Logs

    func testNoCredentialReachesLogsEventsOrErrors() async throws {
        // Given requests carrying secrets, through every kind of outcome
        let token = "Bearer log-secret-\(UUID().uuidString)"
        let cookie = "session=log-cookie-\(UUID().uuidString)"
        let secrets = [token, cookie]
        let credentials = ["Authorization": token, "Cookie": cookie]
        origin.handle("/public") { _ in
            OriginResponse(headers: [HTTPField("Cache-Control", "public, max-age=60"), HTTPField("ETag", "\"v1\"")], body: Data("p".utf8))
        }
        origin.handle("/private") { _ in .text("q", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        var descriptions: [String] = []
        _ = try await get("/public", headers: credentials)          // fetched and stored
        _ = try await get("/public", headers: credentials)          // hit
        clock.advance(by: 120)
        let (_, revalidated) = try await get("/public", headers: credentials)  // revalidated
        descriptions.append("\(revalidated.allHeaderFields)")
        _ = try await get("/private", headers: credentials)         // fetched, not stored
        do {                                                          // only from the cache: not there
            _ = try await get("/nothing", headers: credentials, cachePolicy: .returnCacheDataDontLoad)
            XCTFail("expected an error")
        } catch {
            descriptions.append("\(error)")
            descriptions.append((error as NSError).userInfo.description)
        }
        origin.stop()                                                 // connection refused
        do {
            _ = try await get("/gone", headers: credentials)
            XCTFail("expected an error")
        } catch {
            descriptions.append("\(error)")
            descriptions.append((error as NSError).userInfo.description)
        }
        // Then no secret is in anything logged, in any event field, or in any error description
        XCTAssertGreaterThanOrEqual(events.count, 6)
        let eventText = events.map { String(reflecting: $0) }
        for secret in secrets {
            for text in logged.withLock({ $0 }) + eventText + descriptions {
                XCTAssertFalse(text.contains(secret), "a secret leaked into: \(text)")
            }
        }
        // And not in any file either (only a fingerprint of the credentials is stored)
        cache.waitUntilSettled()
        for secret in secrets {
            XCTAssertEqual(CacheFiles.files(in: directory, containing: Data(secret.utf8)), [])
        }
    }

    /// Documented behaviour, not a guarantee of secrecy: a secret in a URL (a query token) is
    /// part of the cache key, so it appears in events and in the key inside the entry file.
    func testURLQueryIsPartOfTheKeyInEvents() async throws {
        origin.handle("/q") { _ in .text("x", headers: [HTTPField("Cache-Control", "max-age=60")]) }
        _ = try await get("/q?token=abc123")
        XCTAssertEqual(events.last?.key, "GET " + origin.url("/q?token=abc123").absoluteString)
    }
}
