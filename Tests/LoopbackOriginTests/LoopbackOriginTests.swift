import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

@testable import LoopbackOrigin

final class LoopbackOriginTests: XCTestCase {
    func testURLsPointAtTheLoopbackPort() throws {
        let origin = try LoopbackOrigin()
        XCTAssertGreaterThan(origin.port, 0)
        XCTAssertEqual(origin.baseURL.absoluteString, "http://127.0.0.1:\(origin.port)")
        XCTAssertEqual(origin.url("/a?b=1").absoluteString, "http://127.0.0.1:\(origin.port)/a?b=1")
        XCTAssertEqual(origin.url("a").absoluteString, "http://127.0.0.1:\(origin.port)/a")
        XCTAssertTrue(origin.isRunning)
    }

    func testRoutesByExactPathIgnoringQueryAndAnswers404Otherwise() async throws {
        let origin = try LoopbackOrigin()
        origin.handle("/hello") { request in
            .text("hello \(request.query ?? "-")", headers: [HTTPField("X-Route", "hello")])
        }
        let session = makeSession()

        let (body, response) = try await fetch(session, origin.url("/hello?name=x"))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "hello name=x")
        XCTAssertEqual(response.value(forHTTPHeaderField: "X-Route"), "hello")
        XCTAssertEqual(response.value(forHTTPHeaderField: "Content-Type"), "text/plain; charset=utf-8")

        let (missingBody, missing) = try await fetch(session, origin.url("/hello/more"))
        XCTAssertEqual(missing.statusCode, 404)
        XCTAssertFalse(missingBody.isEmpty, "a 404 has a short body")

