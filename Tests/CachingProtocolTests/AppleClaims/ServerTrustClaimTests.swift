#if canImport(Darwin)
import Foundation
import LoopbackOrigin
#if canImport(Security)
import Security
#endif
import XCTest
@testable import CachingProtocol

/// Foundation fact A14 and M1 of "What only a Mac can still prove": a server-trust challenge
/// goes to the delegate of the session that opened the connection — the cache's upstream
/// session — and reaches the app's delegate only through the layer's forwarded challenge; a
/// pinning delegate named to `inject(into:using:delegate:)` gets it, and its answer decides the
/// connection (accepted: the answer; cancelled: the task fails as without the layer and nothing
/// is stored). Without a delegate the system's evaluation rejects the origin's certificate with
/// and without the layer alike.
///
/// The origin is nginx serving HTTPS on 127.0.0.1 with a self-signed certificate made for the
/// run by `openssl` (`NginxServer.TLSFiles.selfSigned`): offline, and trusted by nothing but a
/// delegate that pins it. nginx is a child process, so this runs on macOS only (with
/// `brew install nginx`; skipped there without nginx unless `CACHINGPROTOCOL_REQUIRE_NGINX=1`);
/// on iOS and tvOS it is one skipped test. Not covered here: a stale-while-revalidate answer's
/// revalidation judged by the delegate (nginx sends no `stale-while-revalidate`; the engine test
/// `ServerTrustEngineTests` checks it at the seam).
final class ServerTrustClaimTests: CachingTestCase {
    #if os(macOS)
    private var nginx: NginxServer!
    private var tlsDirectory: URL!
    private var pinned = Data()

    override func setUpWithError() throws {
        tlsDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("ServerTrustClaims-\(UUID().uuidString)")
        do {
            let tls = try NginxServer.TLSFiles.selfSigned(in: tlsDirectory)
            pinned = try tls.certificateDER()
            nginx = try NginxServer(tls: tls)
        } catch {
            try? FileManager.default.removeItem(at: tlsDirectory)
            if ProcessInfo.processInfo.environment["CACHINGPROTOCOL_REQUIRE_NGINX"] == "1" {
                XCTFail("nginx with TLS is required here (CACHINGPROTOCOL_REQUIRE_NGINX=1): \(error)")
                throw error
            }
            throw XCTSkip("nginx serving HTTPS could not be started (brew install nginx): \(error)")
        }
        try super.setUpWithError()
        // nginx's Date is real time: start the cache's clock there so ages compute sanely.
        clock = ManualClock(Date())
        installSession(makeConfiguration())
        try nginx.write(Data("pinned body".utf8), to: "pinned.txt")
    }

    override func tearDownWithError() throws {
        nginx?.stop()
        if let tlsDirectory { try? FileManager.default.removeItem(at: tlsDirectory) }
        try super.tearDownWithError()
    }

