import Foundation

/// A request as parsed off the wire, before it gets a connection ID and a timestamp.
struct ParsedRequest {
    var method: String
    var target: String
    var version: String
    var headers: [HTTPField]
    var body: Data

    /// Whether the connection may carry another request after this one: HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    var wantsKeepAlive: Bool {
        let tokens = (headers.value(for: "Connection") ?? "").lowercased()
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if tokens.contains("close") { return false }
        if version == "HTTP/1.0" { return tokens.contains("keep-alive") }
        return true
    }
}

/// Reads HTTP/1.1 requests from a blocking socket, one at a time, keeping any bytes of a
/// pipelined next request for the next call. Used by one connection thread only.
struct RequestReader {
    enum Outcome {
        case request(ParsedRequest)
        /// The peer closed (or the socket was shut down) between requests, or mid-request.
        case closed
        /// Not HTTP as this server understands it; answer 400 and close.
        case malformed(String)
    }

    static let maximumHeadSize = 256 * 1024
    static let maximumBodySize = 256 * 1024 * 1024

    let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes read off the socket so far (a pipelined next request's included).
    private(set) var receivedByteCount = 0

    init(fd: Int32) {
        self.fd = fd
    }

    /// Reads the next request. `sendContinue` is called before the body is read when the
    /// client sent `Expect: 100-continue`.
    mutating func next(sendContinue: () -> Void) -> Outcome {
        guard let headEnd = readHead() else {
            return available == 0 ? .closed : (available > Self.maximumHeadSize ? .malformed("head too large") : .closed)
        }
        let headBytes = buffer[start..<headEnd]
        start = headEnd + 4
        guard let head = String(bytes: headBytes, encoding: .utf8) ?? String(bytes: headBytes, encoding: .isoLatin1) else {
            return .malformed("undecodable head")
        }
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: true)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/") else {
            return .malformed("bad request line")
        }
        var headers: [HTTPField] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon > line.startIndex else {
                return .malformed("bad header line")
            }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            headers.append(HTTPField(name, value))
        }
        var request = ParsedRequest(
            method: String(requestLine[0]), target: String(requestLine[1]), version: String(requestLine[2]),
            headers: headers, body: Data())

        let transferEncoding = headers.value(for: "Transfer-Encoding")?.lowercased()
        let isChunked = transferEncoding?.split(separator: ",").last?.trimmingCharacters(in: .whitespaces) == "chunked"
        var contentLength = 0
        if !isChunked, let lengthText = headers.value(for: "Content-Length") {
            // Repeated identical values ("5, 5") are allowed; different ones are not.
            let values = Set(lengthText.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            guard values.count == 1, let length = Int(values.first!), length >= 0, length <= Self.maximumBodySize else {
                return .malformed("bad Content-Length")
            }
            contentLength = length
        }
        if (isChunked || contentLength > 0),
           headers.value(for: "Expect")?.lowercased() == "100-continue",
           request.version != "HTTP/1.0" {
            sendContinue()
        }
        if isChunked {
            guard let body = readChunkedBody() else { return .closed }
            request.body = body
        } else if contentLength > 0 {
            guard fill(atLeast: contentLength) else { return .closed }
            request.body = Data(buffer[start..<(start + contentLength)])
            start += contentLength
        }
        compact()
        return .request(request)
    }

    private var available: Int { buffer.count - start }

    /// Reads until the buffer holds a complete head; returns the index of its CRLFCRLF.
    private mutating func readHead() -> Int? {
        var searchFrom = start
        while true {
            if buffer.count - searchFrom >= 4 {
                var index = searchFrom
                let last = buffer.count - 4
                while index <= last {
                    if buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
                        return index
                    }
                    index += 1
                }
                searchFrom = max(start, buffer.count - 3)
            }
            if available > Self.maximumHeadSize { return nil }
            guard receiveMore() else { return nil }
        }
    }

    /// Reads `Transfer-Encoding: chunked` data up to and including the trailer section.
    private mutating func readChunkedBody() -> Data? {
        var body = Data()
        while true {
            guard let line = readLine() else { return nil }
            let sizeText = line.split(separator: ";", maxSplits: 1).first.map(String.init)?
                .trimmingCharacters(in: .whitespaces) ?? ""
            guard let size = Int(sizeText, radix: 16), size >= 0, body.count + size <= Self.maximumBodySize else {
                return nil
            }
            if size == 0 {
                // Trailer fields, then an empty line.
                while true {
                    guard let trailer = readLine() else { return nil }
                    if trailer.isEmpty { return body }
                }
            }
            guard fill(atLeast: size + 2) else { return nil }
            body.append(contentsOf: buffer[start..<(start + size)])
            start += size + 2
        }
    }

    /// Reads one CRLF-terminated line and consumes it, without the CRLF.
    private mutating func readLine() -> String? {
        var searchFrom = start
        while true {
            var index = searchFrom
            while index + 1 < buffer.count {
                if buffer[index] == 13 && buffer[index + 1] == 10 {
                    let line = String(decoding: buffer[start..<index], as: UTF8.self)
                    start = index + 2
                    return line
                }
                index += 1
            }
            searchFrom = max(start, buffer.count - 1)
            if available > Self.maximumHeadSize { return nil }
            guard receiveMore() else { return nil }
        }
    }

    private mutating func fill(atLeast count: Int) -> Bool {
        while available < count {
            guard receiveMore() else { return false }
        }
        return true
    }

    private mutating func receiveMore() -> Bool {
        let chunk = POSIXSocket.receive(fd, capacity: 64 * 1024)
        if chunk.isEmpty { return false }
        receivedByteCount += chunk.count
        buffer.append(contentsOf: chunk)
        return true
    }

    private mutating func compact() {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 64 * 1024 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }
}
