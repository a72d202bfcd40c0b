#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// An in-process HTTP/1.1 origin server on 127.0.0.1, on a port the kernel chooses, for
/// integration tests and demos.
///
/// It listens from `init` on. Requests are routed by exact path (the query is ignored for
/// routing) to a handler (``handle(_:_:)``) or an ``OriginResource`` (``serve(_:_:)``);
/// anything else gets a 404. Connections are kept alive as HTTP/1.1 allows. Every request is
/// logged, before its handler runs, in ``requests``.
///
/// Threading: one accept thread, and one thread per connection that reads requests, runs the
/// handler and writes the response. Handlers therefore run on those connection threads,
/// possibly several at once. Every method and property of this class is safe to call from any
/// thread, including from inside a handler.
///
/// Set ``network`` to put a simulated network between the origin and its clients: responses
/// then wait a round trip and leave at its bandwidth (``SimulatedNetwork``).
///
/// The server stops when ``stop()`` is called or when the object is deinitialized.
public final class LoopbackOrigin: Sendable {
    /// A request handler. It runs on the connection's thread; it may block (the connection
    /// waits), but it should return.
    public typealias Handler = @Sendable (OriginRequest) -> OriginResponse

    private let core: OriginCore

    /// Starts listening at once on 127.0.0.1, on a port chosen by the kernel.
    /// - Parameter now: the clock for the `Date` field of every response, for
    ///   ``OriginRequest/receivedAt``, and for the default `Last-Modified` of served resources;
    ///   default `Date()`. Tests pass a fake clock shared with the code under test. It is
    ///   called on connection threads and must be thread-safe.
    /// - Throws: ``LoopbackServerError`` if no socket could be made, bound or listened on.
    public init(now: @escaping @Sendable () -> Date = { Date() }) throws {
        core = try OriginCore(now: now)
    }

    deinit {
        core.stop()
    }

    /// The TCP port, the same across ``stop()`` and ``restart()``.
    public var port: Int { core.port }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The URL for a path and optional query: `url("/a?b=1")` is `http://127.0.0.1:<port>/a?b=1`.
    /// A missing leading `/` is added.
    public func url(_ pathAndQuery: String) -> URL {
        let suffix = pathAndQuery.hasPrefix("/") ? pathAndQuery : "/" + pathAndQuery
        return URL(string: "http://127.0.0.1:\(port)" + suffix)!
    }

    /// Whether the server is listening (false after ``stop()``, true again after ``restart()``).
    public var isRunning: Bool { core.state.withLock { $0.listener != nil } }

    /// Routes requests whose path is exactly `path` (compared byte for byte, before any
    /// percent-decoding; the query is ignored) to `handler`, replacing any earlier handler.
    /// If a resource is also served at `path`, it keeps GET and HEAD and the handler gets the
    /// other methods.
    public func handle(_ path: String, _ handler: @escaping Handler) {
        core.state.withLock { $0.routes[path, default: Route()].handler = handler }
    }

    /// Serves `resource` for GET and HEAD at exactly `path` (query ignored), replacing any
    /// earlier resource there. Other methods get 405 unless a handler is registered for the
    /// same path. The resource adopts this origin's clock for its `Last-Modified` stamps.
    public func serve(_ path: String, _ resource: OriginResource) {
        resource.adopt(clock: core.now)
        core.state.withLock { $0.routes[path, default: Route()].resource = resource }
    }

    /// Removes the handler and the resource at `path`; its requests get 404 from now on.
    public func removeRoute(_ path: String) {
        core.state.withLock { _ = $0.routes.removeValue(forKey: path) }
    }

    /// Every request received since the start or the last ``resetLog()``, in arrival order.
    public var requests: [OriginRequest] { core.state.withLock { $0.log } }

    /// The logged requests whose path (without query) is exactly `path`, in arrival order.
    public func requests(to path: String) -> [OriginRequest] {
        core.state.withLock { $0.log.filter { $0.path == path } }
    }

    /// How many logged requests match; nil matches anything. `method` is compared exactly
    /// (`"GET"`, not `"get"`); `path` excludes the query.
    public func requestCount(method: String? = nil, path: String? = nil) -> Int {
        core.state.withLock { s in
            s.log.reduce(0) { count, request in
                let matches = (method == nil || request.method == method) && (path == nil || request.path == path)
                return matches ? count + 1 : count
            }
        }
    }

    /// Body bytes written to sockets: payload only, without chunk framing; for a fault, only
    /// what was actually sent. Reset by ``resetLog()``.
    public var bodyBytesSent: Int { core.state.withLock { $0.bodyBytesSent } }

