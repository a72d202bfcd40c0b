import Foundation

/// Where the binary formats of the disk tier write their bytes: a counter (to size a buffer
/// exactly) or the buffer itself. Running the same encoding code against both guarantees the
/// size and the bytes agree. All integers are little-endian; doubles are stored as their bit
/// pattern, so they round-trip exactly.
protocol ByteSink {
    mutating func write(_ bytes: UnsafeRawBufferPointer)
    /// The checksum of every byte written so far (0 for a sink that keeps no bytes).
    func checksumOfWrittenBytes() -> UInt64
    /// Bytes prefixed by their count as a `UInt64` (a requirement, so a sink may keep a large
    /// body as it is rather than copy it: `SegmentWriter`).
    mutating func writeData(_ value: Data)
}

extension ByteSink {
    @inline(__always)
    mutating func writeInteger<Value: FixedWidthInteger>(_ value: Value) {
        withUnsafeBytes(of: value.littleEndian) { write($0) }
    }

    @inline(__always)
    mutating func writeDouble(_ value: Double) {
        writeInteger(value.bitPattern)
    }

    @inline(__always)
    mutating func writeDate(_ value: Date) {
        writeDouble(value.timeIntervalSinceReferenceDate)
    }

    /// A UTF-8 string prefixed by its byte count as a `UInt32`.
    mutating func writeString(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            writeInteger(UInt32(truncatingIfNeeded: utf8.count))
            write(UnsafeRawBufferPointer(utf8))
        }
    }

    /// Bytes prefixed by their count as a `UInt64`.
    mutating func writeData(_ value: Data) {
        writeInteger(UInt64(value.count))
        value.withUnsafeBytes { write($0) }
    }

    mutating func writeBytes(_ value: [UInt8]) {
        value.withUnsafeBytes { write($0) }
    }
}

/// Counts the bytes an encoding would produce.
struct ByteCounter: ByteSink {
    private(set) var count = 0

    @inline(__always)
    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        count += bytes.count
    }

    func checksumOfWrittenBytes() -> UInt64 { 0 }
}

/// Writes into a buffer sized beforehand with a `ByteCounter`.
struct ByteWriter: ByteSink {
    let buffer: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    @inline(__always)
    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        // Our own encoder sized the buffer with the same code: overrunning it is a bug, not input.
        precondition(offset + bytes.count <= buffer.count, "ByteWriter overrun")
        UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<(offset + bytes.count)]).copyMemory(from: bytes)
        offset += bytes.count
    }

    func checksumOfWrittenBytes() -> UInt64 {
        StableHash.hash(UnsafeRawBufferPointer(rebasing: buffer[0..<offset]))
    }
}

/// Writes into a list of parts to be written one after another: small fields are gathered into
/// buffers, and a body of `separateBodyBytes` or more becomes a part of its own — the `Data` it
/// came in, not a copy — so a large response is never copied into a second buffer to be
/// written. The checksum is kept as the bytes go by, continuing the one it starts with.
struct SegmentWriter: ByteSink {
    /// Bodies from this size on are kept as they are.
    static let separateBodyBytes = 16 << 10

    private var parts: [Data] = []
    private var current = Data()
    private var checksum: StableHash.Streaming
    /// The bytes written so far.
    private(set) var count = 0

    /// A writer whose checksum goes on from `checksum` (of bytes written elsewhere before).
    init(checksum: StableHash.Streaming = StableHash.Streaming()) {
        self.checksum = checksum
    }

    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        current.append(base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        checksum.combine(bytes)
        count += bytes.count
    }

    /// `body`'s bytes, with no count before them.
    mutating func writeBody(_ body: Data) {
        guard body.count >= Self.separateBodyBytes else { return body.withUnsafeBytes { write($0) } }
        if !current.isEmpty {
            parts.append(current)
            current = Data()
        }
        parts.append(body)
        checksum.combine(body)
        count += body.count
    }

    mutating func writeData(_ value: Data) {
        writeInteger(UInt64(value.count))
        writeBody(value)
    }

    func checksumOfWrittenBytes() -> UInt64 {
        checksum.finalize()
    }

    /// Every part, in order.
    mutating func finish() -> [Data] {
        if !current.isEmpty { parts.append(current) }
        current = Data()
        return parts
    }
}

