import Foundation

/// A network between the origin and its clients, acted out on the wire: every response waits a
/// round trip before its first byte leaves the origin (two on a new connection: the TCP
/// handshake comes first), and its bytes leave no faster than the bandwidth allows.
///
/// Set it with ``LoopbackOrigin/network``. The delays are real (the connection thread waits),
/// so every client of the origin pays the same network and an answer that never reaches the
/// origin pays none; ``LoopbackOrigin/stop()`` cuts any wait short and closes the connection.
/// Requests travel without a bandwidth limit (they are a few hundred bytes); `100 Continue`
/// interim responses are not delayed. A plain value type, safe to share between threads.
public struct SimulatedNetwork: Sendable, Equatable {
    /// Seconds from a request leaving the client to the first byte of its response arriving,
    /// not counting the time the origin's handler takes.
    public var roundTrip: TimeInterval
    /// Download bandwidth in bytes per second; nil for no limit.
    public var bytesPerSecond: Double?

    /// - Parameters:
    ///   - roundTrip: seconds; negative values count as zero.
    ///   - bytesPerSecond: nil (the default) for no limit; zero or less counts as no limit.
    public init(roundTrip: TimeInterval, bytesPerSecond: Double? = nil) {
        self.roundTrip = max(0, roundTrip)
        self.bytesPerSecond = bytesPerSecond.flatMap { $0 > 0 ? $0 : nil }
    }

    /// How long the origin waits before the first byte of a response: one round trip, two for
    /// the first response on a connection (the client's connect takes one before it can send).
    public func firstByteDelay(newConnection: Bool) -> TimeInterval {
        newConnection ? 2 * roundTrip : roundTrip
    }

    /// Seconds the link needs to carry `bytes` at ``bytesPerSecond`` (zero without a limit).
    public func transmissionTime(bytes: Int) -> TimeInterval {
        guard let bytesPerSecond else { return 0 }
        return Double(max(0, bytes)) / bytesPerSecond
    }

    /// The size of the pieces a response is written in: what the link carries in 10 ms, and
    /// at least one TCP segment (1,460 bytes); nil without a bandwidth limit (one write).
    public var sliceSize: Int? {
        bytesPerSecond.map { max(1_460, Int($0 / 100)) }
    }

    /// One piece of a write: it leaves the origin `after` seconds once the link is free.
    public struct Piece: Sendable, Equatable {
        public var after: TimeInterval
        public var length: Int

        public init(after: TimeInterval, length: Int) {
            self.after = after
            self.length = length
        }
    }

    /// The pieces a `bytes`-long write is cut into, and when each leaves the origin, in seconds
    /// after the link became free: a piece is written once the link has carried it (its last
    /// byte "arrives"), so the whole write takes ``transmissionTime(bytes:)``. Without a
    /// bandwidth limit, one piece at once.
    public func schedule(bytes: Int) -> [Piece] {
        guard bytes > 0 else { return [] }
        guard let sliceSize else { return [Piece(after: 0, length: bytes)] }
        var pieces: [Piece] = []
        var offset = 0
        while offset < bytes {
            let length = min(sliceSize, bytes - offset)
            offset += length
            pieces.append(Piece(after: transmissionTime(bytes: offset), length: length))
        }
        return pieces
    }
}

/// One connection's way through a ``SimulatedNetwork``: when the link is next free, so that the
/// pieces of several writes (a chunked body) queue behind each other, and pauses of the origin
/// itself leave the link idle rather than banking bandwidth. Used by one connection thread.
final class LinkPacer {
    let network: SimulatedNetwork
    /// Uptime nanoseconds at which the link has carried everything planned so far.
    private var linkFree: UInt64 = 0

    init(_ network: SimulatedNetwork) {
        self.network = network
    }

    /// Cuts `count` bytes into pieces, each with the uptime (nanoseconds) before which it must
    /// not be written.
    func plan(_ count: Int) -> [(due: UInt64, range: Range<Int>)] {
        let start = max(DispatchTime.now().uptimeNanoseconds, linkFree)
        var offset = 0
        return network.schedule(bytes: count).map { piece in
            let due = start + UInt64(piece.after * 1e9)
            defer { offset += piece.length }
            linkFree = due
            return (due, offset..<(offset + piece.length))
        }
    }

    /// Seconds from now until `due` (zero once it has passed).
    static func seconds(until due: UInt64) -> TimeInterval {
        let now = DispatchTime.now().uptimeNanoseconds
        return due > now ? Double(due - now) / 1e9 : 0
    }
}
