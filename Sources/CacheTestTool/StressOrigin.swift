import Foundation
import LoopbackOrigin

/// The stress run's origin: a ``LoopbackOrigin`` whose resources change their answers every few
/// requests and whose fault script breaks about one response in twenty, recording every response
/// it sends so that ``StressChecker`` can tell whether an answer is one the origin gave.
///
/// Every resource answers each user (`Authorization: Bearer <name>`, or none) a body of its own
/// per version, with one `ETag` and `Last-Modified` per version shared by all users (origins do
/// that; a cache must not serve one user's body after a 304 another user got). Resources mix
/// `max-age`, `no-cache`, `must-revalidate`, `no-store`, `Expires`, `public`, `private`,
/// `stale-while-revalidate` and none; they answer `If-None-Match`, `If-Modified-Since`, `Range`
/// and `If-Range`. `/go/<n>` redirects (302) to a resource and `/moved/<n>` (301) to a `/go/`;
/// `/slow/<n>` send their body over about 0.3 s, and `/go-slow/<n>` redirects to one.
///
/// Faults, decided by a hash of the seed and the request's identity (method, path, user and how
/// many such requests came before), so a seed replays the same script whatever the timing: the
/// connection reset or closed mid-body, a body shorter than its `Content-Length`, a stall
/// (shorter or longer than the short request timeout), a 5xx, junk header fields, and a
/// connection closed without a response.
///
/// Threading: handlers run on the origin's connection threads; the record is under one lock.
final class StressOrigin: Sendable {
    /// How a resource asks to be cached.
    enum Profile: CaseIterable, Sendable {
        case maxAgeAndETag, maxAgeAndLastModified, noCacheAndETag, mustRevalidate, noStore, image
        case etagOnly, publicAndETag, expiresAndLastModified, staleWhileRevalidate, privateMaxAge, nothing
    }

    /// A fault of the script.
    enum Fault: String, Sendable {
        case resetMidBody = "reset mid-body"
        case closedMidBody = "closed mid-body"
        case shortBody = "body shorter than Content-Length"
        case stall
        case serverError = "5xx"
        case junkHeaders = "junk headers"
        case noResponse = "closed without a response"
    }

    struct Resource: Sendable {
        let path: String
        let profile: Profile
        /// The body's length at version 0 (later versions differ by a few bytes).
        let length: Int
        /// How many requests (any user, GET or HEAD) each version answers.
        let period: Int
        let transfer: OriginResponse.Transfer
    }

    /// A body the origin sent, with what went with it.
    struct Served: Sendable {
        var status: Int
        /// Every `ETag` value sent with this body ("" for none).
        var etags: Set<String>
        /// When it was sent, as ``sequence`` numbers.
        var sequences: [Int]
    }

    private struct State {
        /// GET and HEAD requests per resource path: they move its version on.
        var requestsPerPath: [String: Int] = [:]
        /// Requests per identity (method, path, user): which one of its kind a request is.
        var requestsPerIdentity: [String: Int] = [:]
        /// Every body sent, per "path user".
        var served: [String: [Data: Served]] = [:]
        var sequence = 0
        var faults: [String: Int] = [:]
    }

    let origin: LoopbackOrigin
    /// Resources that answer at once (but for the script's stalls).
    let resources: [Resource]
    /// Resources whose body arrives over about 0.3 s: the ones the app cancels.
    let slowResources: [Resource]
    /// Redirecting paths and where they point (a path of this origin).
    let redirects: [String: (status: Int, target: String)]
    private let seed: UInt64
    private let clock: ManualClock
    /// The clock's reading at the start: `Last-Modified` of version `v` is a fixed time before it.
    private let start: Date
    private let state = LockedBox(State())

    /// The request timeouts of the stress run's sessions: a stall longer than the long one fails
    /// every load it holds.
    static let shortTimeout: TimeInterval = 2
    static let longTimeout: TimeInterval = 4

