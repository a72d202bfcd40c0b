import Foundation

/// One HTTP header field, name and value as they appear on the wire.
///
/// Names keep the case they were written in; compare them case-insensitively.
/// A plain value type, safe to share between threads.
public struct HTTPField: Sendable, Equatable, CustomStringConvertible {
    /// The field name, e.g. `"Cache-Control"`.
    public var name: String
    /// The field value with surrounding whitespace removed, e.g. `"max-age=60"`.
    public var value: String

    /// Creates a field; `HTTPField("ETag", "\"v1\"")`.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// `"Name: value"`.
    public var description: String { "\(name): \(value)" }
}

extension Array where Element == HTTPField {
    /// The value of the field called `name` (case-insensitive), repeated fields joined by `", "`;
    /// nil when there is no such field.
    public func value(for name: String) -> String? {
        let values = filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether a field called `name` (case-insensitive) is present.
    public func contains(name: String) -> Bool {
        contains { $0.name.caseInsensitiveCompare(name) == .orderedSame }
    }
}

/// A request as the loopback origin received it. Logged before its handler runs.
/// A value type, safe to share between threads.
public struct OriginRequest: Sendable {
    /// The request method as sent, e.g. `"GET"`.
    public let method: String
    /// The raw request-target, e.g. `"/feed?page=2"`.
    public let target: String
    /// The protocol version from the request line, e.g. `"HTTP/1.1"`.
    public let version: String
    /// The header fields in wire order.
    public let headers: [HTTPField]
    /// The request body, de-chunked when it was sent with `Transfer-Encoding: chunked`;
    /// empty when there was none.
    public let body: Data
    /// Which TCP connection carried the request: 1 for the first connection the origin
    /// accepted, 2 for the next, and so on (never reset). Equal IDs mean keep-alive reuse.
    public let connectionID: Int
    /// When the request arrived, by the origin's injectable clock.
    public let receivedAt: Date

    /// Creates a request, e.g. to call a handler or an ``OriginResource`` directly in a test.
    public init(
        method: String, target: String, version: String = "HTTP/1.1", headers: [HTTPField] = [],
        body: Data = Data(), connectionID: Int = 0, receivedAt: Date = Date()
    ) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
        self.receivedAt = receivedAt
    }

    /// The target without its query, e.g. `"/feed"` for `"/feed?page=2"`.
    public var path: String {
        guard let mark = target.firstIndex(of: "?") else { return target }
        return String(target[..<mark])
    }

    /// The query without the `?`, e.g. `"page=2"`; nil when the target has no `?`.
    public var query: String? {
        guard let mark = target.firstIndex(of: "?") else { return nil }
        return String(target[target.index(after: mark)...])
    }

    /// The value of header `name` (case-insensitive), repeated fields joined by `", "`;
    /// nil when the request has no such field.
    public func header(_ name: String) -> String? {
        headers.value(for: name)
    }
}

/// What a handler answers. The server adds the framing (`Content-Length` or
/// `Transfer-Encoding`), a `Date` field unless told not to, and `Connection: close` when it
/// is about to close. A value type, safe to share between threads.
public struct OriginResponse: Sendable {
    /// How the body is framed on the wire.
    public enum Transfer: Sendable, Equatable {
        /// One `Content-Length` and the whole response in one write (the default).
        case contentLength
        /// `Transfer-Encoding: chunked`, the body cut into chunks of `chunkSize` bytes, each chunk
        /// written separately so that a client receives the body in many pieces.
        case chunked(chunkSize: Int)
        /// Like `chunked`, with a pause of `interval` seconds before every chunk after the first:
        /// a slow origin whose body arrives piece by piece over time (a stream, a long poll, a
        /// congested link). `stop()` cuts a pause short and closes the connection.
        case paced(chunkSize: Int, interval: TimeInterval)
    }

    /// A deliberate misbehaviour, to test how a client copes with a broken origin.
    public enum Fault: Sendable, Equatable {
        /// Declares the full `Content-Length`, sends only the first `n` body bytes, then closes:
        /// the origin dying mid-body. With `.chunked` transfer, closes after `n` body bytes
        /// without the last chunk.
        case closeAfterBodyBytes(Int)
        /// Like `closeAfterBodyBytes`, but resets the connection (a TCP RST) once the client's
        /// side has acknowledged those bytes, instead of closing it in order: a connection lost
        /// mid-body, as a mobile network drops one. With `.chunked` transfer, resets after `n`
        /// body bytes without the last chunk.
        case resetAfterBodyBytes(Int)
        /// Declares this (larger) `Content-Length`, sends the real body, then closes.
        case declaredLength(Int)
        /// Waits this many seconds on the server before sending anything, then answers normally.
        /// `stop()` cuts the wait short and closes the connection instead.
        case stall(TimeInterval)
        /// Reads the request, then closes the connection without sending a byte.
        ///
        /// A client that sent the request on a reused keep-alive connection may retry it once
        /// on a new connection (libcurl, and so URLSession on Linux, does), so the origin can log
        /// it twice.
        case closeWithoutResponse
    }

    /// The status code; the reason phrase is the standard one.
    public var status: Int
    /// Header fields in the order to send them. Any `Content-Length` or `Transfer-Encoding`
    /// here is dropped: the server writes its own from `body` and `transfer`.
    public var headers: [HTTPField]
    /// The body. For a HEAD request, or a 1xx, 204 or 304 status, it is not sent; for HEAD its
    /// size still gives the `Content-Length`, as the GET would have.
    public var body: Data
    /// How to frame the body; default `.contentLength`.
    public var transfer: Transfer
    /// A misbehaviour to act out; default nil (a well-formed response).
    public var fault: Fault?
    /// Whether the server adds a `Date` field (from the origin's clock) when `headers` has
    /// none; default true. Set false to send a response without `Date`.
    public var addsDateHeader: Bool

    /// Creates a response; every argument has a default (an empty `200 OK`).
    public init(
        status: Int = 200, headers: [HTTPField] = [], body: Data = Data(),
        transfer: Transfer = .contentLength, fault: Fault? = nil, addsDateHeader: Bool = true
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.transfer = transfer
        self.fault = fault
        self.addsDateHeader = addsDateHeader
    }

    /// A response with a UTF-8 text body and `Content-Type: text/plain; charset=utf-8`
    /// followed by `headers`.
    public static func text(_ text: String, status: Int = 200, headers: [HTTPField] = []) -> OriginResponse {
        OriginResponse(
            status: status,
            headers: [HTTPField("Content-Type", "text/plain; charset=utf-8")] + headers,
            body: Data(text.utf8))
    }

    /// The value of header `name` (case-insensitive), repeated fields joined by `", "`.
    public func header(_ name: String) -> String? {
        headers.value(for: name)
    }

    /// The standard reason phrase for `status`, e.g. `"Not Modified"`; `"Unknown"` otherwise.
    public static func reasonPhrase(_ status: Int) -> String {
        reasonPhrases[status] ?? "Unknown"
    }

    private static let reasonPhrases: [Int: String] = [
        100: "Continue", 101: "Switching Protocols",
        200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information",
        204: "No Content", 205: "Reset Content", 206: "Partial Content",
        300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other",
        304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout", 409: "Conflict",
        410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Content Too Large",
        414: "URI Too Long", 415: "Unsupported Media Type", 416: "Range Not Satisfiable",
        429: "Too Many Requests", 431: "Request Header Fields Too Large",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
        503: "Service Unavailable", 504: "Gateway Timeout",
    ]
}
