import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The fuzz targets (run by `Scripts/fuzz.sh`): each takes arbitrary bytes, runs one parser or
/// decoder of the library on them, and traps when an invariant breaks, so a fuzzer reports it
/// like a crash. They reach the library's parsers and decoders through `package` access; nothing
/// of this harness ships in the library.
///
/// The targets come in two groups, `http` (header parsing and the policy on parsed headers) and
/// `storage` (the entry and index decoders); ``run(group:input:)`` picks a target of the group
/// with the first byte.
enum FuzzEntryPoints {
    /// The target groups, by name.
    static let groups: [String: [@Sendable (UnsafeRawBufferPointer) -> Void]] = [
        "http": [cacheControl, httpDate, headersAndPolicy, urlAndKey],
        "storage": [entryDecoding, framedEntryDecoding, indexLoading, framedJournalReplay],
    ]

    /// Runs the target of `group` that the first byte of `input` selects on the remaining bytes.
    static func run(group: String, input: UnsafeRawBufferPointer) {
        guard let targets = groups[group], let first = input.first else { return }
        targets[Int(first) % targets.count](UnsafeRawBufferPointer(rebasing: input.dropFirst()))
    }

    // MARK: - http

    /// `CacheControl` and its delta-seconds parser: values in range, invalid freshness means a
    /// max-age of 0, and directive names are clean tokens.
    static func cacheControl(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = CacheControl(text)
        check(parsed == CacheControl(text), "parsing is deterministic")
        let limit = CacheControl.maximumDeltaSeconds
        for value in [parsed.maxAge, parsed.sharedMaxAge, parsed.minFresh, parsed.staleWhileRevalidate, parsed.staleIfError] {
            if let value { check((0...limit).contains(value), "delta-seconds in range: \(value)") }
        }
        if case .seconds(let value) = parsed.maxStale { check((0...limit).contains(value), "max-stale in range") }
        if parsed.hasInvalidFreshness { check(parsed.maxAge == 0, "invalid freshness is max-age 0") }
        for (name, _) in CacheControl.directives(in: text) {
            check(!name.isEmpty && !name.contains(",") && !name.contains("="), "directive name \(name)")
            check(name.first != " " && name.first != "\t" && name.last != " " && name.last != "\t", "trimmed name")
        }
        if let seconds = CacheControl.deltaSeconds(Substring(text)) {
            check((0...limit).contains(seconds), "deltaSeconds in range")
        } else {
            check(text.isEmpty || text.utf8.contains { $0 < 0x30 || $0 > 0x39 }, "all digits parse")
        }
    }

    /// `HTTPDate`: a parsed date lies in years 1...9999, and formatting it gives text that
    /// parses back to the same instant.
    static func httpDate(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let date = HTTPDate.parse(text) else { return }
        let seconds = date.timeIntervalSince1970
        check(seconds >= -62_135_596_800 && seconds < 253_402_300_800, "year within 1...9999: \(seconds)")
        let formatted = HTTPDate.format(date)
        check(HTTPDate.parse(formatted) == date, "format then parse round-trips: \(text) -> \(formatted)")
    }