    init(seed: UInt64, clock: ManualClock) throws {
        self.seed = seed
        self.clock = clock
        start = clock.now
        origin = try LoopbackOrigin(now: clock.read)
        var random = SeededGenerator(seed: seed, stream: 1)
        let profiles = Profile.allCases
        resources = (0..<(profiles.count + 4)).map { index in
            let length: Int
            var transfer = OriginResponse.Transfer.contentLength
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                length = Int.random(in: 120_000...260_000, using: &random)
                transfer = .paced(chunkSize: 32 << 10, interval: 0.005)
            case 1...3:
                length = Int.random(in: 8_000...40_000, using: &random)
                if random.chance(50) { transfer = .chunked(chunkSize: 4 << 10) }
            default:
                length = Int.random(in: 200...3_000, using: &random)
            }
            return Resource(path: "/r/\(index)", profile: profiles[index % profiles.count], length: length,
                            period: Int.random(in: 2...6, using: &random), transfer: transfer)
        }
        // The loads an app cancels take a while: a body of about 24 KB that arrives over 0.3 s.
        let slowProfiles: [Profile] = [.maxAgeAndETag, .publicAndETag, .mustRevalidate, .noStore]
        slowResources = slowProfiles.enumerated().map { index, profile in
            Resource(path: "/slow/\(index)", profile: profile, length: Int.random(in: 20_000...28_000, using: &random),
                     period: Int.random(in: 2...6, using: &random), transfer: .paced(chunkSize: 2 << 10, interval: 0.025))
        }
        var redirects: [String: (Int, String)] = [:]
        for index in 0..<4 {
            redirects["/go/\(index)"] = (302, resources[(index * 5 + 1) % resources.count].path)
            redirects["/moved/\(index)"] = (301, "/go/\(index)")
            redirects["/go-slow/\(index)"] = (302, slowResources[index].path)
        }
        self.redirects = redirects
        for resource in resources + slowResources {
            origin.handle(resource.path) { [unowned self] request in respond(to: request, resource: resource) }
        }
        for (path, (status, target)) in redirects {
            origin.handle(path) { [unowned self] request in redirect(request, path: path, status: status, to: target) }
        }
    }

    /// The paths of resources that answer at once, and of the redirects to them.
    var quickPaths: [String] { resources.map(\.path) + redirects.keys.filter { !$0.hasPrefix("/go-slow/") }.sorted() }
    /// The paths of resources whose body takes a while, and of the redirects to them.
    var slowPaths: [String] { slowResources.map(\.path) + redirects.keys.filter { $0.hasPrefix("/go-slow/") }.sorted() }

    /// The user a request is for: the name in `Authorization: Bearer <name>`, or "anonymous".
    static func user(of request: OriginRequest) -> String {
        guard let value = request.header("Authorization"), value.hasPrefix("Bearer ") else { return "anonymous" }
        return String(value.dropFirst("Bearer ".count))
    }

    /// The body of `path`'s `version` for `user`: a line naming them, then bytes that follow from
    /// them, so two versions or two users never share a body.
    func body(_ path: String, user: String, version: Int, length: Int) -> Data {
        var body = Data("STRESS \(path) user=\(user) version=\(version)\n".utf8)
        var random = SeededGenerator(seed: seed ^ fnv1a("\(path) \(user) \(version)"))
        let count = length + version % 7
        body.reserveCapacity(count)
        while body.count < count {
            body.append(UInt8(truncatingIfNeeded: random.next()))
        }
        return body
    }

    // MARK: - The record

    /// How many requests the origin has counted; each response is recorded with the count at its
    /// sending. A load that notes it before it starts and after it ends knows which responses
    /// were sent while it ran: those recorded above the first and up to the second.
    var sequence: Int { state.withLock { $0.sequence } }

    /// The bodies sent for `path` to `user`, with what went with them.
    func served(_ path: String, user: String) -> [Data: Served] {
        state.withLock { $0.served["\(path) \(user)"] ?? [:] }
    }

    /// How many responses of each fault the script acted out.
    var faultCounts: [String: Int] { state.withLock { $0.faults } }

    /// Records `body` as sent for `path` to `user` (a 206's whole body: the part is checked
    /// against it).
    private func record(_ path: String, user: String, status: Int, body: Data, etag: String?) {
        state.withLock { state in
            let sequence = state.sequence
            state.served["\(path) \(user)", default: [:]][body, default: Served(status: status, etags: [], sequences: [])]
                .sequences.append(sequence)
            state.served["\(path) \(user)"]?[body]?.etags.insert(etag ?? "")
        }
    }

    /// Counts the request and returns its resource's version (for resources) and which request of
    /// its identity it is.
    private func count(_ request: OriginRequest, user: String, period: Int?) -> (version: Int, ordinal: Int) {
        state.withLock { state in
            state.sequence += 1
            let identity = "\(request.method) \(request.path) \(user)"
            let ordinal = state.requestsPerIdentity[identity, default: 0]
            state.requestsPerIdentity[identity] = ordinal + 1
            guard let period else { return (0, ordinal) }
            let seen = state.requestsPerPath[request.path, default: 0]
            state.requestsPerPath[request.path] = seen + 1
            return (seen / period, ordinal)
        }
    }

    /// The fault for the `ordinal`-th request of an identity, if the script has one: about 5 %.
    /// A connection closed without a response is closed for the next request of the identity
    /// too: libcurl sends a request once more, on a new connection, when a reused one closes
    /// without a response, and the fault is meant to reach the app.
    private func fault(_ request: OriginRequest, user: String, ordinal: Int) -> (Fault, UInt64)? {
        if ordinal > 0, let (previous, detail) = scripted(request, user: user, ordinal: ordinal - 1), previous == .noResponse {
            return (.noResponse, detail)
        }
        return scripted(request, user: user, ordinal: ordinal)
    }

    private func scripted(_ request: OriginRequest, user: String, ordinal: Int) -> (Fault, UInt64)? {
        let hash = SeededGenerator.mix(seed ^ fnv1a("\(request.method) \(request.path) \(user) \(ordinal)"))
        guard hash % 1000 < 50 else { return nil }
        var pick = Int((hash / 1000) % 100)
        for (fault, weight) in Self.faultWeights {
            if pick < weight { return (fault, hash / 7919) }
            pick -= weight
        }
        return (.junkHeaders, hash / 7919)
    }

    /// How often each fault comes, in per cent of the faults. Stalls and connections closed
    /// without a response come more often: a stall fails only a load with the short timeout, and
    /// one closed without a response often fails nothing (libcurl's second try is the next
    /// request, which may have no fault). The errors of each are then frequent enough in a run
    /// without the layer that the run with it is compared with all of them.
    static let faultWeights: [(Fault, Int)] = [
        (.resetMidBody, 12), (.closedMidBody, 10), (.shortBody, 10), (.stall, 26), (.serverError, 10),
        (.junkHeaders, 8), (.noResponse, 24),
    ]

    // MARK: - Answering

    private func respond(to request: OriginRequest, resource: Resource) -> OriginResponse {
        let user = Self.user(of: request)
        let (version, ordinal) = count(request, user: user, period: resource.period)
        let body = body(resource.path, user: user, version: version, length: resource.length)
        let etag = "\"v\(version)\""
        let lastModified = start.addingTimeInterval(-1_000_000 + Double(version) * 60)
        var headers = validators(resource.profile, etag: etag, lastModified: lastModified)
        headers += cacheHeaders(resource.profile)
        headers.append(HTTPField("Content-Type", resource.profile == .image ? "image/png" : "application/octet-stream"))
        var response = OriginResponse(status: 200, headers: headers, body: body, transfer: resource.transfer)

        if isNotModified(request, profile: resource.profile, etag: etag, lastModified: lastModified) {
            response = OriginResponse(status: 304, headers: headers.filter { $0.name != "Content-Type" })
        } else if let range = Self.range(request, etag: etag) {
            if range.lowerBound < body.count {
                let upper = min(range.upperBound, body.count - 1)
                response.status = 206
                response.headers.append(HTTPField("Content-Range", "bytes \(range.lowerBound)-\(upper)/\(body.count)"))
                response.body = body[range.lowerBound...upper]
            } else {
                response = OriginResponse(status: 416, headers: [HTTPField("Content-Range", "bytes */\(body.count)")],
                                          body: Data("range not satisfiable\n".utf8))
            }
        }
        if let (fault, detail) = fault(request, user: user, ordinal: ordinal) {
            apply(fault, detail: detail, to: &response, version: version)
        }
        let sendsBody = request.method != "HEAD" && response.status != 304 && response.fault != .closeWithoutResponse
        if sendsBody {
            let sentETag = response.header("ETag")
            switch response.status {
            case 200 where response.body == body, 206:
                record(resource.path, user: user, status: 200, body: body, etag: sentETag)
            default:
                record(resource.path, user: user, status: response.status, body: response.body, etag: sentETag)
            }
        }
        return response
    }

    private func redirect(_ request: OriginRequest, path: String, status: Int, to target: String) -> OriginResponse {
        let user = Self.user(of: request)
        let (_, ordinal) = count(request, user: user, period: nil)
        let body = Data("moved to \(target)\n".utf8)
        var response = OriginResponse(status: status, headers: [
            HTTPField("Location", origin.url(target).absoluteString), HTTPField("Cache-Control", "max-age=30"),
            HTTPField("Content-Type", "text/plain"),
        ], body: body)
        if let (fault, detail) = fault(request, user: user, ordinal: ordinal) {
            apply(fault, detail: detail, to: &response, version: 0)
        }
        if request.method != "HEAD" && response.fault != .closeWithoutResponse {
            record(path, user: user, status: response.status, body: response.body, etag: response.header("ETag"))
        }
        return response
    }

    private func validators(_ profile: Profile, etag: String, lastModified: Date) -> [HTTPField] {
        switch profile {
        case .maxAgeAndETag, .noCacheAndETag, .mustRevalidate, .etagOnly, .publicAndETag, .staleWhileRevalidate:
            return [HTTPField("ETag", etag)]
        case .maxAgeAndLastModified, .expiresAndLastModified:
            return [HTTPField("Last-Modified", IMFFixdate.string(from: lastModified))]
        case .noStore, .image, .privateMaxAge, .nothing:
            return []
        }
    }

    private func cacheHeaders(_ profile: Profile) -> [HTTPField] {
        switch profile {
        case .maxAgeAndETag: return [HTTPField("Cache-Control", "max-age=2")]
        case .maxAgeAndLastModified: return [HTTPField("Cache-Control", "max-age=3")]
        case .noCacheAndETag: return [HTTPField("Cache-Control", "no-cache")]
        case .mustRevalidate: return [HTTPField("Cache-Control", "max-age=0, must-revalidate")]
        case .noStore: return [HTTPField("Cache-Control", "no-store")]
        case .publicAndETag: return [HTTPField("Cache-Control", "public, max-age=4")]
        case .expiresAndLastModified: return [HTTPField("Expires", IMFFixdate.string(from: clock.now.addingTimeInterval(5)))]
        case .staleWhileRevalidate: return [HTTPField("Cache-Control", "max-age=1, stale-while-revalidate=5")]
        case .privateMaxAge: return [HTTPField("Cache-Control", "private, max-age=3")]
        case .image, .etagOnly, .nothing: return []
        }
    }

    /// RFC 9110 §13.1.2 and §13.1.3, for the validators this resource sends.
    private func isNotModified(_ request: OriginRequest, profile: Profile, etag: String, lastModified: Date) -> Bool {
        let sends = validators(profile, etag: etag, lastModified: lastModified)
        if let ifNoneMatch = request.header("If-None-Match") {
            guard sends.contains(name: "ETag") else { return false }
            return ifNoneMatch.split(separator: ",").contains { member in
                let tag = member.trimmingCharacters(in: .whitespaces)
                return tag == "*" || tag == etag || tag == "W/" + etag
            }
        }
        if let since = request.header("If-Modified-Since").flatMap(IMFFixdate.date(from:)), sends.contains(name: "Last-Modified") {
            return lastModified.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
        }
        return false
    }

    /// The one byte range `request` asks for (`bytes=a-b` or `bytes=a-`), unless an `If-Range`
    /// names another version.
    static func range(_ request: OriginRequest, etag: String) -> ClosedRange<Int>? {
        guard let value = request.header("Range"), value.hasPrefix("bytes="), !value.contains(",") else { return nil }
        if let ifRange = request.header("If-Range"), ifRange != etag { return nil }
        let bounds = value.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let lower = Int(bounds[0]) else { return nil }
        let upper = bounds[1].isEmpty ? Int.max : Int(bounds[1])
        guard let upper, upper >= lower else { return nil }
        return lower...upper
    }

    private func apply(_ fault: Fault, detail: UInt64, to response: inout OriginResponse, version: Int) {
        state.withLock { $0.faults[fault.rawValue, default: 0] += 1 }
        let bodyLength = response.body.count
        switch fault {
        case .resetMidBody:
            response.fault = .resetAfterBodyBytes(Int(detail % UInt64(max(1, bodyLength))))
        case .closedMidBody:
            response.fault = .closeAfterBodyBytes(Int(detail % UInt64(max(1, bodyLength))))
        case .shortBody:
            response.fault = .declaredLength(bodyLength + 1 + Int(detail % 1000))
            response.transfer = .contentLength
        case .stall:
            // Two in three outlast every request timeout of the run.
            response.fault = .stall([0.3, Self.longTimeout + 0.5, Self.longTimeout + 1][Int(detail % 3)])
        case .serverError:
            let status = [500, 502, 503][Int(detail % 3)]
            response = OriginResponse(status: status, headers: [HTTPField("Content-Type", "text/plain")],
                                      body: Data("error \(status)\n".utf8))
        case .junkHeaders:
            let junk: [[HTTPField]] = [
                [HTTPField("Cache-Control", "max-age=abc, , =, no-store=\"")],
                [HTTPField("Cache-Control", "max-age=60 , public")],
                [HTTPField("Cache-Control", "max-age=99999999999999999999")],
                [HTTPField("Expires", "garbage"), HTTPField("Age", "-5")],
                [HTTPField("Age", "99999999999999999999999")],
                [HTTPField("Last-Modified", "yesterday"), HTTPField("Date", "not a date")],
                [HTTPField("ETag", "unquoted-v\(version)")],
                [HTTPField("Vary", "*")],
                [HTTPField("X-Junk", "\u{7}\u{1}bell"), HTTPField("Content-Type", "")],
            ]
            let extra = junk[Int(detail % UInt64(junk.count))]
            let replaced = Set(extra.map { $0.name.lowercased() })
            response.headers = response.headers.filter { !replaced.contains($0.name.lowercased()) } + extra
            if replaced.contains("date") { response.addsDateHeader = false }
        case .noResponse:
            response.fault = .closeWithoutResponse
        }
    }
}
