import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The pinned keys of a cache directory: records the disk tier keeps from eviction and from the
/// age limit (`DiskLedger.evict`, `DiskLedger.expire`). A value kept in the ledger, with the
/// format of the directory's `pins` file, where they persist so that a reopen and every process
/// sharing the directory see them, and its reading; `DiskWorker.changePins` writes it.
struct Pins: Sendable, Equatable {
    /// The pinned keys, in the order they were pinned.
    private(set) var keys: [String] = []
    private(set) var digests: Set<EntryDigest> = []
    /// The pins file these keys were read from or written to; nil when there was none.
    private(set) var source: FileStamp?

    var isEmpty: Bool { keys.isEmpty }

    func contains(_ digest: EntryDigest) -> Bool {
        !digests.isEmpty && digests.contains(digest)
    }

    /// Takes `keys`, as read from (or written to) the pins file stamped `source`.
    mutating func install(_ keys: [String], from source: FileStamp?) {
        self.keys = keys
        digests = Set(keys.map(EntryDigest.init(key:)))
        self.source = source
    }

    /// The keys after pinning `added` and unpinning `removed`: each once, in pinning order.
    func keys(adding added: [String], removing removed: [String]) -> [String] {
        var seen = Set<String>()
        let gone = Set(removed)
        return (keys + added).filter { !gone.contains($0) && seen.insert($0).inserted }
    }

    // MARK: - The pins file

    /// Reads the pins file at `path` into `ledger` when it is not the version last read (a new
    /// store, or another process changed it). A missing file means no pins; a damaged one too
    /// (counted as corrupt); one that cannot be read now leaves the pins as they were. Safe on
    /// any thread: it only reads the file, and installs what it read under the ledger's lock.
    static func refresh(_ ledger: Locked<DiskLedger>, from path: String, reader: FileReader) {
        let stamp = (try? FileIO.status(path)).map(FileStamp.init)
        guard ledger.withLock({ $0.pins.source != stamp }) else { return }
        var keys: [String] = []
        if stamp != nil {
            do {
                keys = try decode(try reader.readFile(path, for: .index))
            } catch let error as FileError where !error.isMissing {
                ledger.withLock { $0.report.noteUnavailable(CachingError(.fileUnreadable, "pins: \(error)")) }
                return
            } catch let error as BinaryDecodingError {
                ledger.withLock { $0.report.noteCorrupt(CachingError(.corruptEntry, "\(path): \(error)")) }
            } catch {
                // Gone between the stat and the read: no pins.
            }
        }
        ledger.withLock { $0.pins.install(keys, from: stamp) }
    }

    /// "CPPN" as a little-endian `UInt32`.
    static let magic: UInt32 = 0x4E50_5043
    static let version: UInt16 = 1

    /// ```
    /// magic "CPPN" · version u16 (1) · count u32 · key str* · checksum u64 (XXH64 of all before it)
    /// ```
    static func encode(_ keys: [String]) -> Data {
        func write<Sink: ByteSink>(_ sink: inout Sink) {
            sink.writeInteger(magic)
            sink.writeInteger(version)
            sink.writeInteger(UInt32(keys.count))
            for key in keys { sink.writeString(key) }
        }
        var counter = ByteCounter()
        write(&counter)
        var data = Data(count: counter.count + EntryCodec.checksumSize)
        data.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            write(&writer)
            writer.writeInteger(writer.checksumOfWrittenBytes())
        }
        return data
    }

    /// The keys of an intact pins file; throws for anything else.
    static func decode(_ data: Data) throws -> [String] {
        try data.withUnsafeBytes { buffer in
            guard buffer.count >= 4 + 2 + 4 + EntryCodec.checksumSize else { throw BinaryDecodingError.truncated }
            let contentLength = buffer.count - EntryCodec.checksumSize
            var trailer = ByteReader(buffer, offset: contentLength)
            guard StableHash.hash(UnsafeRawBufferPointer(rebasing: buffer[0..<contentLength])) == (try trailer.readInteger(UInt64.self))
            else { throw BinaryDecodingError.checksumMismatch }
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: buffer[0..<contentLength]))
            guard try reader.readInteger(UInt32.self) == magic else { throw BinaryDecodingError.badMagic }
            let version = try reader.readInteger(UInt16.self)
            guard version == self.version else { throw BinaryDecodingError.unsupportedVersion(version) }
            let count = try reader.readInteger(UInt32.self)
            guard Int(count) <= reader.remaining / 4 else { throw BinaryDecodingError.malformed("pin count") }
            var keys: [String] = []
            for _ in 0..<count { keys.append(try reader.readString()) }
            guard reader.remaining == 0 else { throw BinaryDecodingError.malformed("trailing bytes") }
            return keys
        }
    }
}

/// What tells one version of a file from another: a rename puts a new inode in place, an edit
/// changes the size or the modification time.
struct FileStamp: Sendable, Equatable {
    let device: UInt64
    let inode: UInt64
    let size: Int
    let modificationDate: Date

    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
        size = status.size
        modificationDate = status.modificationDate
    }
}

extension FileIO {
    /// Runs `body` holding an exclusive `flock` on the file at `path` (created 0600 if missing),
    /// so that processes sharing a directory do not interleave; nil, without running `body`, when
    /// another holds the lock: it is never waited for (a process suspended while it holds one,
    /// or stopped in a debugger, would stall the caller). Keep `body` short: an iOS app suspended
    /// while it holds a lock on a file in an App Group container is killed (0xdead10cc).
    static func withExclusiveLockIfFree<Result>(_ path: String, protection: CachingFileProtection,
                                                _ body: () throws -> Result) throws -> Result? {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode_t(0o600))
        guard descriptor >= 0 else { throw FileError("open", path) }
        protection.apply(toItemAt: path)
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            if errno == EWOULDBLOCK { return nil }
            guard errno == EINTR else { throw FileError("flock", path) }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}
