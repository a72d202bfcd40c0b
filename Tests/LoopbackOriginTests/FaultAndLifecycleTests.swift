import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

@testable import LoopbackOrigin

final class FaultAndLifecycleTests: XCTestCase {
    private let payload = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0) })

    func testCloseAfterBodyBytesDeclaresTheFullLengthThenDies() async throws {
        let origin = try LoopbackOrigin()
        let body = payload
        origin.handle("/cut") { _ in OriginResponse(body: body, fault: .closeAfterBodyBytes(100)) }

        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /cut HTTP/1.1\r\nHost: x\r\n\r\n")
        let wire = try connection.readToEnd()
        let text = String(decoding: wire, as: UTF8.self)
        XCTAssertTrue(text.contains("Content-Length: 1000\r\n"), text)
        let headEnd = try XCTUnwrap(text.range(of: "\r\n\r\n"))
        XCTAssertEqual(wire.count - text.utf8.distance(from: text.startIndex, to: headEnd.upperBound), 100)
        XCTAssertEqual(origin.bodyBytesSent, 100)

        do {
            let (data, _) = try await fetch(makeSession(), origin.url("/cut"))
            XCTFail("a truncated body must fail the task, got \(data.count) bytes")
        } catch {}
        XCTAssertGreaterThanOrEqual(origin.requestCount(path: "/cut"), 2)
    }

    func testCloseAfterBodyBytesWithChunkedTransferStopsBeforeTheLastChunk() throws {
        let origin = try LoopbackOrigin()
        let body = payload
        origin.handle("/cut") { _ in
            OriginResponse(body: body, transfer: .chunked(chunkSize: 50), fault: .closeAfterBodyBytes(120))
        }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /cut HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = String(decoding: try connection.readToEnd(), as: UTF8.self)
        // Chunks of 0x32 (50), 0x32 and 0x14 (20) bytes, and no last-chunk.
        XCTAssertEqual(text.components(separatedBy: "\r\n32\r\n").count, 3, text)
        XCTAssertTrue(text.contains("\r\n14\r\n"), text)
        XCTAssertFalse(text.hasSuffix("0\r\n\r\n"))
        XCTAssertEqual(origin.bodyBytesSent, 120)
    }

    func testResetAfterBodyBytesDeclaresTheFullLengthThenResetsTheConnection() async throws {
        let origin = try LoopbackOrigin()
        let body = payload
        origin.handle("/reset") { _ in OriginResponse(body: body, fault: .resetAfterBodyBytes(100)) }
        origin.handle("/cut") { _ in OriginResponse(body: body, fault: .closeAfterBodyBytes(100)) }

        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /reset HTTP/1.1\r\nHost: x\r\n\r\n")
        let wire = try connection.readToEnd()
        let text = String(decoding: wire, as: UTF8.self)
        XCTAssertTrue(text.contains("Content-Length: 1000\r\n"), text)
        let headEnd = try XCTUnwrap(text.range(of: "\r\n\r\n"))
        XCTAssertEqual(Array(wire[text.utf8.distance(from: text.startIndex, to: headEnd.upperBound)...]), Array(body.prefix(100)),
                       "every byte sent before the reset arrives")
        XCTAssertTrue(connection.wasReset, "a reset, not an orderly close")
        let orderly = try RawConnection(port: origin.port)
        try orderly.send("GET /cut HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try orderly.readToEnd()
        XCTAssertFalse(orderly.wasReset, "closeAfterBodyBytes closes in order")

        // URLSession tells the two apart: a reset is a lost connection.
        for (path, code) in [("/reset", URLError.Code.networkConnectionLost), ("/cut", URLError.Code.unknown)] {
            do {
                let (data, _) = try await fetch(makeSession(), origin.url(path))
                XCTFail("\(path): a truncated body must fail the task, got \(data.count) bytes")
            } catch {
                #if canImport(FoundationNetworking)
                XCTAssertEqual((error as? URLError)?.code, code, "\(path): \(error)")
                #endif
            }
        }
    }

    func testDeclaredLengthPromisesMoreThanItSends() async throws {
        let origin = try LoopbackOrigin()
        origin.handle("/short") { _ in OriginResponse(body: Data("abc".utf8), fault: .declaredLength(10)) }

        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = String(decoding: try connection.readToEnd(), as: UTF8.self)
        XCTAssertTrue(text.contains("Content-Length: 10\r\n"), text)
        XCTAssertTrue(text.contains("Connection: close\r\n"), text)
        XCTAssertTrue(text.hasSuffix("\r\n\r\nabc"), text)

        do {
            _ = try await fetch(makeSession(), origin.url("/short"))
            XCTFail("a body shorter than its Content-Length must fail the task")
        } catch {}
    }

    func testCloseWithoutResponseSendsNothingButLogsTheRequest() async throws {
        let origin = try LoopbackOrigin()
        origin.handle("/gone") { _ in OriginResponse(body: Data("never".utf8), fault: .closeWithoutResponse) }

        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /gone HTTP/1.1\r\nHost: x\r\nX-Probe: 1\r\n\r\n")
        XCTAssertTrue(try connection.isClosedByServer())
        XCTAssertEqual(origin.requests.first?.header("X-Probe"), "1")
        XCTAssertEqual(origin.totalBytesSent, 0)

        do {
            _ = try await fetch(makeSession(), origin.url("/gone"))
            XCTFail("an empty reply must fail the task")
        } catch {}
    }

    func testStallDelaysTheResponseOnTheServer() async throws {
        let origin = try LoopbackOrigin()
        origin.handle("/stall") { _ in OriginResponse(body: Data("late".utf8), fault: .stall(0.3)) }

        let started = Date()
        let (body, response) = try await fetch(makeSession(), origin.url("/stall"))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3)
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(body, Data("late".utf8))

        // A client that gives up sooner times out.
        do {
            _ = try await fetch(makeSession(timeout: 0.1), origin.url("/stall"))
            XCTFail("expected a timeout")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .timedOut, "\(error)")
        }
    }

    func testPacedTransferSendsEachChunkAfterAPause() throws {
        let origin = try LoopbackOrigin()
        let payload = Data((0..<40).map { UInt8($0) })
        origin.handle("/slow") { _ in OriginResponse(body: payload, transfer: .paced(chunkSize: 10, interval: 0.1)) }
        let connection = try RawConnection(port: origin.port)
        let started = Date()
        try connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        let raw = try connection.readResponse()
        XCTAssertEqual(raw.header("Transfer-Encoding"), "chunked")
        XCTAssertEqual(raw.chunkCount, 4)
        XCTAssertEqual(Data(raw.body), payload)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3, "three pauses, none before the first chunk")
    }

    func testStopCutsAPacedBodyShort() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/slow") { _ in OriginResponse(body: Data(count: 100), transfer: .paced(chunkSize: 10, interval: 30)) }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertThrowsError(try { () throws -> Void in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { origin.stop() }
            _ = try connection.readResponse()
        }(), "the connection ends mid-body instead of after 30 s pauses")
    }

    func testAClientThatLeavesDuringAStallIsCountedAndTheResponseIsDropped() throws {
        let origin = try LoopbackOrigin()
        let arrived = expectation(description: "the request reached the handler")
        origin.handle("/stall") { _ in
            arrived.fulfill()
            return OriginResponse(body: Data("never".utf8), fault: .stall(30))
        }
        var connection: RawConnection? = try RawConnection(port: origin.port)
        try connection?.send("GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
        wait(for: [arrived], timeout: 5)
        XCTAssertEqual(origin.responsesAbandoned, 0)
        connection = nil
        wait(for: [abandoned(origin, count: 1)], timeout: 5)  // not after the 30 s stall
        XCTAssertEqual(origin.bodyBytesSent, 0)
    }

    func testAClientThatLeavesBetweenPacedChunksIsCountedAndNothingMoreIsSent() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/slow") { _ in OriginResponse(body: Data(count: 100), transfer: .paced(chunkSize: 10, interval: 30)) }
        var connection: RawConnection? = try RawConnection(port: origin.port)
        try connection?.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        wait(for: [XCTNSPredicateExpectation(predicate: NSPredicate { _, _ in origin.bodyBytesSent == 10 }, object: nil)], timeout: 5)
        connection = nil
        wait(for: [abandoned(origin, count: 1)], timeout: 5)
        XCTAssertEqual(origin.bodyBytesSent, 10, "the first chunk only")
    }

    func testAResponseWrittenWholeIsNotAbandoned() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/slow") { _ in OriginResponse(body: Data(count: 30), transfer: .paced(chunkSize: 10, interval: 0.01)) }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().body.count, 30)
        try connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().body.count, 30)
        XCTAssertEqual(origin.responsesAbandoned, 0)
        XCTAssertEqual(origin.bodyBytesSent, 60)
        origin.stop()
        XCTAssertEqual(origin.responsesAbandoned, 0, "stopping the origin abandons nothing")
    }

    /// Fulfilled once `origin` has counted `count` abandoned responses.
    private func abandoned(_ origin: LoopbackOrigin, count: Int) -> XCTestExpectation {
        XCTNSPredicateExpectation(predicate: NSPredicate { _, _ in origin.responsesAbandoned == count }, object: nil)
    }

    func testStopMakesLaterRequestsFailFastAndRestartServesOnTheSamePort() async throws {
        let origin = try LoopbackOrigin()
        origin.handle("/a") { _ in .text("a") }
        let session = makeSession()
        let port = origin.port
        _ = try await fetch(session, origin.url("/a"))

        origin.stop()
        origin.stop()  // idempotent
        XCTAssertFalse(origin.isRunning)
        XCTAssertTrue(connectionIsRefused(port: port))
        let started = Date()
        do {
            _ = try await fetch(session, origin.url("/a"))
            XCTFail("the origin is offline")
        } catch {
            XCTAssertLessThan(Date().timeIntervalSince(started), 2, "failing must not wait for a timeout")
            XCTAssertEqual((error as? URLError)?.code, .cannotConnectToHost, "\(error)")
        }

        try origin.restart()
        XCTAssertTrue(origin.isRunning)
        XCTAssertEqual(origin.port, port)
        let (body, response) = try await fetch(session, origin.url("/a"))
        XCTAssertEqual(response.statusCode, 200)
        XCTAssertEqual(body, Data("a".utf8))
        XCTAssertEqual(origin.requestCount(path: "/a"), 2)

        try origin.restart()  // restart while running stops first
        let (_, again) = try await fetch(session, origin.url("/a"))
        XCTAssertEqual(again.statusCode, 200)
    }

    func testStopCutsAnInFlightRequestShort() async throws {
        let origin = try LoopbackOrigin()
        let arrived = expectation(description: "request reached the handler")
        origin.handle("/stall") { _ in
            arrived.fulfill()
            return OriginResponse(body: Data("never".utf8), fault: .stall(30))
        }
        let url = origin.url("/stall")
        let task = Task { () -> Result<Int, Error> in
            do {
                return .success(try await fetch(makeSession(timeout: 20), url).1.statusCode)
            } catch {
                return .failure(error)
            }
        }
        await fulfillment(of: [arrived], timeout: 5)
        let started = Date()
        origin.stop()
        let result = await task.value
        XCTAssertLessThan(Date().timeIntervalSince(started), 3, "the client must see the connection end at once")
        if case .success(let status) = result {
            XCTFail("expected a failed request, got status \(status)")
        }
    }

    func testStopClosesIdleKeepAliveConnections() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/a") { _ in .text("a") }
        let connection = try RawConnection(port: origin.port)
        try connection.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try connection.readResponse()
        origin.stop()
        XCTAssertTrue(try connection.isClosedByServer())
    }

    func testDeinitStopsTheServer() throws {
        var origin: LoopbackOrigin? = try LoopbackOrigin()
        let port = origin!.port
        XCTAssertFalse(connectionIsRefused(port: port))
        origin = nil
        XCTAssertTrue(connectionIsRefused(port: port))
    }
}