        origin.removeRoute("/hello")
        let (_, removed) = try await fetch(session, origin.url("/hello"))
        XCTAssertEqual(removed.statusCode, 404)
        XCTAssertEqual(origin.requestCount(path: "/hello"), 2)
        XCTAssertEqual(origin.requestCount(), 3)
    }

    func testLogsMethodTargetHeadersAndBodyBeforeTheHandlerRuns() async throws {
        let origin = try LoopbackOrigin()
        let seenByHandler = LockedBox<[Int]>([])
        origin.handle("/echo") { [weak origin] request in
            // The request is already in the log while the handler runs.
            seenByHandler.withLock { $0.append(origin?.requests.count ?? -1) }
            return OriginResponse(status: 201, body: request.body)
        }
        let payload = Data("name=value&x=1".utf8)
        let (body, response) = try await fetch(
            makeSession(), origin.url("/echo?x=1"), method: "POST",
            headers: ["X-Test": "yes", "Content-Type": "application/x-www-form-urlencoded"], body: payload)
        XCTAssertEqual(response.statusCode, 201)
        XCTAssertEqual(body, payload)
        XCTAssertEqual(seenByHandler.withLock { $0 }, [1])

        let logged = try XCTUnwrap(origin.requests.first)
        XCTAssertEqual(logged.method, "POST")
        XCTAssertEqual(logged.target, "/echo?x=1")
        XCTAssertEqual(logged.path, "/echo")
        XCTAssertEqual(logged.query, "x=1")
        XCTAssertEqual(logged.header("x-test"), "yes")
        XCTAssertEqual(logged.header("Content-Length"), "\(payload.count)")
        XCTAssertEqual(logged.body, payload)
        XCTAssertEqual(origin.requests(to: "/echo").count, 1)
        XCTAssertEqual(origin.requestCount(method: "POST", path: "/echo"), 1)
        XCTAssertEqual(origin.requestCount(method: "GET"), 0)
    }

    func testHeadersKeepWireOrderAndRepeatedFieldsJoin() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/h") { _ in OriginResponse(status: 204) }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /h HTTP/1.1\r\nHost: x\r\nAccept: a\r\nX-Multi: 1\r\naccept: b\r\nX-Multi:  2 \r\n\r\n")
        XCTAssertEqual(try connection.readResponse().status, 204)
        let request = try XCTUnwrap(origin.requests.first)
        XCTAssertEqual(request.headers.map(\.name), ["Host", "Accept", "X-Multi", "accept", "X-Multi"])
        XCTAssertEqual(request.header("ACCEPT"), "a, b")
        XCTAssertEqual(request.header("x-multi"), "1, 2")
        XCTAssertNil(request.header("Missing"))
        XCTAssertNil(request.query)
        XCTAssertEqual(request.version, "HTTP/1.1")
    }

    func testDecodesAChunkedUpload() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/upload") { request in .text("got \(request.body.count)") }
        let connection = try RawConnection(port: origin.port)
        try connection.send(
            "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5\r\nhello\r\n" + "1;ext=1\r\n \r\n" + "6\r\nworld!\r\n" + "0\r\nX-Trailer: t\r\n\r\n")
        let response = try connection.readResponse()
        XCTAssertEqual(response.text, "got 12")
        XCTAssertEqual(origin.requests.first?.body, Data("hello world!".utf8))

        // The connection is still usable after the chunked body.
        try connection.send("GET /upload HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "got 0")
        XCTAssertEqual(origin.connectionsAccepted, 1)
    }

    func testAnswers100ContinueBeforeReadingTheBody() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/upload") { request in .text(String(decoding: request.body, as: UTF8.self)) }
        let connection = try RawConnection(port: origin.port)
        try connection.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().status, 100)
        try connection.send("data")
        let response = try connection.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.text, "data")
    }

    func testKeepsTheConnectionAliveAcrossRequests() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/a") { _ in .text("a") }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = try connection.readResponse()
        XCTAssertNil(first.header("Connection"))
        try connection.send("GET /a?again HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "a")

        XCTAssertEqual(origin.connectionsAccepted, 1)
        let ids = origin.requests.map(\.connectionID)
        XCTAssertEqual(ids.count, 2)
        XCTAssertEqual(Set(ids).count, 1)

        // Connection: close is honoured: the response says so and the server closes.
        try connection.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().header("Connection"), "close")
        XCTAssertTrue(try connection.isClosedByServer())
    }

    /// Three connections held at a gate are three open connections at once; when the gate
    /// opens each gets its answer, and a connection the client closes is no longer open.
    func testCountsOpenConnectionsAndTheirPeakWhileAGateHoldsTheAnswers() throws {
        let origin = try LoopbackOrigin()
        let gate = OriginGate()
        defer { gate.open() }
        origin.handle("/held") { _ in
            gate.pass()
            return .text("held")
        }
        XCTAssertEqual(origin.openConnections, 0)
        let connections = try (0..<3).map { _ in try RawConnection(port: origin.port) }
        for connection in connections { try connection.send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n") }
        XCTAssertTrue(gate.waitUntilWaiting(3, timeout: 10), "three handlers wait at the gate")
        XCTAssertEqual(gate.waitingCount, 3)
        XCTAssertEqual(origin.openConnections, 3)
        XCTAssertEqual(origin.peakOpenConnections, 3)

        gate.open()
        for connection in connections { XCTAssertEqual(try connection.readResponse().text, "held") }
        XCTAssertEqual(gate.waitingCount, 0)
        for connection in connections {
            try connection.send("GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            XCTAssertEqual(try connection.readResponse().text, "held", "an open gate lets later handlers through")
            XCTAssertTrue(try connection.isClosedByServer())
        }
        // The server forgets a connection before it closes it: once the client saw it closed, it is.
        XCTAssertEqual(origin.openConnections, 0, "closed connections are not open")
        XCTAssertEqual(origin.peakOpenConnections, 3, "the peak stays until the log is reset")
        origin.resetLog()
        XCTAssertEqual(origin.peakOpenConnections, 0, "a reset starts the peak from the connections open then")
    }

    func testAnswersPipelinedRequestsInOrder() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/p") { request in .text(request.query ?? "") }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /p?1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p?2 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "1")
        XCTAssertEqual(try connection.readResponse().text, "2")
    }

    func testHTTP10ClosesUnlessKeepAliveIsAsked() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/a") { _ in .text("a") }

        let plain = try RawConnection(port: origin.port)
        try plain.send("GET /a HTTP/1.0\r\n\r\n")
        XCTAssertEqual(try plain.readResponse().header("Connection"), "close")
        XCTAssertTrue(try plain.isClosedByServer())

        let keepAlive = try RawConnection(port: origin.port)
        try keepAlive.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(try keepAlive.readResponse().header("Connection"), "keep-alive")
        try keepAlive.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(try keepAlive.readResponse().text, "a")
        XCTAssertEqual(origin.connectionsAccepted, 2)
    }

    func testURLSessionReusesTheConnection() async throws {
        let origin = try LoopbackOrigin()
        origin.handle("/a") { _ in .text("a") }
        let session = makeSession()
        for _ in 0..<3 {
            let (_, response) = try await fetch(session, origin.url("/a"))
            XCTAssertEqual(response.statusCode, 200)
        }
        XCTAssertEqual(origin.connectionsAccepted, 1)
    }

    func testMalformedRequestGets400AndClose() throws {
        let origin = try LoopbackOrigin()
        let connection = try RawConnection(port: origin.port)
        try connection.send("NONSENSE\r\n\r\n")
        let response = try connection.readResponse()
        XCTAssertEqual(response.status, 400)
        XCTAssertTrue(try connection.isClosedByServer())
        XCTAssertEqual(origin.requests.count, 0)
    }

    func testChunkedResponseArrivesInManyChunksAndWhole() async throws {
        let origin = try LoopbackOrigin()
        let payload = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        origin.handle("/big") { _ in OriginResponse(body: payload, transfer: .chunked(chunkSize: 1_000)) }

        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        let raw = try connection.readResponse()
        XCTAssertEqual(raw.header("Transfer-Encoding"), "chunked")
        XCTAssertNil(raw.header("Content-Length"))
        XCTAssertEqual(raw.chunkCount, 10)
        XCTAssertEqual(Data(raw.body), payload)

        let (body, response) = try await fetch(makeSession(), origin.url("/big"))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(body, payload)

        // HEAD of a chunked response: the header, no body; the connection stays in sync.
        try connection.send("HEAD /big HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse(forHead: true).header("Transfer-Encoding"), "chunked")
        XCTAssertEqual(Data(try connection.readResponse().body), payload)
    }

    /// A body larger than the socket's buffers, sent from its own storage in one message with
    /// the head (`POSIXSocket.sendAll(_:_:_:)`): every byte arrives once, in order, after the
    /// head, on a connection that stays usable, and the counters say so.
    func testALargeBodyArrivesWholeAfterItsHeadAndIsCounted() throws {
        let origin = try LoopbackOrigin()
        let payload = Data((0..<(12 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) })
        origin.handle("/large") { _ in OriginResponse(body: payload) }

        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /large HTTP/1.1\r\nHost: x\r\n\r\nGET /large HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in 0..<2 {
            let raw = try connection.readResponse()
            XCTAssertEqual(raw.header("Content-Length"), String(payload.count))
            XCTAssertTrue(Data(raw.body) == payload, "the body arrived changed")
        }
        XCTAssertEqual(origin.bodyBytesSent, 2 * payload.count)
        XCTAssertGreaterThan(origin.totalBytesSent, 2 * payload.count)
    }

    func testHeadAnd304And204NeverCarryABody() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/h") { request in
            OriginResponse(status: Int(request.query ?? "200")!, body: Data("0123456789".utf8))
        }
        let connection = try RawConnection(port: origin.port)
        try connection.send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try connection.readResponse(forHead: true)
        XCTAssertEqual(head.header("Content-Length"), "10")
        try connection.send("GET /h?304 HTTP/1.1\r\nHost: x\r\n\r\n")
        let notModified = try connection.readResponse()
        XCTAssertEqual(notModified.status, 304)
        XCTAssertNil(notModified.header("Content-Length"))
        try connection.send("GET /h?204 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().status, 204)
        // Had any body been sent above, this response would not parse as the next one.
        try connection.send("GET /h HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().text, "0123456789")
        XCTAssertEqual(origin.bodyBytesSent, 10)
    }

    func testDateHeaderComesFromTheClockAndCanBeOmitted() throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 784_111_777))
        let origin = try LoopbackOrigin(now: clock.read)
        origin.handle("/dated") { _ in OriginResponse() }
        origin.handle("/undated") { _ in OriginResponse(addsDateHeader: false) }
        origin.handle("/own") { _ in OriginResponse(headers: [HTTPField("date", "Mon, 07 Nov 1994 08:49:37 GMT")]) }
        let connection = try RawConnection(port: origin.port)

        try connection.send("GET /dated HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().header("Date"), "Sun, 06 Nov 1994 08:49:37 GMT")
        clock.advance(by: 61)
        try connection.send("GET /dated HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().header("Date"), "Sun, 06 Nov 1994 08:50:38 GMT")
        XCTAssertEqual(origin.requests.last?.receivedAt, clock.now)

        try connection.send("GET /undated HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertNil(try connection.readResponse().header("Date"))

        try connection.send("GET /own HTTP/1.1\r\nHost: x\r\n\r\n")
        let own = try connection.readResponse()
        XCTAssertEqual(own.count(of: "Date"), 1)
        XCTAssertEqual(own.header("Date"), "Mon, 07 Nov 1994 08:49:37 GMT")
    }

    func testServerWritesItsOwnFraming() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/f") { _ in
            OriginResponse(
                headers: [HTTPField("Content-Length", "999"), HTTPField("Transfer-Encoding", "gzip")],
                body: Data("abc".utf8))
        }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try connection.readResponse()
        XCTAssertEqual(response.header("Content-Length"), "3")
        XCTAssertNil(response.header("Transfer-Encoding"))
        XCTAssertEqual(response.text, "abc")
    }

    func testCountsBytesAndResetsTheLog() throws {
        let origin = try LoopbackOrigin()
        let payload = Data(repeating: 0x61, count: 1_234)
        origin.handle("/bytes") { _ in OriginResponse(body: payload) }
        origin.handle("/chunks") { _ in OriginResponse(body: payload, transfer: .chunked(chunkSize: 100)) }
        let connection = try RawConnection(port: origin.port)

        try connection.send("GET /bytes HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = try connection.readResponse()
        XCTAssertEqual(origin.bodyBytesSent, 1_234)
        XCTAssertEqual(origin.totalBytesSent, first.wireByteCount)

        try connection.send("GET /chunks HTTP/1.1\r\nHost: x\r\n\r\n")
        let second = try connection.readResponse()
        XCTAssertEqual(second.chunkCount, 13)
        XCTAssertEqual(origin.bodyBytesSent, 2 * 1_234, "chunk framing is not body")
        XCTAssertEqual(origin.totalBytesSent, first.wireByteCount + second.wireByteCount)

        origin.resetLog()
        XCTAssertEqual(origin.requests.count, 0)
        XCTAssertEqual(origin.bodyBytesSent, 0)
        XCTAssertEqual(origin.totalBytesSent, 0)
        XCTAssertEqual(origin.connectionsAccepted, 0)

        try connection.send("GET /bytes HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try connection.readResponse()
        XCTAssertEqual(origin.requests.count, 1)
        XCTAssertEqual(origin.requests.first?.connectionID, 1)
        XCTAssertEqual(origin.bodyBytesSent, 1_234)
    }
}