/// Why bytes could not be decoded. Decoding never traps: every length is checked against the
/// bytes that remain before it is used.
enum BinaryDecodingError: Error, Equatable, CustomStringConvertible {
    /// The bytes end before the structure does.
    case truncated
    /// The file does not start with our magic number: not ours.
    case badMagic
    /// Ours, but of a format version this build does not read.
    case unsupportedVersion(UInt16)
    /// The length recorded in the file is not the file's length (torn or appended to).
    case lengthMismatch
    /// The checksum does not match the contents (torn, bit-flipped or garbage).
    case checksumMismatch
    /// The structure is inconsistent.
    case malformed(String)
    /// A whole, valid entry for another key (a file name collision or a misplaced file).
    case keyMismatch

    var description: String {
        switch self {
        case .truncated: "truncated"
        case .badMagic: "not a cache file (bad magic number)"
        case .unsupportedVersion(let version): "unsupported format version \(version)"
        case .lengthMismatch: "length does not match the recorded length"
        case .checksumMismatch: "checksum mismatch"
        case .malformed(let reason): "malformed: \(reason)"
        case .keyMismatch: "entry belongs to another key"
        }
    }
}

/// Reads the binary formats with a bounds check before every read.
struct ByteReader {
    let buffer: UnsafeRawBufferPointer
    private(set) var offset: Int

    init(_ buffer: UnsafeRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    var remaining: Int { buffer.count - offset }

    mutating func readBytes(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw BinaryDecodingError.truncated }
        let slice = UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + count)])
        offset += count
        return slice
    }

    mutating func readInteger<Value: FixedWidthInteger>(_: Value.Type = Value.self) throws -> Value {
        let size = MemoryLayout<Value>.size
        guard size <= remaining, let base = buffer.baseAddress else { throw BinaryDecodingError.truncated }
        let value = Value(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: Value.self))
        offset += size
        return value
    }

    mutating func readDouble() throws -> Double {
        Double(bitPattern: try readInteger(UInt64.self))
    }

    mutating func readDate() throws -> Date {
        Date(timeIntervalSinceReferenceDate: try readDouble())
    }

    /// A length stored as an unsigned integer, checked to fit in the bytes that remain.
    mutating func readLength<Width: FixedWidthInteger & UnsignedInteger>(_: Width.Type) throws -> Int {
        let raw = try readInteger(Width.self)
        guard let length = Int(exactly: raw), length <= remaining else { throw BinaryDecodingError.truncated }
        return length
    }

    mutating func readString() throws -> String {
        let length = try readLength(UInt32.self)
        let bytes = try readBytes(length)
        guard let string = decodeUTF8(bytes) else { throw BinaryDecodingError.malformed("invalid UTF-8") }
        return string
    }

    mutating func readData() throws -> Data {
        let length = try readLength(UInt64.self)
        let bytes = try readBytes(length)
        return Data(bytes)
    }

    /// A presence byte: 0 (absent) or 1 (present); anything else is malformed.
    mutating func readPresence() throws -> Bool {
        switch try readInteger(UInt8.self) {
        case 0: return false
        case 1: return true
        default: throw BinaryDecodingError.malformed("presence flag")
        }
    }
}

/// The string for `bytes` when they are valid UTF-8, else nil (never repaired: a repaired string
/// would be a different value than the one stored).
func decodeUTF8(_ bytes: UnsafeRawBufferPointer) -> String? {
    #if canImport(FoundationNetworking)
    return String(validating: bytes, as: UTF8.self)
    #else
    return decodeUTF8Portably(bytes)
    #endif
}

/// What `String(validating:as: UTF8.self)` gives, for SDKs that do not declare it (it is an
/// iOS 18 / macOS 15 API on Apple platforms); tested against it on Linux. ASCII (nearly every
/// key and header) cannot be invalid; anything else is validated scalar by scalar first.
func decodeUTF8Portably(_ bytes: UnsafeRawBufferPointer) -> String? {
    if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
    var iterator = bytes.makeIterator()
    var decoder = UTF8()
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return String(decoding: bytes, as: UTF8.self)
        case .error: return nil
        }
    }
}
