import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

@testable import LoopbackOrigin

#if os(macOS) || os(Linux)
/// Integration tests against a real nginx. Without nginx they are skipped, except with
/// `CACHINGPROTOCOL_REQUIRE_NGINX=1` (set by `.ci/run`, which installs nginx-light), where they
/// fail. Not `CI`, which hosted runners set without installing nginx. macOS and Linux only.
final class NginxServerTests: XCTestCase {
    private func startNginx(tls: NginxServer.TLSFiles? = nil) throws -> NginxServer {
        do {
            return try NginxServer(tls: tls)
        } catch {
            if ProcessInfo.processInfo.environment["CACHINGPROTOCOL_REQUIRE_NGINX"] == "1" {
                XCTFail("nginx is required here (CACHINGPROTOCOL_REQUIRE_NGINX=1; .ci/run installs nginx-light): \(error)")
                throw error
            }
            throw XCTSkip("nginx could not be started, skipping the nginx tests (install nginx-light or nginx to run them): \(error)")
        }
    }

    func testServesAFileWithETagAndLastModified() async throws {
        let nginx = try startNginx()
        let modified = Date(timeIntervalSince1970: 1_600_000_000)  // Sun, 13 Sep 2020 12:26:40 GMT
        let json = Data("{\"items\":[1,2,3]}".utf8)
        try nginx.write(json, to: "feed.json", modified: modified)
        try nginx.write(Data([0x89, 0x50, 0x4E, 0x47]), to: "img/a.png")

        let session = makeSession()
        let (body, response) = try await fetch(session, nginx.url("/feed.json?page=1"))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(body, json)
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Type"), "application/json")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Last-Modified"), "Sun, 13 Sep 2020 12:26:40 GMT")
        // nginx's ETag: hex mtime and hex size.
        XCTAssertEqual(response.value(forHTTPHeaderField: "ETag"), "\"5f5e1000-\(String(json.count, radix: 16))\"")

        let (_, png) = try await fetch(session, nginx.url("/img/a.png"))
        XCTAssertEqual(png.value(forHTTPHeaderField: "Content-Type"), "image/png")
        let (_, missing) = try await fetch(session, nginx.url("/nope.json"))
        XCTAssertEqual(missing.statusCode, 404)

        let log = nginx.accessLog(waitingFor: 3)
        XCTAssertEqual(log.count, 3)
        XCTAssertEqual(log.first, NginxLogLine(
            method: "GET", uri: "/feed.json?page=1", status: 200, bodyBytes: json.count,
            connection: log.first?.connection ?? 0, connectionRequest: 1))
        XCTAssertEqual(log.first?.path, "/feed.json")
        XCTAssertEqual(log.map(\.status), [200, 200, 404])
        XCTAssertEqual(Set(log.map(\.connection)).count, 1, "URLSession keeps the connection alive")
        XCTAssertEqual(log.map(\.connectionRequest), [1, 2, 3])
    }

    func testConditionalRequestsGet304AndAreLogged() async throws {
        let nginx = try startNginx()
        try nginx.write(Data("hello".utf8), to: "a.txt", modified: Date(timeIntervalSince1970: 1_600_000_000))
        let session = makeSession()
        let (_, first) = try await fetch(session, nginx.url("/a.txt"))
        let etag = try XCTUnwrap(first.value(forHTTPHeaderField: "ETag"))
        let lastModified = try XCTUnwrap(first.value(forHTTPHeaderField: "Last-Modified"))

        let (body, byETag) = try await fetch(session, nginx.url("/a.txt"), headers: ["If-None-Match": etag])
        XCTAssertEqual(byETag.statusCode, 304)
        XCTAssertTrue(body.isEmpty)
        XCTAssertEqual(byETag.value(forHTTPHeaderField: "ETag"), etag)

        let (_, byDate) = try await fetch(session, nginx.url("/a.txt"), headers: ["If-Modified-Since": lastModified])
        XCTAssertEqual(byDate.statusCode, 304)

        let (_, head) = try await fetch(session, nginx.url("/a.txt"), method: "HEAD", headers: ["If-None-Match": etag])
        XCTAssertEqual(head.statusCode, 304)

        // Changing the file changes the validators: the old ETag gets the new body.
        try nginx.write(Data("hello, world".utf8), to: "a.txt", modified: Date(timeIntervalSince1970: 1_600_000_100))
        let (newBody, changed) = try await fetch(session, nginx.url("/a.txt"), headers: ["If-None-Match": etag])
        XCTAssertEqual(changed.statusCode, 200)
        XCTAssertEqual(newBody, Data("hello, world".utf8))
        XCTAssertNotEqual(changed.value(forHTTPHeaderField: "ETag"), etag)

        let log = nginx.accessLog(waitingFor: 5)
        XCTAssertEqual(log.map(\.status), [200, 304, 304, 304, 200])
        XCTAssertEqual(log.map(\.method), ["GET", "GET", "GET", "HEAD", "GET"])
        XCTAssertEqual(log[1].ifNoneMatch, etag, "quotes survive the log's escaping")
        XCTAssertEqual(log[1].bodyBytes, 0)
        XCTAssertNil(log[1].ifModifiedSince)
        XCTAssertEqual(log[2].ifModifiedSince, lastModified)
        XCTAssertNil(log[2].ifNoneMatch)
        XCTAssertEqual(log[4].bodyBytes, 12)
    }

    func testStopTerminatesNginxAndRemovesItsDirectory() throws {
        let nginx = try startNginx()
        let directory = nginx.directory
        let pid = try XCTUnwrap(nginx.processIdentifier)
        let pidFile = try String(contentsOf: directory.appendingPathComponent("nginx.pid"), encoding: .utf8)
        XCTAssertEqual(pidFile.trimmingCharacters(in: .whitespacesAndNewlines), "\(pid)", "the pid file is there once init returns")
        XCTAssertTrue(nginx.isRunning)
        XCTAssertFalse(connectionIsRefused(port: nginx.port))

        nginx.stop()
        nginx.stop()  // idempotent
        XCTAssertFalse(nginx.isRunning)
        XCTAssertNil(nginx.processIdentifier)
        XCTAssertTrue(connectionIsRefused(port: nginx.port))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path))
        XCTAssertNotEqual(kill(pid, 0), 0, "the nginx process is gone")
    }

    func testDeinitStopsNginx() throws {
        var nginx: NginxServer? = try startNginx()
        let port = nginx!.port
        let directory = nginx!.directory
        nginx = nil
        XCTAssertTrue(connectionIsRefused(port: port))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path))
    }

    /// With TLS files, nginx serves HTTPS with that certificate: `openssl s_client` (a client
    /// that checks nothing) gets the certificate made for the test and the file over TLS. The
    /// Apple claim tests pin this certificate (AppleClaims/ServerTrustClaimTests).
    func testServesHTTPSWithTheGivenCertificate() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let tls = try NginxServer.TLSFiles.selfSigned(in: directory)
        let nginx = try startNginx(tls: tls)
        XCTAssertEqual(nginx.baseURL.scheme, "https")
        try nginx.write(Data("hello over TLS".utf8), to: "hello.txt")

        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        client.arguments = ["s_client", "-connect", "127.0.0.1:\(nginx.port)", "-showcerts", "-ign_eof"]
        let input = Pipe()
        let output = Pipe()
        client.standardInput = input
        client.standardOutput = output
        client.standardError = FileHandle.nullDevice
        try client.run()
        input.fileHandleForWriting.write(Data("GET /hello.txt HTTP/1.0\r\nHost: localhost\r\n\r\n".utf8))
        try input.fileHandleForWriting.close()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        client.waitUntilExit()

        let certificate = try String(contentsOf: tls.certificate, encoding: .utf8)
        let firstLine = try XCTUnwrap(certificate.split(separator: "\n").first { !$0.hasPrefix("-----") })
        XCTAssertTrue(printed.contains(firstLine), "the server's certificate is the one made for the test: \(printed.suffix(2_000))")
        XCTAssertTrue(printed.contains("HTTP/1.1 200 OK"), String(printed.suffix(2_000)))
        XCTAssertTrue(printed.contains("\r\n\r\nhello over TLS"), "the file, over TLS: \(printed.suffix(300))")
        XCTAssertEqual(try tls.certificateDER().prefix(1), Data([0x30]), "DER: a SEQUENCE")
    }

    func testRejectsPathsOutsideTheDocumentRoot() throws {
        let nginx = try startNginx()
        XCTAssertThrowsError(try nginx.write(Data(), to: "../escape.txt"))
        XCTAssertThrowsError(try nginx.write(Data(), to: "/"))
    }

    func testParsesEscapedLogLines() {
        let line = NginxLogLine(parsing: "GET\t/a?b=\\x22c\\x22\t304\t0\t\\x22v1\\x22, W/\\x22v2\\x22\t-\t7\t2")
        XCTAssertEqual(line, NginxLogLine(
            method: "GET", uri: "/a?b=\"c\"", status: 304, bodyBytes: 0, ifNoneMatch: "\"v1\", W/\"v2\"",
            ifModifiedSince: nil, connection: 7, connectionRequest: 2))
        XCTAssertNil(NginxLogLine(parsing: "garbage"))
    }
}
#else
final class NginxServerTests: XCTestCase {
    func testAgainstNginx() throws {
        throw XCTSkip("nginx runs as a child process, and this platform cannot start one")
    }
}
#endif
