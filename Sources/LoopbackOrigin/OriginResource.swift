import Foundation

/// A resource with validators that answers conditional requests like a real server.
///
/// Register it with ``LoopbackOrigin/serve(_:_:)``. It answers GET and HEAD itself and 405 to
/// other methods (unless a handler is registered for the same path with
/// ``LoopbackOrigin/handle(_:_:)``, which then gets them):
/// - GET: 200 with the body, `Content-Type`, `ETag`, `Last-Modified` (IMF-fixdate) and the
///   extra headers; the server adds `Date`.
/// - HEAD: the same status and headers, including the `Content-Length` the GET would have,
///   and no body.
/// - `If-None-Match` (a list, weak comparison, or `*`) that matches: 304 with `ETag`,
///   `Last-Modified`, `Date` and any `Cache-Control`, `Vary`, `Expires` and `Content-Location`
///   from the extra headers, and no body.
/// - `If-Modified-Since` at or after `Last-Modified` (to the second), when the request has no
///   `If-None-Match`: 304 likewise.
///
/// Thread-safe and mutable: a test may ``update(body:lastModified:)`` it while a client is
/// talking to the origin; each response reflects one consistent state.
public final class OriginResource: Sendable {
    /// Where a resource's `ETag` comes from.
    public enum ETagMode: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByNilLiteral {
        /// A strong ETag derived from the body (a quoted hash, e.g. `"\"1f-9a3b…\""`), which
        /// changes whenever the body does.
        case automatic
        /// Exactly this value, which must include its quotes (and `W/` for a weak tag), e.g.
        /// `"\"v1\""`. Kept across ``OriginResource/update(body:lastModified:)``.
        case fixed(String)
        /// No `ETag` field at all.
        case none

        /// A string literal is a fixed ETag: `etag: "\"v1\""`.
        public init(stringLiteral value: String) {
            self = .fixed(value)
        }

        /// `nil` is `.none`, so `etag: nil` means "no ETag".
        public init(nilLiteral: ()) {
            self = .none
        }
    }

    /// Where a resource's `Last-Modified` comes from.
    public enum LastModifiedMode: Sendable, Equatable {
        /// Stamped by the clock: the serving origin's `now()` when the resource is first served
        /// and at every ``OriginResource/update(body:lastModified:)`` without a date
        /// (`Date()` until an origin serves it).
        case clock
        /// Exactly this date (sent to the second).
        case fixed(Date)
        /// No `Last-Modified` field at all.
        case none
    }

    private struct State {
        var body: Data
        var contentType: String
        var etagMode: ETagMode
        var etag: String?
        var lastModified: Date?
        /// True while `lastModified` is a provisional stamp that the first serving origin's
        /// clock should replace.
        var awaitsClockStamp: Bool
        var tracksLastModified: Bool
        var headers: [HTTPField]
        var clock: (@Sendable () -> Date)?
    }

    private let state: LockedBox<State>

    /// Creates a resource.
    /// - Parameters:
    ///   - body: the representation sent to GET.
    ///   - contentType: the `Content-Type`; default `"application/octet-stream"`.
    ///   - etag: default `.automatic` (a quoted hash of the body); a string literal for a fixed
    ///     ETag; `.none` for no ETag.
    ///   - lastModified: default `.clock` (the serving origin's `now()` when first served);
    ///     `.fixed(date)` or `.none`.
    ///   - headers: extra fields for every 200, e.g. `Cache-Control` or `Vary`; default none.
    public init(
        body: Data, contentType: String = "application/octet-stream", etag: ETagMode = .automatic,
        lastModified: LastModifiedMode = .clock, headers: [HTTPField] = []
    ) {
        var initial = State(
            body: body, contentType: contentType, etagMode: etag, etag: nil, lastModified: nil,
            awaitsClockStamp: false, tracksLastModified: true, headers: headers, clock: nil)
        switch lastModified {
        case .clock:
            initial.lastModified = Date()
            initial.awaitsClockStamp = true
        case .fixed(let date):
            initial.lastModified = date
        case .none:
            initial.tracksLastModified = false
        }
        initial.etag = Self.resolveETag(etag, body: body)
        state = LockedBox(initial)
    }

    /// Creates a resource whose `Last-Modified` is fixed at `lastModified`; the other
    /// parameters and defaults are those of the initializer taking a `LastModifiedMode`.
    /// (There is deliberately no `Date?` form: `lastModified: .none` must mean "no
    /// Last-Modified", never `Optional.none`.)
    public convenience init(
        body: Data, contentType: String = "application/octet-stream", etag: ETagMode = .automatic,
        lastModified: Date, headers: [HTTPField] = []
    ) {
        self.init(body: body, contentType: contentType, etag: etag, lastModified: .fixed(lastModified), headers: headers)
    }

    /// The current body.
    public var body: Data { state.withLock { $0.body } }
    /// The current `Content-Type`.
    public var contentType: String { state.withLock { $0.contentType } }
    /// The current `ETag` value including quotes, or nil when the resource sends none.
    public var etag: String? { state.withLock { $0.etag } }
    /// The current `Last-Modified` date (sent truncated to the second), or nil when none is sent.
    public var lastModified: Date? { state.withLock { $0.lastModified } }
    /// The extra header fields sent with every 200.
    public var headers: [HTTPField] { state.withLock { $0.headers } }