    /// Header fields parsed from the input (`Name: value` lines; lines starting with `>` are
    /// request fields), a status, and both policy presets: storage decisions are finite and
    /// non-negative, every reuse decision can be made at any later time, and a stored response
    /// is always the variant its own request matches.
    static func headersAndPolicy(_ bytes: UnsafeRawBufferPointer) {
        var input = FuzzInput(bytes)
        let status = 100 + Int(input.u16() % 500)
        let flags = input.byte()
        let text = String(decoding: input.rest(), as: UTF8.self)
        var responseFields: [HTTPHeaders.Field] = []
        var requestFields: [(String, String)] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let isRequest = line.hasPrefix(">")
            let content = isRequest ? line.dropFirst() : line[...]
            guard let colon = content.firstIndex(of: ":") else { continue }
            let name = content[..<colon].trimmingCharacters(in: .whitespaces)
            let value = content[content.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { continue }
            if isRequest { requestFields.append((name, value)) } else { responseFields.append(.init(name: name, value: value)) }
        }
        var headers = HTTPHeaders(responseFields)
        for field in responseFields {
            check(headers[field.name] != nil && headers.contains(field.name), "lookup finds \(field.name)")
        }

        let url = URL(string: "https://example.com/fuzz?q=1")!
        var urlRequest = URLRequest(url: url)
        for (name, value) in requestFields { urlRequest.setValue(value, forHTTPHeaderField: name) }
        let request = CacheRequest(urlRequest, key: CacheKey.make(method: "GET", url: url))
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        var policy = flags & 1 == 0 ? CachingPolicy.heuristic() : CachingPolicy.rfc9111
        policy.storesCredentialedResponses = flags & 2 != 0
        let responseDate = start.addingTimeInterval(Double(flags >> 4))
        let decision = policy.storageDecision(for: request, status: status, headers: headers,
                                              requestDate: start, responseDate: responseDate)
        if case .store(let lifetime, let initialAge) = decision {
            check(lifetime.isFinite && lifetime >= 0, "lifetime \(lifetime)")
            check(initialAge.isFinite && initialAge >= 0, "initial age \(initialAge)")
            let entry = CacheEntry(
                responseURL: url.absoluteString, statusCode: status, headers: headers, body: Data(),
                requestDate: start, responseDate: responseDate, initialAge: initialAge, freshnessLifetime: lifetime,
                varyFields: CachingPolicy.varyFields(for: headers, request: request),
                partition: request.partition, userInfo: nil)
            let record = CacheRecord(key: request.key, variants: [entry])
            check(CachingPolicy.matchingVariant(in: record, for: request) == entry, "a response matches its own request")
            for offset in [0, 1, 59, 3_600, 86_401, 315_360_000] as [TimeInterval] {
                let now = responseDate.addingTimeInterval(offset)
                let timeToLive = entry.timeToLive(at: now)
                check(timeToLive.isFinite && abs(timeToLive) < 1e15, "time to live \(timeToLive)")
                _ = policy.plan(for: request, stored: entry, now: now)
                _ = policy.mayServeAfterError(entry, request: request, now: now)
            }
        }
        // Editing: `set` leaves one field with the value, `remove` none.
        if let name = responseFields.first?.name {
            headers.set(name, "edited")
            check(headers[name] == "edited", "set replaces")
            check(headers.fields.filter { $0.name.isEqualIgnoringASCIICase(name) }.count == 1, "set leaves one field")
            headers.remove(name)
            check(!headers.contains(name), "remove removes")
        }
    }

