import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An entry file whose first body is written as it arrives from the origin: a temporary file in
/// `entries/` (`.tmp-<pid>-<random>`, like every file the disk tier writes), the body at the
/// offset the key decides (`EntryCodec.headerSize(forKey:)`), written on a queue of its own while
/// the transfer goes on. Once the body is whole and the policy says to store it, the store
/// stages the record with this file, and the disk worker writes the rest of it (`finish`: the
/// other variants, the variants section, the trailer, then the header) and renames it into
/// place, as it does for any entry; nothing half-written ever has an entry's name. A file that
/// is not stored (the body was cut short, grew past the largest entry, the load was cancelled,
/// the answer said `no-store` after all) is deleted: `discard()`, or when the last reference to
/// it goes without it being kept.
///
/// The file is created on that queue too, not by `init`: the transfer's callbacks run on
/// corelibs' one serial queue (`UpstreamClient`), where a file creation — a syscall whose length
/// the file system decides — would hold up every session's work. A file that cannot be created
/// is a failed write: nothing is stored from it (`finish` throws).
///
/// A body that is kept whole in memory for its answer anyway (a completion handler's, an `async`
/// call's) is not held back for the disk: its pieces wait for the writes in memory, within
/// `largestBacklog` for the process, so the answer comes at the network's pace and the entry
/// reaches the disk at the disk's. A body that is only handed on piece by piece goes at the
/// disk's pace past `maximumPendingBytes`, so that memory stays bounded.
///
/// Threading: `append` is called by one thread at a time, in the body's order (the transfer's
/// callbacks); every other member from any thread. The file's creation and the writes run on
/// the file's serial queue.
final class StreamedEntryFile: Sendable {
    /// How the pieces reach the file: `FileIO.writeAll(_:_:at:path:)`; tests stand in a disk
    /// that stalls.
    typealias WritePieces = @Sendable (_ descriptor: Int32, _ pieces: [Data], _ offset: Int, _ path: String) throws -> Void

    /// The most bytes handed to `append` and not yet written. Past it `append` waits for the
    /// disk (the transfer goes at the disk's pace rather than memory growing), unless the body
    /// is kept whole in memory anyway and the process's backlog has room.
    static let maximumPendingBytes = 2 << 20
    /// The most bytes of kept bodies (`append(_:bodyIsKept:)`) past `maximumPendingBytes` that
    /// wait for the disk, over every file of the process: past it their appends wait too.
    static let largestBacklog = 64 << 20
    /// The bytes counted against `largestBacklog` now.
    private static let backlog = Locked(0)
    /// The bytes gathered before the writes start: one wake-up of the file's queue per batch
    /// rather than per piece (a piece is 16 KB at most on Linux).
    static let batchBytes = 256 << 10

    /// The key of the record the file is for.
    let key: String
    /// The temporary file, in `entries/`.
    let path: String
    /// Where the body begins: after the header.
    private let bodyOffset: Int
    private let queue = DispatchQueue(label: "CachingProtocol.StreamedEntryFile", qos: .utility)
    private let writePieces: WritePieces
    private let state = Locked(State())
    /// Signalled when written bytes make room for an `append` that waits.
    private let room = DispatchSemaphore(value: 0)

    private struct State {
        /// The open file, once the file's queue created it (-1 before, or when it could not be).
        var descriptor: Int32 = -1
        /// The file's queue has tried to create it (`descriptor` says whether it could).
        var created = false
        /// Pieces handed to `append`, not taken by the writes yet.
        var pending: [Data] = []
        /// Bytes appended and not yet written (taken or not).
        var unwritten = 0
        /// Of them, those counted against the process's `largestBacklog`.
        var backlogged = 0
        /// A run of the writes is queued or running.
        var writing = false
        var appenderWaits = false
        /// Body bytes appended, written or not.
        var appended = 0
        /// Body bytes in the file, and the checksum of them (`EntryCodec`'s, which begins with
        /// the first body).
        var written = 0
        var checksum = StableHash.Streaming()
        var failure: Error?
        var fate = Fate.open
    }

    private enum Fate {
        case open
        /// Renamed into place: the file is an entry now.
        case kept
        case discarded
    }