    /// Responses the client walked away from: it closed (or reset) the connection while the
    /// origin stalled before the response, paused between paced chunks, or wrote — a cancelled
    /// request, a client timeout. The origin stops writing such a response at once. Reset by
    /// ``resetLog()``.
    public var responsesAbandoned: Int { core.state.withLock { $0.responsesAbandoned } }

    /// All bytes written to sockets: status lines, header sections, chunk framing, bodies and
    /// any `100 Continue` interim responses. Reset by ``resetLog()``.
    public var totalBytesSent: Int { core.state.withLock { $0.totalBytesSent } }

    /// All bytes read from sockets: request lines, header sections and bodies as the clients
    /// sent them (chunk framing included). Reset by ``resetLog()``.
    public var totalBytesReceived: Int { core.state.withLock { $0.totalBytesReceived } }

    /// The network the origin's responses travel through, acted out on the wire (see
    /// ``SimulatedNetwork``); nil (the default) for none: loopback as it is. A change applies to
    /// responses that start afterwards. Safe to set from any thread.
    public var network: SimulatedNetwork? {
        get { core.state.withLock { $0.network } }
        set { core.state.withLock { $0.network = newValue } }
    }

    /// How many TCP connections were accepted. Reset by ``resetLog()``
    /// (``OriginRequest/connectionID`` values keep counting up).
    public var connectionsAccepted: Int { core.state.withLock { $0.connectionsAccepted } }

    /// How many TCP connections are open now (accepted and not yet closed by either side).
    public var openConnections: Int { core.state.withLock { $0.connections.count } }

    /// The most connections that were open at once since the start or the last ``resetLog()``
    /// (which starts it again from those open then): how many a client held at its busiest.
    public var peakOpenConnections: Int { core.state.withLock { $0.peakOpenConnections } }

    /// Clears the request log and the byte and connection counters. Routes are kept.
    public func resetLog() {
        core.state.withLock { s in
            s.log.removeAll()
            s.bodyBytesSent = 0
            s.responsesAbandoned = 0
            s.totalBytesSent = 0
            s.totalBytesReceived = 0
            s.connectionsAccepted = 0
            s.peakOpenConnections = s.connections.count
        }
    }

    /// Closes the listener and shuts down every open connection, so that in-flight requests
    /// fail at once (the client sees the connection close) and later connections are refused.
    /// Returns once the port is no longer listening. Idempotent; safe from any thread,
    /// including a handler (whose own connection is then shut down too).
    public func stop() {
        core.stop()
    }

    /// Listens again on the same port (stopping first if running). Open connections from
    /// before are not revived.
    /// - Throws: ``LoopbackServerError`` if the port can no longer be bound (another process
    ///   took it in the meantime).
    public func restart() throws {
        core.stop()
        try core.start()
    }
}

/// A path's registrations.
struct Route: Sendable {
    var resource: OriginResource?
    var handler: LoopbackOrigin.Handler?
}

/// One listening socket and the pipe that tells its accept thread, and any stalled response,
/// to stop. A new one is made by every start.
final class Listener: Sendable {
    let fd: Int32
    let wakeRead: Int32
    let wakeWrite: Int32
    /// Signalled by the accept thread once it has closed `fd`.
    let acceptFinished = DispatchSemaphore(value: 0)

    init(fd: Int32) throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw LoopbackServerError("pipe", code: errno)
        }
        POSIXSocket.setCloseOnExec(fds[0])
        POSIXSocket.setCloseOnExec(fds[1])
        self.fd = fd
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    /// Makes the pipe readable for good: every `poll` on `wakeRead` returns from now on.
    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }
}

/// The server's state and threads. Separate from ``LoopbackOrigin`` so that the threads do
/// not keep the public object alive: its `deinit` stops the server.
final class OriginCore: Sendable {
    struct State {
        var routes: [String: Route] = [:]
        var log: [OriginRequest] = []
        var bodyBytesSent = 0
        var responsesAbandoned = 0
        var totalBytesSent = 0
        var totalBytesReceived = 0
        var connectionsAccepted = 0
        var peakOpenConnections = 0
        var network: SimulatedNetwork?
        var nextConnectionID = 1
        /// The running listener; nil while stopped.
        var listener: Listener?
        /// Open connections by ID. A connection thread removes its entry before it closes the
        /// descriptor, and `stop()` shuts descriptors down under the lock, so it never touches
        /// a descriptor number that has been closed and reused.
        var connections: [Int: Int32] = [:]
    }

