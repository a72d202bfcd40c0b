#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// An error from the loopback servers in this module: a failed system call or a server that
/// would not start. A value type, safe to share between threads.
public struct LoopbackServerError: Error, CustomStringConvertible, Sendable {
    /// What the server was doing, e.g. `"bind 127.0.0.1:8080"` or `"start nginx"`.
    public let operation: String
    /// The `errno` value when a system call failed, otherwise 0.
    public let code: Int32
    /// Extra detail, e.g. the tail of nginx's error log. Empty when there is none.
    public let detail: String

    init(_ operation: String, code: Int32 = 0, detail: String = "") {
        self.operation = operation
        self.code = code
        self.detail = detail
    }

    /// `"<operation> failed: <strerror(code)> <detail>"`.
    public var description: String {
        var text = "\(operation) failed"
        if code != 0 { text += ": \(String(cString: strerror(code))) (errno \(code))" }
        if !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}

/// Thin wrappers over the POSIX socket calls the servers need. Every descriptor made here is
/// close-on-exec, so a child process (nginx) never inherits a listener or a connection.
enum POSIXSocket {
    #if canImport(Glibc)
    static let streamType = Int32(SOCK_STREAM.rawValue)
    static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    static let streamType = SOCK_STREAM
    static let sendFlags: Int32 = 0
    #endif

    static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian  // 127.0.0.1
        return address
    }

