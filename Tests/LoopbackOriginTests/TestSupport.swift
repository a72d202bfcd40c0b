#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

@testable import LoopbackOrigin

/// A URLSession that never caches and gives up after a few seconds.
func makeSession(timeout: TimeInterval = 5) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.timeoutIntervalForRequest = timeout
    configuration.timeoutIntervalForResource = timeout
    return URLSession(configuration: configuration)
}

/// Sends `request` and returns the body and the HTTP response.
func fetch(_ session: URLSession, _ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
    let (data, response) = try await session.data(for: request)
    guard let http = response as? HTTPURLResponse else {
        throw URLError(.badServerResponse)
    }
    return (data, http)
}

func fetch(_ session: URLSession, _ url: URL, method: String = "GET", headers: [String: String] = [:], body: Data? = nil)
    async throws -> (Data, HTTPURLResponse)
{
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    request.httpBody = body
    return try await fetch(session, request)
}

/// A response as read off a raw socket.
struct RawResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    /// How many chunks carried the body (0 unless chunked).
    var chunkCount: Int
    /// Every byte read for this response, head included.
    var wireByteCount: Int

    func header(_ name: String) -> String? {
        let values = headers.filter { $0.0.caseInsensitiveCompare(name) == .orderedSame }.map(\.1)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    func count(of name: String) -> Int {
        headers.filter { $0.0.caseInsensitiveCompare(name) == .orderedSame }.count
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

struct RawClientError: Error, CustomStringConvertible {
    let description: String
}

/// A blocking TCP client for exact control over the bytes on the wire. Every read gives up
/// after `timeout` seconds (SO_RCVTIMEO), so a broken server fails a test instead of hanging it.
final class RawConnection {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, timeout: Int = 5) throws {
        #if canImport(Glibc)
        let type = Int32(SOCK_STREAM.rawValue)
        #else
        let type = SOCK_STREAM
        #endif
        fd = socket(AF_INET, type, 0)
        guard fd >= 0 else { throw RawClientError(description: "socket: errno \(errno)") }
        var address = POSIXSocket.loopbackAddress(port: UInt16(port))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw RawClientError(description: "connect to port \(port): errno \(code) (\(String(cString: strerror(code))))")
        }
        var interval = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)
            #else
            let flags: Int32 = 0
            #endif
            let written = bytes.withUnsafeBytes { systemSend(fd, $0.baseAddress! + offset, bytes.count - offset, flags) }
            guard written > 0 else { throw RawClientError(description: "send: errno \(errno)") }
            offset += written
        }
    }

    /// Whether the server reset the connection (rather than closing it in order).
    private(set) var wasReset = false

    /// Reads more bytes; false at end of stream. Throws on a timeout or error.
    private func receiveMore() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 65_536, 0) }
        if count == 0 { return false }
        if count < 0 {
            let code = errno
            if code == ECONNRESET {
                wasReset = true
                return false
            }
            throw RawClientError(description: "recv: errno \(code) (\(String(cString: strerror(code))))")
        }
        buffer.append(contentsOf: chunk[0..<count])
        return true
    }

    private func readLine() throws -> String? {
        while true {
            if let index = indexOfCRLF() {
                let line = String(decoding: buffer[0..<index], as: UTF8.self)
                buffer.removeSubrange(0..<(index + 2))
                return line
            }
            guard try receiveMore() else { return nil }
        }
    }

    private func indexOfCRLF() -> Int? {
        guard buffer.count >= 2 else { return nil }
        for index in 0..<(buffer.count - 1) where buffer[index] == 13 && buffer[index + 1] == 10 {
            return index
        }
        return nil
    }

    private func read(exactly count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try receiveMore() else {
                throw RawClientError(description: "connection closed after \(buffer.count) of \(count) bytes")
            }
        }
        let bytes = Array(buffer[0..<count])
        buffer.removeSubrange(0..<count)
        return bytes
    }

    /// Reads until the server closes and returns everything not yet consumed.
    func readToEnd() throws -> [UInt8] {
        while try receiveMore() {}
        defer { buffer.removeAll() }
        return buffer
    }

    /// Whether the server has closed the connection (reads to the end; throws on timeout).
    func isClosedByServer() throws -> Bool {
        try readToEnd().isEmpty
    }

    /// Reads one response: the head, then a body framed by chunks, Content-Length or the end of
    /// the connection. `forHead` says the request was HEAD (so there is no body).
    func readResponse(forHead: Bool = false) throws -> RawResponse {
        var wire = 0
        guard let statusLine = try readLine() else { throw RawClientError(description: "closed before a response") }
        wire += statusLine.utf8.count + 2
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else {
            throw RawClientError(description: "bad status line \(statusLine)")
        }
        var headers: [(String, String)] = []
        while let line = try readLine() {
            wire += line.utf8.count + 2
            if line.isEmpty { break }
            let colon = line.firstIndex(of: ":")!
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var response = RawResponse(status: status, headers: headers, body: [], chunkCount: 0, wireByteCount: 0)
        if forHead || status == 204 || status == 304 || (100..<200).contains(status) {
            response.wireByteCount = wire
            return response
        }
        if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            while true {
                guard let sizeLine = try readLine() else { throw RawClientError(description: "closed mid-chunk") }
                wire += sizeLine.utf8.count + 2
                let size = Int(sizeLine, radix: 16)!
                if size == 0 {
                    while let trailer = try readLine() {
                        wire += trailer.utf8.count + 2
                        if trailer.isEmpty { break }
                    }
                    break
                }
                response.body += try read(exactly: size)
                _ = try read(exactly: 2)
                wire += size + 2
                response.chunkCount += 1
            }
        } else if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            response.body = try read(exactly: length)
            wire += length
        } else {
            response.body = try readToEnd()
            wire += response.body.count
        }
        response.wireByteCount = wire
        return response
    }
}

#if canImport(Glibc)
private func systemSend(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
    Glibc.send(fd, pointer, count, flags)
}
#else
private func systemSend(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
    Darwin.send(fd, pointer, count, flags)
}
#endif

/// Whether a TCP connection to 127.0.0.1:`port` is refused right now.
func connectionIsRefused(port: Int) -> Bool {
    do {
        _ = try RawConnection(port: port)
        return false
    } catch {
        return true
    }
}