    /// A file for `key`'s record at the temporary path `path` (mode 0600, with `protection`),
    /// created on the file's queue at once, while the caller goes on; its pieces are written
    /// with `writePieces`.
    init(key: String, path: String, protection: CachingFileProtection,
         writePieces: @escaping WritePieces = { try FileIO.writeAll($0, $1, at: $2, path: $3) }) {
        self.key = key
        self.path = path
        self.writePieces = writePieces
        bodyOffset = EntryCodec.headerSize(forKey: key)
        queue.async { self.create(protection) }
    }

    deinit {
        let (descriptor, fate, backlogged) = state.withLock { ($0.descriptor, $0.fate, $0.backlogged) }
        Self.release(backlogged)
        if descriptor >= 0 { close(descriptor) }
        if descriptor >= 0, fate == .open {
            // Neither kept nor discarded: nobody stores it. Deleted off this thread, which may
            // be one that holds a lock (the last reference can go with a staged write).
            let path = path
            DispatchQueue.global(qos: .utility).async { unlink(path) }
        }
    }

    /// Creates the file (on the file's queue, before any write). A file discarded meanwhile is
    /// deleted at once; one that cannot be created fails the writes.
    private func create(_ protection: CachingFileProtection) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(0o600))
        let failure = descriptor < 0 ? FileError("open", path) : nil
        if descriptor >= 0 { protection.apply(toItemAt: path) }
        let discarded = state.withLock { state -> Bool in
            state.created = true
            state.descriptor = descriptor
            if let failure, state.failure == nil { state.failure = failure }
            return state.fate == .discarded
        }
        if discarded, descriptor >= 0 { unlink(path) }
    }

    /// Body bytes handed to `append` so far.
    var appendedBytes: Int { state.withLock { $0.appended } }

    /// Writes `data` after the bytes appended before, on the file's queue. Past
    /// `maximumPendingBytes` not written yet it waits for the writes, unless `bodyIsKept` (the
    /// whole body is kept in memory for its answer anyway) and the process's backlog takes
    /// `data` (`largestBacklog`). After a failed write, or once discarded, it does nothing
    /// (`finish` then throws the failure).
    func append(_ data: Data, bodyIsKept: Bool) {
        guard !data.isEmpty else { return }
        let (start, wait) = state.withLock { state -> (Bool, Bool) in
            guard state.failure == nil, state.fate == .open else { return (false, false) }
            state.pending.append(data)
            state.unwritten += data.count
            state.appended += data.count
            let start = !state.writing && state.unwritten >= Self.batchBytes
            if start { state.writing = true }
            let over = state.unwritten > Self.maximumPendingBytes
            if over, bodyIsKept, Self.admitToBacklog(data.count) {
                state.backlogged += data.count
            } else {
                state.appenderWaits = over
            }
            return (start, state.appenderWaits)
        }
        if start { queue.async { self.writePending() } }
        if wait { room.wait() }
    }

    /// Counts `count` bytes against `largestBacklog` if they fit.
    private static func admitToBacklog(_ count: Int) -> Bool {
        backlog.withLock { total in
            guard total + count <= largestBacklog else { return false }
            total += count
            return true
        }
    }

    private static func release(_ count: Int) {
        if count > 0 { backlog.withLock { $0 -= count } }
    }

    /// Writes what was appended until nothing is left (on the file's queue), the pieces taken
    /// at once in one write.
    private func writePending() {
        while true {
            var dropped = 0
            let taken = state.withLock { state -> (pieces: [Data], descriptor: Int32, offset: Int, checksum: StableHash.Streaming)? in
                guard !state.pending.isEmpty, state.failure == nil, state.fate == .open else {
                    state.writing = false
                    state.pending = []
                    state.unwritten = 0
                    swap(&dropped, &state.backlogged)
                    return nil
                }
                defer { state.pending = [] }
                return (state.pending, state.descriptor, bodyOffset + state.written, state.checksum)
            }
            guard let taken else {
                Self.release(dropped)
                return releaseAppender()
            }
            var (pieces, checksum) = (taken.pieces, taken.checksum)
            let offset = taken.offset
            let total = pieces.reduce(0) { $0 + $1.count }
            var failure: Error?
            do {
                try writePieces(taken.descriptor, pieces, offset, path)
                for piece in pieces { checksum.combine(piece) }
            } catch {
                failure = error
            }
            pieces = []
            let (wakes, released) = state.withLock { state -> (Bool, Int) in
                if failure == nil { state.written += total }
                state.checksum = checksum
                state.unwritten -= total
                // The oldest bytes were written: the backlog gives back as many of the file's.
                let released = min(state.backlogged, total)
                state.backlogged -= released
                if let failure, state.failure == nil { state.failure = failure }
                guard state.appenderWaits, state.unwritten <= Self.maximumPendingBytes || state.failure != nil else { return (false, released) }
                state.appenderWaits = false
                return (true, released)
            }
            Self.release(released)
            if wakes { room.signal() }
        }
    }

    /// Lets an `append` that waits for room go on: nothing is left to write.
    private func releaseAppender() {
        let waits = state.withLock { state -> Bool in
            defer { state.appenderWaits = false }
            return state.appenderWaits
        }
        if waits { room.signal() }
    }

    /// Writes every appended byte (or finds a write failed), then returns how many body bytes
    /// the file holds and their checksum; throws the failure, or when the file was discarded
    /// before every appended byte was written (the body in it is cut short).
    private func writtenBody() throws -> (length: Int, checksum: StableHash.Streaming, descriptor: Int32) {
        queue.sync { writePending() }
        return try state.withLock { state in
            if let failure = state.failure { throw failure }
            guard state.written == state.appended else { throw FileError("write", path, code: ECANCELED) }
            return (state.written, state.checksum, state.descriptor)
        }
    }

    /// The body as written so far, read back from the file (for a lookup while the record waits
    /// for the disk worker). Waits for the appended bytes to be written.
    func readBody() throws -> Data {
        let body = try writtenBody()
        let length = body.length
        let data = try FileIO.read(body.descriptor, count: length, at: bodyOffset, path: path)
        guard data.count == length else { throw FileError("read", path, code: EIO) }
        return data
    }

    /// Makes the file whole for `record`, whose first variant is the one whose body it holds
    /// (the body `record` carries for it, if any, is left aside): writes the other variants'
    /// bodies, the variants and the trailer after the body, then the header, pushed as far as
    /// `durability` says. Returns the file's length. Called by the disk worker, which then
    /// renames the file into place (and calls `keep()`) or discards it.
    func finish(_ record: CacheRecord, durability: FileIO.Durability) throws -> Int {
        let body = try writtenBody()
        let tail = EntryCodec.remainder(of: record, firstBodyLength: body.length, checksum: body.checksum)
        var offset = bodyOffset + body.length
        for part in tail.parts {
            try FileIO.writeAll(body.descriptor, part, at: offset, path: path)
            offset += part.count
        }
        try FileIO.writeAll(body.descriptor, tail.header, at: 0, path: path)
        try FileIO.synchronize(body.descriptor, path: path, durability)
        return tail.fileLength
    }

    /// The file was renamed into place: it is an entry now, never deleted from here.
    func keep() {
        state.withLock { $0.fate = .kept }
    }

    /// The body will not be stored: later appends do nothing, and the file is deleted at once,
    /// before the load that ends with it is answered (writes still queued go to the unlinked
    /// file), so that a failure the app sees leaves no file behind. A file not created yet is
    /// waited for (its creation deletes it).
    func discard() {
        let (discards, created, waits, backlogged) = state.withLock { state -> (Bool, Bool, Bool, Int) in
            guard state.fate == .open else { return (false, false, false, 0) }
            state.fate = .discarded
            state.pending = []
            defer {
                state.appenderWaits = false
                state.backlogged = 0
            }
            return (true, state.created, state.appenderWaits, state.backlogged)
        }
        Self.release(backlogged)
        if waits { room.signal() }
        guard discards else { return }
        if created { unlink(path) } else { queue.sync {} }
    }
}

extension StreamedEntryFile: Equatable {
    /// The same file: one object per file.
    static func == (lhs: StreamedEntryFile, rhs: StreamedEntryFile) -> Bool {
        lhs === rhs
    }
}