    let port: Int
    let now: @Sendable () -> Date
    let state = LockedBox(State())

    init(now: @escaping @Sendable () -> Date) throws {
        self.now = now
        let (fd, port) = try POSIXSocket.listen(port: 0)
        self.port = port
        try install(fd: fd)
    }

    func start() throws {
        let (fd, _) = try POSIXSocket.listen(port: UInt16(port))
        try install(fd: fd)
    }

    private func install(fd: Int32) throws {
        let listener: Listener
        do {
            listener = try Listener(fd: fd)
        } catch {
            close(fd)
            throw error
        }
        let installed = state.withLock { s -> Bool in
            guard s.listener == nil else { return false }
            s.listener = listener
            return true
        }
        guard installed else {
            close(fd)  // another restart() won the race
            return
        }
        let thread = Thread { [self] in acceptLoop(listener) }
        thread.name = "LoopbackOrigin accept :\(port)"
        thread.start()
    }

    func stop() {
        let listener = state.withLock { s -> Listener? in
            guard let listener = s.listener else { return nil }
            s.listener = nil
            for fd in s.connections.values { POSIXSocket.shutdownBoth(fd) }
            return listener
        }
        guard let listener else { return }
        listener.wake()
        listener.acceptFinished.wait()
    }

    // MARK: - Accepting

    private func acceptLoop(_ listener: Listener) {
        defer {
            close(listener.fd)
            listener.acceptFinished.signal()
        }
        while true {
            let ready = POSIXSocket.waitReadable([listener.fd, listener.wakeRead], timeout: nil)
            if ready.isEmpty || ready.contains(listener.wakeRead) { return }
            guard let fd = POSIXSocket.accept(listener.fd) else {
                if errno == EMFILE || errno == ENFILE {
                    // Out of descriptors: wait for connections to close rather than spin.
                    _ = POSIXSocket.waitReadable([listener.wakeRead], timeout: 0.05)
                }
                continue
            }
            let id = state.withLock { s -> Int? in
                guard s.listener === listener else { return nil }
                let id = s.nextConnectionID
                s.nextConnectionID += 1
                s.connectionsAccepted += 1
                s.connections[id] = fd
                s.peakOpenConnections = max(s.peakOpenConnections, s.connections.count)
                return id
            }
            guard let id else {
                close(fd)
                return
            }
            let thread = Thread { [self] in serveConnection(fd: fd, id: id, listener: listener) }
            thread.name = "LoopbackOrigin connection \(id)"
            thread.start()
        }
    }

    // MARK: - Serving a connection