    static func setFlag(_ fd: Int32, level: Int32, option: Int32, _ value: Int32 = 1) {
        var value = value
        _ = setsockopt(fd, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    static func setCloseOnExec(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFD)
        if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }

    /// Creates a TCP socket bound to 127.0.0.1:`port` (0 lets the kernel choose) and listening,
    /// with `SO_REUSEADDR` so a stopped server can listen on the same port again at once.
    static func listen(port: UInt16) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { throw LoopbackServerError("socket", code: errno) }
        setCloseOnExec(fd)
        setFlag(fd, level: SOL_SOCKET, option: SO_REUSEADDR)
        var address = loopbackAddress(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw LoopbackServerError("bind 127.0.0.1:\(port)", code: code)
        }
        guard systemListen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw LoopbackServerError("listen", code: code)
        }
        guard let actual = localPort(fd) else {
            let code = errno
            close(fd)
            throw LoopbackServerError("getsockname", code: code)
        }
        return (fd, actual)
    }

    static func localPort(_ fd: Int32) -> Int? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return result == 0 ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }

    /// Accepts one connection and configures it: close-on-exec, `TCP_NODELAY`, no SIGPIPE.
    /// Returns nil on a transient failure (`EINTR`, `ECONNABORTED`, ...).
    static func accept(_ listener: Int32) -> Int32? {
        #if canImport(Glibc)
        let fd = Glibc.accept(listener, nil, nil)
        #else
        let fd = Darwin.accept(listener, nil, nil)
        #endif
        guard fd >= 0 else { return nil }
        setCloseOnExec(fd)
        setFlag(fd, level: Int32(IPPROTO_TCP), option: Int32(TCP_NODELAY))
        #if canImport(Darwin)
        setFlag(fd, level: SOL_SOCKET, option: SO_NOSIGPIPE)
        #endif
        return fd
    }

    /// Connects to 127.0.0.1:`port`; nil if the connection is refused or fails.
    static func connect(port: Int) -> Int32? {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { return nil }
        setCloseOnExec(fd)
        var address = loopbackAddress(port: UInt16(truncatingIfNeeded: port))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                systemConnect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            return nil
        }
        setFlag(fd, level: Int32(IPPROTO_TCP), option: Int32(TCP_NODELAY))
        #if canImport(Darwin)
        setFlag(fd, level: SOL_SOCKET, option: SO_NOSIGPIPE)
        #endif
        return fd
    }

    /// Writes all of `first`, then all of `second`, with one `sendmsg` for both while the socket
    /// takes them (so they leave as one stream of segments, without a copy joining them),
    /// calling `progress` with the size of every partial write. Returns false if the peer went
    /// away or the socket was shut down.
    @discardableResult
    static func sendAll(_ fd: Int32, _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer,
                        progress: (Int) -> Void = { _ in }) -> Bool {
        let parts = [first, second].filter { $0.count > 0 }
        var offset = 0
        let total = parts.reduce(0) { $0 + $1.count }
        while offset < total {
            var skipped = 0
            var vectors: [iovec] = []
            for part in parts {
                defer { skipped += part.count }
                guard offset < skipped + part.count, let base = part.baseAddress else { continue }
                let start = max(0, offset - skipped)
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: base + start), iov_len: part.count - start))
            }
            let written = vectors.withUnsafeMutableBufferPointer { buffer -> Int in
                var message = msghdr()
                message.msg_iov = buffer.baseAddress
                message.msg_iovlen = numericCast(buffer.count)
                return sendmsg(fd, &message, sendFlags)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            if written == 0 { return false }
            progress(written)
            offset += written
        }
        return true
    }

    /// Reads up to `capacity` bytes; returns an empty array at end of stream or on error.
    static func receive(_ fd: Int32, capacity: Int) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: capacity)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, capacity, 0) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return [] }
            chunk.removeSubrange(count...)
            return chunk
        }
    }

    /// Waits until one of `fds` is readable (or hung up) or `timeout` passes (nil: forever).
    /// Returns the descriptors that are ready.
    static func waitReadable(_ fds: [Int32], timeout: TimeInterval?) -> [Int32] {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let deadline = timeout.map { Date().addingTimeInterval($0) }
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let remaining = deadline.timeIntervalSinceNow
                if remaining <= 0 { return [] }
                milliseconds = Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up))
            }
            let result = entries.withUnsafeMutableBufferPointer {
                poll($0.baseAddress, nfds_t($0.count), milliseconds)
            }
            if result < 0 {
                if errno == EINTR { continue }
                return []
            }
            if result == 0 {
                if deadline == nil { continue }
                return []
            }
            return entries.filter { $0.revents != 0 }.map(\.fd)
        }
    }

    /// Whether the peer of a connected socket closed or reset it: true when a read would end
    /// the stream or fail, false when data waits (or nothing does). Reads nothing.
    static func peerClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        while true {
            #if canImport(Glibc)
            let count = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
            #else
            let count = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT)
            #endif
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
            return count == 0
        }
    }

    /// Makes closing `fd` reset the connection (`SO_LINGER` with a zero timeout: a TCP RST
    /// instead of a FIN), once the peer acknowledged everything sent on it, so the reset loses
    /// none of it: a reset throws away what the sender has not had acknowledged. Waits at most
    /// a second for that, on Linux (`SIOCOUTQ`); stops waiting when `wake` becomes readable.
    static func resetOnClose(_ fd: Int32, unlessSet wake: Int32) {
        #if canImport(Glibc)
        let deadline = Date().addingTimeInterval(1)
        var unacknowledged: Int32 = 0
        while ioctl(fd, UInt(TIOCOUTQ), &unacknowledged) == 0, unacknowledged > 0, deadline.timeIntervalSinceNow > 0 {
            if !waitReadable([wake], timeout: 0.001).isEmpty { break }
        }
        #endif
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Shuts both directions down: a blocked `recv` or `send` on another thread returns, and
    /// the peer sees the connection end. The descriptor stays open (its owner closes it).
    static func shutdownBoth(_ fd: Int32) {
        #if canImport(Glibc)
        _ = shutdown(fd, Int32(SHUT_RDWR))
        #else
        _ = shutdown(fd, SHUT_RDWR)
        #endif
    }
}

#if canImport(Glibc)
private func systemListen(_ fd: Int32, _ backlog: Int32) -> Int32 { Glibc.listen(fd, backlog) }
private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    Glibc.connect(fd, address, length)
}
#else
private func systemListen(_ fd: Int32, _ backlog: Int32) -> Int32 { Darwin.listen(fd, backlog) }
private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    Darwin.connect(fd, address, length)
}
#endif
