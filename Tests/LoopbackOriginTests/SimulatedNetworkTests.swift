import Foundation
import XCTest

@testable import LoopbackOrigin

/// The simulated network: its schedule as a pure function, and the origin acting it out on the
/// wire (a response never arrives before its round trips and transmission time, bytes and
/// framing are those of the same response without it, and `stop()` cuts the waits short).
final class SimulatedNetworkTests: XCTestCase {
    func testTheScheduleCutsAWriteIntoPiecesTheLinkCarriesInTurn() {
        let cases: [(network: SimulatedNetwork, bytes: Int, expected: [SimulatedNetwork.Piece])] = [
            // No bandwidth limit: one piece at once.
            (SimulatedNetwork(roundTrip: 0.07), 40_000, [.init(after: 0, length: 40_000)]),
            // 1.5 MB/s: 15,000-byte pieces (10 ms each), each written once carried.
            (SimulatedNetwork(roundTrip: 0.07, bytesPerSecond: 1_500_000), 40_000,
             [.init(after: 0.01, length: 15_000), .init(after: 0.02, length: 15_000),
              .init(after: 40_000.0 / 1_500_000, length: 10_000)]),
            // A slow link still writes whole TCP segments (1,460 bytes), not 10 ms slivers.
            (SimulatedNetwork(roundTrip: 0.3, bytesPerSecond: 100_000), 2_000,
             [.init(after: 0.0146, length: 1_460), .init(after: 0.02, length: 540)]),
            (SimulatedNetwork(roundTrip: 0.3, bytesPerSecond: 100_000), 0, []),
        ]
        for item in cases {
            let pieces = item.network.schedule(bytes: item.bytes)
            XCTAssertEqual(pieces.map(\.length), item.expected.map(\.length), "\(item.network) \(item.bytes)")
            for (piece, expected) in zip(pieces, item.expected) {
                XCTAssertEqual(piece.after, expected.after, accuracy: 1e-9, "\(item.network) \(item.bytes)")
            }
            XCTAssertEqual(pieces.last?.after ?? 0, item.network.transmissionTime(bytes: item.bytes), accuracy: 1e-9)
        }
    }

    func testANewConnectionCostsAnotherRoundTrip() {
        let network = SimulatedNetwork(roundTrip: 0.07, bytesPerSecond: -1)
        XCTAssertEqual(network.firstByteDelay(newConnection: false), 0.07)
        XCTAssertEqual(network.firstByteDelay(newConnection: true), 0.14)
        XCTAssertNil(network.bytesPerSecond, "a bandwidth of zero or less is no limit")
        XCTAssertEqual(network.transmissionTime(bytes: 1_000_000), 0)
        XCTAssertEqual(SimulatedNetwork(roundTrip: -1).roundTrip, 0)
    }

    func testResponsesArriveNoSoonerThanTheNetworkAllowsWithTheSameBytes() throws {
        // Given two origins serving the same body, one behind a simulated network
        let payload = Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0) })
        let plain = try LoopbackOrigin()
        let slow = try LoopbackOrigin()
        let network = SimulatedNetwork(roundTrip: 0.05, bytesPerSecond: 200_000)
        slow.network = network
        XCTAssertEqual(slow.network, network)
        for origin in [plain, slow] {
            origin.handle("/body") { _ in OriginResponse(body: payload) }
        }
        let request = "GET /body HTTP/1.1\r\nHost: x\r\n\r\n"

        // When each is asked twice on one connection
        let reference = try RawConnection(port: plain.port)
        try reference.send(request)
        let plainResponse = try reference.readResponse()

        let connection = try RawConnection(port: slow.port)
        var started = DispatchTime.now()
        try connection.send(request)
        let first = try connection.readResponse()
        let firstSeconds = seconds(since: started)
        started = DispatchTime.now()
        try connection.send(request)
        let second = try connection.readResponse()
        let secondSeconds = seconds(since: started)

        // Then the bytes and the framing are those of the plain origin
        XCTAssertEqual(first.body, plainResponse.body)
        XCTAssertEqual(first.header("Content-Length"), "20000")
        XCTAssertNil(first.header("Transfer-Encoding"))
        XCTAssertEqual(first.wireByteCount, plainResponse.wireByteCount)
        XCTAssertEqual(second.body, plainResponse.body)
        XCTAssertEqual(slow.totalBytesSent, first.wireByteCount + second.wireByteCount)
        XCTAssertEqual(slow.bodyBytesSent, 2 * payload.count)
        XCTAssertEqual(slow.totalBytesReceived, 2 * request.utf8.count)
        // and neither arrived before its round trips and its transmission time (lower bounds
        // only: the origin waits at least that long, so they never fail on a busy machine)
        let transmission = network.transmissionTime(bytes: first.wireByteCount)
        XCTAssertGreaterThanOrEqual(firstSeconds, 2 * network.roundTrip + transmission, "handshake, request, body")
        XCTAssertGreaterThanOrEqual(secondSeconds, network.roundTrip + transmission, "the kept-alive connection skips the handshake")
    }

    func testAHeadOnlyResponseWaitsTheRoundTripToo() throws {
        let origin = try LoopbackOrigin()
        origin.network = SimulatedNetwork(roundTrip: 0.05)
        origin.handle("/none") { _ in OriginResponse(status: 304) }
        let connection = try RawConnection(port: origin.port)
        let started = DispatchTime.now()
        try connection.send("GET /none HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try connection.readResponse()
        XCTAssertEqual(response.status, 304)
        XCTAssertGreaterThanOrEqual(seconds(since: started), 0.1)
    }

    func testStopCutsTheRoundTripShort() throws {
        // Given a network whose round trip would take half a minute
        let origin = try LoopbackOrigin()
        origin.network = SimulatedNetwork(roundTrip: 30)
        origin.handle("/a") { _ in .text("a") }
        let connection = try RawConnection(port: origin.port, timeout: 10)
        try connection.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        // When the origin stops meanwhile
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { origin.stop() }
        // Then the connection closes without a response, long before the round trip is over
        let started = DispatchTime.now()
        XCTAssertTrue(try connection.isClosedByServer())
        XCTAssertLessThan(seconds(since: started), 5)
        XCTAssertEqual(origin.requestCount(path: "/a"), 1, "the request arrived; its answer never left")
        XCTAssertEqual(origin.totalBytesSent, 0)
    }

    func testStopCutsATransmissionShort() throws {
        let origin = try LoopbackOrigin()
        origin.network = SimulatedNetwork(roundTrip: 0, bytesPerSecond: 2_000)
        origin.handle("/big") { _ in OriginResponse(body: Data(count: 100_000)) }
        let connection = try RawConnection(port: origin.port, timeout: 10)
        try connection.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { origin.stop() }
        let started = DispatchTime.now()
        XCTAssertThrowsError(try connection.readResponse(), "the body ends after a few pieces, not after 50 s")
        XCTAssertLessThan(seconds(since: started), 5)
        XCTAssertLessThan(origin.bodyBytesSent, 100_000)
    }

    func testResetLogClearsTheReceivedBytes() throws {
        let origin = try LoopbackOrigin()
        origin.handle("/a") { _ in .text("a") }
        let connection = try RawConnection(port: origin.port)
        let request = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        try connection.send(request)
        _ = try connection.readResponse()
        XCTAssertEqual(origin.totalBytesReceived, request.utf8.count)
        origin.resetLog()
        XCTAssertEqual(origin.totalBytesReceived, 0)
        XCTAssertNil(origin.network, "no simulated network unless one is set")
    }

    private func seconds(since start: DispatchTime) -> TimeInterval {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }
}