    private func serveConnection(fd: Int32, id: Int, listener: Listener) {
        defer {
            state.withLock { _ = $0.connections.removeValue(forKey: id) }
            close(fd)
        }
        var reader = RequestReader(fd: fd)
        var counted = 0
        var newConnection = true
        while true {
            let outcome = reader.next(sendContinue: { _ = write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8), body: 0..<0, to: fd) })
            let received = reader.receivedByteCount - counted
            counted = reader.receivedByteCount
            if received > 0 { state.withLock { $0.totalBytesReceived += received } }
            switch outcome {
            case .closed:
                return
            case .malformed(let reason):
                let response = OriginResponse.text("Bad Request: \(reason)\n", status: 400)
                _ = send(response, method: "GET", version: "HTTP/1.1", keepAlive: false, fd: fd, listener: listener,
                         newConnection: newConnection)
                return
            case .request(let parsed):
                let request = OriginRequest(
                    method: parsed.method, target: parsed.target, version: parsed.version,
                    headers: parsed.headers, body: parsed.body, connectionID: id, receivedAt: now())
                let route = state.withLock { s -> Route? in
                    s.log.append(request)
                    return s.routes[request.path]
                }
                let response = Self.respond(to: request, route: route)
                let keepAlive = parsed.wantsKeepAlive
                    && !(response.header("Connection")?.lowercased().contains("close") ?? false)
                let open = send(
                    response, method: request.method, version: request.version, keepAlive: keepAlive,
                    fd: fd, listener: listener, newConnection: newConnection)
                newConnection = false
                guard open else {
                    if case .resetAfterBodyBytes = response.fault { POSIXSocket.resetOnClose(fd, unlessSet: listener.wakeRead) }
                    return
                }
            }
        }
    }

    private static func respond(to request: OriginRequest, route: Route?) -> OriginResponse {
        let isRead = request.method == "GET" || request.method == "HEAD"
        if let resource = route?.resource, isRead {
            return resource.response(to: request)
        }
        if let handler = route?.handler {
            return handler(request)
        }
        if let resource = route?.resource {
            return resource.response(to: request)  // 405 with Allow
        }
        return OriginResponse.text("Not Found: \(request.path)\n", status: 404)
    }

    /// Writes `response` (acting out its fault) through the simulated network, if any.
    /// `newConnection`: the first response on its connection. Returns whether the connection
    /// stays open.
    private func send(
        _ response: OriginResponse, method: String, version: String, keepAlive: Bool, fd: Int32, listener: Listener,
        newConnection: Bool
    ) -> Bool {
        var pacer: LinkPacer?
        if let network = state.withLock({ $0.network }) {
            let delay = network.firstByteDelay(newConnection: newConnection)
            if delay > 0, !POSIXSocket.waitReadable([listener.wakeRead], timeout: delay).isEmpty {
                return false  // stopped during the round trip
            }
            if network.bytesPerSecond != nil { pacer = LinkPacer(network) }
        }
        var closeAfterBodyBytes: Int?
        var declaredLength: Int?
        switch response.fault {
        case nil:
            break
        case .closeWithoutResponse:
            return false
        case .stall(let seconds):
            guard pause(seconds, client: fd, listener: listener) else { return false }
        case .closeAfterBodyBytes(let count), .resetAfterBodyBytes(let count):
            closeAfterBodyBytes = max(0, count)
        case .declaredLength(let length):
            declaredLength = length
        }
        let closes = !keepAlive || closeAfterBodyBytes != nil || declaredLength != nil

        let status = response.status
        let bodyForbidden = (100..<200).contains(status) || status == 204 || status == 304
        let sendsBody = method != "HEAD" && !bodyForbidden
        var chunkSize: Int?
        var pause: TimeInterval = 0
        switch response.transfer {
        case .contentLength:
            break
        case .chunked(let size):
            if version != "HTTP/1.0" { chunkSize = max(1, size) }
        case .paced(let size, let interval):
            if version != "HTTP/1.0" { chunkSize = max(1, size) }
            pause = max(0, interval)
        }

        var head = "HTTP/1.1 \(status) \(OriginResponse.reasonPhrase(status))\r\n"
        for field in response.headers {
            let name = field.name.lowercased()
            if name == "content-length" || name == "transfer-encoding" { continue }
            head += "\(field.name): \(field.value)\r\n"
        }
        if response.addsDateHeader && !response.headers.contains(name: "Date") {
            head += "Date: \(IMFFixdate.string(from: now()))\r\n"
        }
        if !bodyForbidden {
            if chunkSize != nil {
                head += "Transfer-Encoding: chunked\r\n"
            } else {
                head += "Content-Length: \(declaredLength ?? response.body.count)\r\n"
            }
        }
        if !response.headers.contains(name: "Connection") {
            if closes {
                head += "Connection: close\r\n"
            } else if version == "HTTP/1.0" {
                head += "Connection: keep-alive\r\n"
            }
        }
        head += "\r\n"

        let headBytes = Array(head.utf8)
        if sendsBody, chunkSize == nil, closeAfterBodyBytes == nil, pacer == nil {
            // The whole response in one `sendmsg`, the body from its own storage: no copy of it
            // in this process, whose processors the client under test shares.
            let written = headBytes.withUnsafeBytes { head in
                response.body.withUnsafeBytes { body in
                    write(head, body, body: head.count..<(head.count + body.count), to: fd)
                }
            }
            guard written else { return clientLeft(listener) }
            return !closes
        }
        var body = sendsBody ? [UInt8](response.body) : []
        if let limit = closeAfterBodyBytes, limit < body.count {
            body.removeSubrange(limit...)
        }

        guard let chunkSize, sendsBody else {
            // The whole response in one buffer: no Nagle/delayed-ACK stall between head and body.
            guard write(headBytes + body, body: headBytes.count..<(headBytes.count + body.count), to: fd,
                        pacer: pacer, listener: listener) else { return clientLeft(listener) }
            return !closes
        }

        // Chunked: the head goes with the first chunk; every chunk is a separate write.
        var pending = headBytes
        var offset = 0
        repeat {
            let end = min(offset + chunkSize, body.count)
            if pause > 0, offset > 0, !self.pause(pause, client: fd, listener: listener) {
                return false
            }
            if end > offset {
                pending += Array(String(end - offset, radix: 16).utf8) + [13, 10]
                let bodyStart = pending.count
                pending += body[offset..<end]
                let bodyRange = bodyStart..<pending.count
                pending += [13, 10]
                offset = end
                let isLast = offset >= body.count
                if isLast && closeAfterBodyBytes == nil { pending += Array("0\r\n\r\n".utf8) }
                guard write(pending, body: bodyRange, to: fd, pacer: pacer, listener: listener) else {
                    return clientLeft(listener)
                }
                pending = []
            } else {
                // Empty body (or cut to nothing by the fault).
                if closeAfterBodyBytes == nil { pending += Array("0\r\n\r\n".utf8) }
                guard write(pending, body: 0..<0, to: fd, pacer: pacer, listener: listener) else { return false }
                pending = []
            }
        } while offset < body.count
        return !closes
    }

    /// Waits `seconds` before writing more of a response; false when the origin stopped
    /// meanwhile or the client closed the connection (counted in `responsesAbandoned`). The
    /// client's socket is readable only then: it sends nothing while it waits for a response
    /// (libcurl does not pipeline); data it sent early is left for the next request.
    private func pause(_ seconds: TimeInterval, client fd: Int32, listener: Listener) -> Bool {
        let deadline = Date().addingTimeInterval(max(0, seconds))
        var watched = [listener.wakeRead, fd]
        while deadline.timeIntervalSinceNow > 0 {
            let ready = POSIXSocket.waitReadable(watched, timeout: deadline.timeIntervalSinceNow)
            if ready.isEmpty { return true }
            if ready.contains(listener.wakeRead) { return false }  // stopped while pausing
            if POSIXSocket.peerClosed(fd) { return clientLeft(listener) }
            watched = [listener.wakeRead]
        }
        return true
    }

    /// A write of a response failed, or its client closed the connection: counted as abandoned
    /// unless the origin is stopping (which shuts its connections down). Returns false, for the
    /// connection closes.
    private func clientLeft(_ listener: Listener) -> Bool {
        state.withLock { s in
            if s.listener === listener { s.responsesAbandoned += 1 }
        }
        return false
    }

    /// Writes `bytes` as `pacer` lets the simulated link carry them (at once without one): piece
    /// by piece, each once the link has carried it. Returns false when the origin stopped
    /// meanwhile or the write failed; pieces not written are not counted.
    private func write(_ bytes: [UInt8], body: Range<Int>, to fd: Int32, pacer: LinkPacer?, listener: Listener) -> Bool {
        guard let pacer else { return write(bytes, body: body, to: fd) }
        for piece in pacer.plan(bytes.count) {
            let wait = LinkPacer.seconds(until: piece.due)
            if wait > 0, !POSIXSocket.waitReadable([listener.wakeRead], timeout: wait).isEmpty {
                return false  // stopped while the link carried this piece
            }
            let lower = max(body.lowerBound, piece.range.lowerBound)
            let upper = min(body.upperBound, piece.range.upperBound)
            let pieceBody = lower < upper ? (lower - piece.range.lowerBound)..<(upper - piece.range.lowerBound) : 0..<0
            guard write(Array(bytes[piece.range]), body: pieceBody, to: fd) else { return false }
        }
        return true
    }

    /// Writes `bytes`, counting them as `write(_:_:body:to:)` does.
    private func write(_ bytes: [UInt8], body: Range<Int>, to fd: Int32) -> Bool {
        bytes.withUnsafeBytes { write($0, UnsafeRawBufferPointer(start: nil, count: 0), body: body, to: fd) }
    }

    /// Writes `first`, then `second`, as one stream in as few calls as the socket allows
    /// (`POSIXSocket.sendAll(_:_:_:)`), counting them, and those of them inside `body` (a range of
    /// the two joined), in the byte counters. The counters are raised before the write, so a
    /// client that has read the response never sees them lag; what a failed write did not send
    /// is taken off again.
    private func write(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, body: Range<Int>,
                       to fd: Int32) -> Bool {
        let total = first.count + second.count
        state.withLock { s in
            s.totalBytesSent += total
            s.bodyBytesSent += body.count
        }
        var sent = 0
        let ok = POSIXSocket.sendAll(fd, first, second) { sent += $0 }
        if !ok {
            let unsentBody = body.upperBound - max(body.lowerBound, min(sent, body.upperBound))
            state.withLock { s in
                s.totalBytesSent = max(0, s.totalBytesSent - (total - sent))
                s.bodyBytesSent = max(0, s.bodyBytesSent - unsentBody)
            }
        }
        return ok
    }
}