    /// Replaces the body. An automatic ETag changes with it (a fixed one stays).
    /// `lastModified` nil stamps the clock's current time (unless the resource sends no
    /// `Last-Modified`); a date sets it and turns `Last-Modified` on.
    public func update(body: Data, lastModified: Date? = nil) {
        state.withLock { s in
            s.body = body
            s.etag = Self.resolveETag(s.etagMode, body: body)
            s.awaitsClockStamp = false
            if let lastModified {
                s.lastModified = lastModified
                s.tracksLastModified = true
            } else if s.tracksLastModified {
                s.lastModified = (s.clock ?? { Date() })()
            }
        }
    }

    /// Replaces the extra header fields, e.g. `[HTTPField("Cache-Control", "max-age=60")]`.
    public func setHeaders(_ headers: [HTTPField]) {
        state.withLock { $0.headers = headers }
    }

    /// Changes where the ETag comes from; takes effect with the next response.
    public func setETag(_ mode: ETagMode) {
        state.withLock { s in
            s.etagMode = mode
            s.etag = Self.resolveETag(mode, body: s.body)
        }
    }

    /// Sets `Last-Modified` to `date`, or removes it with nil.
    public func setLastModified(_ date: Date?) {
        state.withLock { s in
            s.lastModified = date
            s.tracksLastModified = date != nil
            s.awaitsClockStamp = false
        }
    }

    /// Changes the `Content-Type`.
    public func setContentType(_ contentType: String) {
        state.withLock { $0.contentType = contentType }
    }

    /// Called by ``LoopbackOrigin/serve(_:_:)``: adopts the origin's clock, and stamps a
    /// clock-mode `Last-Modified` that nothing has set yet.
    func adopt(clock: @escaping @Sendable () -> Date) {
        let now = clock()
        state.withLock { s in
            s.clock = clock
            if s.awaitsClockStamp {
                s.lastModified = now
                s.awaitsClockStamp = false
            }
        }
    }

    /// The response this resource gives `request`, as the origin would send it (before the
    /// server adds `Date` and framing). Safe to call from any thread, e.g. from a custom
    /// handler that wraps the resource.
    public func response(to request: OriginRequest) -> OriginResponse {
        let s = state.withLock { $0 }
        let method = request.method.uppercased()
        guard method == "GET" || method == "HEAD" else {
            var response = OriginResponse.text("Method Not Allowed\n", status: 405)
            response.headers.append(HTTPField("Allow", "GET, HEAD"))
            return response
        }
        var validators: [HTTPField] = []
        if let etag = s.etag { validators.append(HTTPField("ETag", etag)) }
        if let lastModified = s.lastModified {
            validators.append(HTTPField("Last-Modified", IMFFixdate.string(from: lastModified)))
        }
        if Self.isNotModified(request, etag: s.etag, lastModified: s.lastModified) {
            let kept: Set<String> = ["cache-control", "vary", "expires", "content-location"]
            let extra = s.headers.filter { kept.contains($0.name.lowercased()) }
            return OriginResponse(status: 304, headers: validators + extra)
        }
        return OriginResponse(
            status: 200,
            headers: [HTTPField("Content-Type", s.contentType)] + validators + s.headers,
            body: s.body)
    }

    // MARK: - Conditional requests (RFC 9110 §13.1.2, §13.1.3, §13.2.2)

    static func isNotModified(_ request: OriginRequest, etag: String?, lastModified: Date?) -> Bool {
        if let ifNoneMatch = request.header("If-None-Match") {
            let tags = parseEntityTags(ifNoneMatch)
            if tags.contains("*") { return true }
            guard let etag else { return false }
            let mine = opaqueTag(etag)
            return tags.contains { opaqueTag($0) == mine }
        }
        if let ifModifiedSince = request.header("If-Modified-Since"),
           let since = IMFFixdate.date(from: ifModifiedSince),
           let lastModified {
            return lastModified.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
        }
        return false
    }

    /// Splits an `If-None-Match` value into entity-tags (with their `W/` and quotes), or `*`.
    static func parseEntityTags(_ value: String) -> [String] {
        var tags: [String] = []
        var characters = Substring(value)
        while let first = characters.first {
            if first == "," || first == " " || first == "\t" {
                characters.removeFirst()
                continue
            }
            if first == "*" {
                tags.append("*")
                characters.removeFirst()
                continue
            }
            var tag = ""
            if characters.hasPrefix("W/") {
                tag = "W/"
                characters.removeFirst(2)
            }
            if characters.first == "\"" {
                characters.removeFirst()
                let close = characters.firstIndex(of: "\"") ?? characters.endIndex
                tag += "\"" + characters[..<close] + "\""
                characters = close < characters.endIndex ? characters[characters.index(after: close)...] : ""
            } else {
                // Lenient: an unquoted tag runs to the next comma.
                let end = characters.firstIndex(of: ",") ?? characters.endIndex
                tag += "\"" + characters[..<end].trimmingCharacters(in: .whitespaces) + "\""
                characters = characters[end...]
            }
            tags.append(tag)
        }
        return tags
    }

    /// The tag without its weakness marker, for the weak comparison.
    static func opaqueTag(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }

    static func resolveETag(_ mode: ETagMode, body: Data) -> String? {
        switch mode {
        case .automatic:
            // FNV-1a, 64 bits: stable across runs and platforms.
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in body {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01B3
            }
            let hex = String(hash, radix: 16)
            return "\"\(String(body.count, radix: 16))-\(String(repeating: "0", count: 16 - hex.count))\(hex)\""
        case .fixed(let value):
            return value
        case .none:
            return nil
        }
    }
}