    /// Loads `/pinned.txt` through a new ephemeral session with `delegate`, with the layer or
    /// without; the status and body, or the `URLError` code. With the layer, `delegate` is named
    /// to `inject` unless `named` is false (`inject(into:using:)`, the delegate unknown to it).
    private func load(delegate: PinningDelegate?, withLayer: Bool, named: Bool = true) async -> (result: String, cacheStatus: String?) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        if withLayer, named { CachingURLProtocol.inject(into: configuration, using: self.configuration, delegate: delegate) }
        if withLayer, !named { CachingURLProtocol.inject(into: configuration, using: self.configuration) }
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        do {
            let (data, response) = try await session.data(from: nginx.url("/pinned.txt"))
            let http = response as? HTTPURLResponse
            return ("\(http?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))", http?.value(forHTTPHeaderField: "Cache-Status"))
        } catch let error as URLError {
            return ("URLError \(error.code.rawValue)", nil)
        } catch {
            return ("\(error)", nil)
        }
    }

    func testA14_aPinningDelegateNamedToInjectGetsTheCachesServerTrustChallengeAndAcceptsIt() async throws {
        let without = PinningDelegate(pinned: pinned, accepts: true)
        let withoutResult = await load(delegate: without, withLayer: false)
        XCTAssertEqual(withoutResult.result, "200 pinned body")
        XCTAssertEqual(Set(without.judgements), ["server trust 127.0.0.1 pinned"])

        let with = PinningDelegate(pinned: pinned, accepts: true)
        let withResult = await load(delegate: with, withLayer: true)
        XCTAssertEqual(withResult.result, withoutResult.result, "accepted through the layer")
        XCTAssertNotNil(withResult.cacheStatus, "the layer answered")
        XCTAssertEqual(Set(with.judgements), ["server trust 127.0.0.1 pinned"],
                       "the upstream connection's challenge reached the app's delegate")
        cache.waitUntilSettled()
        XCTAssertEqual(storedEntry(at: nginx.url("/pinned.txt"))?.body, Data("pinned body".utf8),
                       "stored, in the delegate's partition: where the rejecting tests look for it")
    }

    func testA14_aDelegateThatRejectsTheCertificateDecidesTheCachesConnection() async throws {
        let without = PinningDelegate(pinned: pinned, accepts: false)
        let withoutResult = await load(delegate: without, withLayer: false)
        XCTAssertEqual(withoutResult.result, "URLError \(URLError.cancelled.rawValue)")

        let with = PinningDelegate(pinned: pinned, accepts: false)
        let withResult = await load(delegate: with, withLayer: true)
        XCTAssertEqual(withResult.result, withoutResult.result, "the task fails as without the layer")
        XCTAssertFalse(with.judgements.isEmpty, "the delegate judged the upstream connection")
        cache.waitUntilSettled()
        XCTAssertNil(storedEntry(at: nginx.url("/pinned.txt")), "nothing stored, in any partition")
    }

    /// A pinning delegate the app did not name to `inject` (`inject(into:using:)`, as the README's
    /// first example has it): the layer cannot see it, treats it as a judge (the fail-closed
    /// default), and the upstream connection's challenge still reaches it through the load.
    /// Accepting, the app gets the answer; rejecting, the task fails as without the layer and
    /// nothing is stored.
    func testA14_aPinningDelegateThatWasNotNamedStillJudgesTheCachesConnection() async throws {
        let without = PinningDelegate(pinned: pinned, accepts: true)
        let withoutResult = await load(delegate: without, withLayer: false)
        XCTAssertEqual(withoutResult.result, "200 pinned body")

        let accepting = PinningDelegate(pinned: pinned, accepts: true)
        let accepted = await load(delegate: accepting, withLayer: true, named: false)
        XCTAssertEqual(accepted.result, withoutResult.result, "accepted through the layer")
        XCTAssertNotNil(accepted.cacheStatus, "the layer answered")
        XCTAssertEqual(Set(accepting.judgements), ["server trust 127.0.0.1 pinned"],
                       "the upstream connection's challenge reached the delegate nobody named")
        cache.waitUntilSettled()
        XCTAssertNotNil(storedEntry(at: nginx.url("/pinned.txt")), "stored, for sessions judged the same way")
        cache.removeAll()

        let rejecting = PinningDelegate(pinned: pinned, accepts: false)
        let rejected = await load(delegate: rejecting, withLayer: true, named: false)
        XCTAssertEqual(rejected.result, "URLError \(URLError.cancelled.rawValue)", "the task fails as without the layer")
        XCTAssertFalse(rejecting.judgements.isEmpty, "the delegate judged the upstream connection")
        cache.waitUntilSettled()
        XCTAssertNil(storedEntry(at: nginx.url("/pinned.txt")), "nothing stored, in any partition")
    }

    func testA14_withoutADelegateTheSystemRejectsTheSelfSignedCertificateWithAndWithoutTheLayer() async throws {
        let withoutResult = await load(delegate: nil, withLayer: false)
        XCTAssertEqual(withoutResult.result, "URLError \(URLError.serverCertificateUntrusted.rawValue)")
        let withResult = await load(delegate: nil, withLayer: true)
        XCTAssertEqual(withResult.result, withoutResult.result)
    }
    #else
    func testA14_needsAnHTTPSOriginOnlyMacOSCanStart() throws {
        throw XCTSkip("the HTTPS origin is nginx, a child process, which this platform cannot start: run on macOS")
    }
    #endif
}

#if os(macOS)
/// A session delegate that pins one certificate: a server-trust challenge whose leaf certificate
/// is `pinned` is accepted when `accepts`, every other one cancelled. Records what it judged.
private final class PinningDelegate: NSObject, URLSessionDelegate, Sendable {
    let pinned: Data
    let accepts: Bool
    private let judged = Locked<[String]>([])

    init(pinned: Data, accepts: Bool) {
        self.pinned = pinned
        self.accepts = accepts
    }

    var judgements: [String] { judged.withLock { $0 } }

    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
              let trust = challenge.protectionSpace.serverTrust else {
            return completionHandler(.performDefaultHandling, nil)
        }
        let chain = SecTrustCopyCertificateChain(trust) as? [SecCertificate] ?? []
        let matches = chain.first.map { SecCertificateCopyData($0) as Data } == pinned
        judged.withLock { $0.append("server trust \(challenge.protectionSpace.host) \(matches ? "pinned" : "other")") }
        if accepts && matches {
            completionHandler(.useCredential, URLCredential(trust: trust))
        } else {
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
    }
}
#endif
#endif