    /// URLs: the cache key keeps the method and URL, and names a file of 32 hex digits only.
    static func urlAndKey(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let url = URL(string: text) else { return }
        let key = CacheKey.make(method: "GET", url: url)
        check(key.hasPrefix("GET "), "key starts with the method")
        check(!key.contains("#"), "no fragment in the key")
        let digest = EntryDigest(key: key)
        let name = digest.fileName
        check(name.utf8.count == 32 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) },
              "file name is 32 lowercase hex digits: \(name)")
        check(EntryDigest(fileName: name) == digest, "file name round-trips")
        _ = RequestDisposition(URLRequest(url: url))
    }

    // MARK: - storage

    /// `EntryCodec.decode` on raw bytes: never traps; whatever it accepts re-encodes to the same
    /// bytes, and the header read from a prefix agrees with it.
    static func entryDecoding(_ bytes: UnsafeRawBufferPointer) {
        var required = 0
        let prefix = UnsafeRawBufferPointer(rebasing: bytes.prefix(EntryCodec.headerProbeSize))
        let header = try? EntryCodec.decodeHeader(prefix, fileSize: bytes.count, requiredPrefixLength: &required)
        guard let record = try? EntryCodec.decode(bytes) else { return }
        checkDecoded(record, encodedAs: bytes)
        if let header = header ?? nil {
            check(header.key == record.key && header.fileLength == bytes.count, "header agrees with the body")
        }
    }

    /// Entry content (the bodies and the variants) from the input, framed as an entry file with
    /// a correct length, header date, variants offset and checksums, so the fuzzer reaches the
    /// structure parser behind them: content the variant parser accepts must decode whole once
    /// framed. The input: a key length byte, the key, the bodies' length (u16), the bodies, the
    /// variants.
    static func framedEntryDecoding(_ bytes: UnsafeRawBufferPointer) {
        var input = FuzzInput(bytes)
        let key = String(decoding: input.bytes(Int(input.byte() % 48)), as: UTF8.self)
        let bodies = input.bytes(Int(input.u16()))
        let variants = input.rest()
        let parsed: [CacheEntry]
        do {
            parsed = try EntryCodec.decodeVariants(variants, bodies: bodies)
        } catch {
            // Rejected content must be rejected framed too.
            let frame = Self.frame(key: key, latestResponseDate: Date(timeIntervalSinceReferenceDate: 0), bodies: bodies, variants: variants)
            check(frame.withUnsafeBytes({ try? EntryCodec.decode($0, expectedKey: key) }) == nil, "rejected content stays rejected")
            return
        }
        let date = CacheRecord(key: key, variants: parsed).latestResponseDate
        let frame = Self.frame(key: key, latestResponseDate: date, bodies: bodies, variants: variants)
        guard let record = frame.withUnsafeBytes({ try? EntryCodec.decode($0, expectedKey: key) }) else {
            return check(false, "accepted content decodes once framed")
        }
        frame.withUnsafeBytes { checkDecoded(record, encodedAs: $0) }
    }

    /// `DiskIndex.load` on a raw snapshot and journal (split where the first two bytes say):
    /// never traps; what it accepts describes itself consistently and survives a new snapshot.
    static func indexLoading(_ bytes: UnsafeRawBufferPointer) {
        var input = FuzzInput(bytes)
        let split = Int(input.u16())
        let snapshot = Data(input.bytes(split))
        let journal = Data(input.rest())
        guard let loaded = try? DiskIndex.load(snapshot: snapshot, journal: journal) else { return }
        checkIndex(loaded.index)
    }

    /// `DiskIndex.load` on a journal of well-formed records built from the input (optionally with
    /// one byte damaged): the index holds exactly what the records say, and damage only loses
    /// the damaged record.
    static func framedJournalReplay(_ bytes: UnsafeRawBufferPointer) {
        var input = FuzzInput(bytes)
        let damage = input.u16()
        var records: [DiskIndex.JournalRecord] = []
        while input.remaining > 0, records.count < 64 {
            let operation = input.byte()
            let digest = EntryDigest(high: UInt64(operation >> 4), low: 7)
            switch operation & 3 {
            case 0:
                let size = operation & 4 == 0 ? Int(input.u16()) : Int(truncatingIfNeeded: input.u64() & 0x7FFF_FFFF_FFFF_FFFF)
                records.append(.put(digest, DiskIndex.Entry(
                    fileSize: size,
                    latestResponseDate: Date(timeIntervalSinceReferenceDate: Double(bitPattern: input.u64())),
                    lastAccess: Date(timeIntervalSinceReferenceDate: Double(Int32(truncatingIfNeeded: input.u32()))))))
            case 1: records.append(.remove(digest))
            case 2: records.append(.touch(digest, Date(timeIntervalSinceReferenceDate: Double(Int32(truncatingIfNeeded: input.u32())))))
            default: records.append(.clear)
            }
        }
        var journal = DiskIndex.encodeJournal(records)
        let damaged = damage & 0x8000 != 0 && !journal.isEmpty
        if damaged { journal[Int(damage & 0x7FFF) % journal.count] ^= 0x5A }
        guard let loaded = try? DiskIndex.load(snapshot: DiskIndex().snapshotData(), journal: journal) else {
            check(false, "an intact snapshot always loads")
            return
        }
        checkIndex(loaded.index)
        guard !damaged else { return }
        // Records with sizes beyond `maximumFileSize` are damage: skipped whole.
        let oversized = records.filter { if case .put(_, let entry) = $0 { return entry.fileSize > DiskIndex.maximumFileSize } else { return false } }
        check(loaded.damagedJournalBytes == oversized.reduce(0) { $0 + $1.encodedSize }, "only oversized records are damage")
        var expected: [EntryDigest: Int] = [:]
        for record in records {
            switch record {
            case .put(_, let entry) where entry.fileSize > DiskIndex.maximumFileSize: break
            case .put(let digest, let entry): expected[digest] = entry.fileSize
            case .remove(let digest): expected[digest] = nil
            case .touch: break
            case .clear: expected = [:]
            }
        }
        check(loaded.index.count == expected.count, "index holds what the journal says")
        for (digest, size) in expected {
            check(loaded.index.entry(for: digest)?.fileSize == size, "entry size as journaled")
        }
    }

    // MARK: - Invariants

    private static func checkDecoded(_ record: CacheRecord, encodedAs bytes: UnsafeRawBufferPointer) {
        let encoded = EntryCodec.encode(record)
        if bytes.count > 6, bytes[4] == UInt8(EntryCodec.version), bytes[5] == 0 {
            check(encoded.elementsEqual(bytes), "an accepted entry re-encodes to the same bytes")
        } else {
            // A file of the version earlier builds wrote: this build writes the same record anew.
            check((try? EntryCodec.decode(encoded)) == record, "an accepted older entry re-encodes to the same record")
        }
        for entry in record.variants {
            for date in [entry.requestDate, entry.responseDate] {
                check(date.timeIntervalSinceReferenceDate.isFinite, "dates are finite")
            }
            check(entry.initialAge.isFinite && entry.freshnessLifetime.isFinite, "ages are finite")
            // What the engine computes when it serves the entry must be representable as an Int.
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            check(abs(entry.age(at: now)) < 9e18 && abs(entry.timeToLive(at: now)) < 9e18, "age and time to live fit an Int")
            _ = CachingURLCache.buildCachedURLResponse(from: entry)
        }
    }

    private static func checkIndex(_ index: DiskIndex) {
        var total = 0
        for element in index.entries {
            check(element.value.fileSize >= 0, "file sizes are not negative")
            let (sum, overflow) = total.addingReportingOverflow(element.value.fileSize)
            check(!overflow, "the sizes add up without overflow")
            total = sum
        }
        check(total == index.byteCount, "byteCount is the sum of the sizes")
        guard let reloaded = try? DiskIndex.load(snapshot: index.snapshotData(), journal: Data()) else {
            return check(false, "a snapshot of a loaded index loads")
        }
        check(reloaded.index.count == index.count && reloaded.index.byteCount == index.byteCount, "snapshot round-trips")
    }

    /// An entry file around `bodies` and `variants`: the header for `key` and
    /// `latestResponseDate`, then both, then the trailer (the variants' offset and the checksum),
    /// with the length and checksums made right.
    static func frame(key: String, latestResponseDate: Date, bodies: UnsafeRawBufferPointer, variants: UnsafeRawBufferPointer) -> Data {
        var head = Data()
        func append<Value: FixedWidthInteger>(_ value: Value, to data: inout Data) {
            withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
        }
        let keyBytes = Array(key.utf8)
        let headerSize = EntryCodec.fixedHeaderSize + keyBytes.count + EntryCodec.checksumSize
        let total = headerSize + bodies.count + variants.count + 8 + EntryCodec.checksumSize
        append(EntryCodec.magic, to: &head)
        append(EntryCodec.version, to: &head)
        append(UInt16(0), to: &head)
        append(UInt64(total), to: &head)
        append(latestResponseDate.timeIntervalSinceReferenceDate.bitPattern, to: &head)
        append(UInt32(keyBytes.count), to: &head)
        head.append(contentsOf: keyBytes)
        append(head.withUnsafeBytes { StableHash.hash($0) }, to: &head)
        var rest = Data(bodies)
        rest.append(contentsOf: variants)
        append(UInt64(headerSize + bodies.count), to: &rest)
        append(rest.withUnsafeBytes { StableHash.hash($0) }, to: &rest)
        return head + rest
    }

    /// Traps with `message` when `condition` is false: a finding.
    private static func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
        if !condition() { fatalError("fuzz invariant broken: \(message())") }
    }

    // MARK: - Seeds

    /// A small seed corpus per group: inputs that reach deep into each target.
    static func seeds() -> [(group: String, name: String, bytes: [UInt8])] {
        var seeds: [(String, String, [UInt8])] = []
        func add(_ group: String, _ target: UInt8, _ name: String, _ payload: [UInt8]) {
            seeds.append((group, name, [target] + payload))
        }
        for (index, value) in ["public, max-age=60, s-maxage=30, stale-while-revalidate=5", "max-age=-1, max-age=abc",
                               #"private="Set-Cookie, X", no-cache="a\"b", max-age="600""#, "max-stale, min-fresh=10, only-if-cached",
                               "max-age=99999999999999999999999, immutable"].enumerated() {
            add("http", 0, "cache-control-\(index)", Array(value.utf8))
        }
        for (index, value) in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                               "Thu, 29 Feb 2024 23:59:59 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"].enumerated() {
            add("http", 1, "date-\(index)", Array(value.utf8))
        }
        let headerSets = [
            "ETag: \"v1\"\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\nDate: Tue, 14 Nov 2023 22:13:20 GMT",
            "Cache-Control: public, max-age=600\nVary: Accept-Encoding, Authorization\n>Authorization: Bearer x\n>Accept-Encoding: gzip",
            "Cache-Control: no-cache\nExpires: Tue, 14 Nov 2023 23:13:20 GMT\nAge: 30\n>Cache-Control: max-stale=60",
            "Content-Type: image/png\n>Cookie: a=b",
            "Cache-Control: max-age=60, stale-if-error=600, must-revalidate\nSet-Cookie: s=1\nVary: *",
        ]
        for (index, value) in headerSets.enumerated() {
            add("http", 2, "headers-\(index)", [0, UInt8(index * 7), UInt8(index)] + Array(value.utf8))
        }
        for (index, value) in ["https://Example.COM:8443/a/b?c=d#frag", "http://127.0.0.1/%2e%2e/%2F..%2Fetc?x=%00",
                               "https://example.com/caf%C3%A9?q=%E2%9C%93&long=" + String(repeating: "x", count: 300)].enumerated() {
            add("http", 3, "url-\(index)", Array(value.utf8))
        }

        let entry = CacheEntry(
            responseURL: "https://example.com/feed?page=2", statusCode: 200,
            headers: HTTPHeaders([.init(name: "Content-Type", value: "application/json"), .init(name: "ETag", value: "\"v1\"")]),
            body: Data("{\"items\":[1,2,3]}".utf8),
            requestDate: Date(timeIntervalSinceReferenceDate: 700_000_000), responseDate: Date(timeIntervalSinceReferenceDate: 700_000_001),
            initialAge: 3, freshnessLifetime: 600,
            varyFields: [CacheEntry.VaryField(name: "accept-encoding", value: "gzip"), CacheEntry.VaryField(name: "x", value: nil)],
            partition: Partition(user: 42, judge: 7), userInfo: Data([1, 2, 3]))
        let record = CacheRecord(key: "GET https://example.com/feed?page=2", variants: [entry, entry])
        let encoded = [UInt8](EntryCodec.encode(record))
        add("storage", 0, "entry", encoded)
        // The framed target takes key length, key, the bodies' length and bodies, then the variants.
        let keyLength = record.key.utf8.count
        let bodiesStart = EntryCodec.headerSize(forKey: record.key)
        let trailerStart = encoded.count - 8 - EntryCodec.checksumSize
        let variantsStart = encoded[trailerStart..<(trailerStart + 8)].reversed().reduce(0) { $0 << 8 | Int($1) }
        let bodies = Array(encoded[bodiesStart..<variantsStart])
        add("storage", 1, "framed-entry", [UInt8(keyLength)] + Array(record.key.utf8)
            + [UInt8(bodies.count >> 8), UInt8(bodies.count & 0xFF)] + bodies + Array(encoded[variantsStart..<trailerStart]))

        var index = DiskIndex()
        for number in 0..<4 {
            index.put(EntryDigest(key: "k\(number)"), DiskIndex.Entry(fileSize: 1000 * number,
                                                                   latestResponseDate: Date(timeIntervalSinceReferenceDate: Double(number)),
                                                                   lastAccess: Date(timeIntervalSinceReferenceDate: Double(10 * number)),
                                                                   summary: number == 3 ? nil : EntrySummary(
                                                                    key: "k\(number)", variants: number == 0 ? nil : [entry].map(EntrySummary.Variant.init))))
        }
        let snapshot = [UInt8](index.snapshotData())
        let journal = [UInt8](DiskIndex.encodeJournal([
            .remove(EntryDigest(key: "k1")), .touch(EntryDigest(key: "k2"), Date(timeIntervalSinceReferenceDate: 99)), .clear,
            .put(EntryDigest(key: "k9"), DiskIndex.Entry(fileSize: 5, latestResponseDate: Date(timeIntervalSinceReferenceDate: 5), lastAccess: Date(timeIntervalSinceReferenceDate: 6))),
            .put(EntryDigest(key: "k8"), DiskIndex.Entry(fileSize: 7, latestResponseDate: Date(timeIntervalSinceReferenceDate: 7),
                                                         lastAccess: Date(timeIntervalSinceReferenceDate: 8), summary: EntrySummary(record))),
        ]))
        add("storage", 2, "index", [UInt8(snapshot.count >> 8), UInt8(snapshot.count & 0xFF)] + snapshot + journal)
        add("storage", 3, "journal-ops", [0, 0] + [0x10, 0x20, 0, 0x11, 1, 0, 0, 0, 0x12, 2, 0, 0, 0, 0x21, 0x13, 0x30, 9, 0])
        return seeds
    }
}

/// Reads fixed-size values from fuzz input, yielding zeros once it runs out.
struct FuzzInput {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var remaining: Int { bytes.count - offset }

    mutating func bytes(_ count: Int) -> UnsafeRawBufferPointer {
        let count = max(0, min(count, remaining))
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
    }

    mutating func rest() -> UnsafeRawBufferPointer {
        bytes(remaining)
    }

    mutating func byte() -> UInt8 {
        remaining > 0 ? bytes(1)[0] : 0
    }

    mutating func u16() -> UInt16 { integer() }
    mutating func u32() -> UInt32 { integer() }
    mutating func u64() -> UInt64 { integer() }

    private mutating func integer<Value: FixedWidthInteger>() -> Value {
        var value: Value = 0
        for byte in bytes(MemoryLayout<Value>.size) { value = value << 8 | Value(byte) }
        return value
    }
}
