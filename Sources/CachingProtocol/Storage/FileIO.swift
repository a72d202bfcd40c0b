import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call: which one, on which path, and `errno`.
struct FileError: Error, CustomStringConvertible {
    var operation: String
    var path: String
    var code: Int32

    init(_ operation: String, _ path: String, code: Int32 = errno) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    var description: String {
        "\(operation) \(path): \(String(cString: strerror(code))) (errno \(code))"
    }

    /// The file or a directory on its path does not exist.
    var isMissing: Bool { code == ENOENT }

    /// Permission was refused: the file's mode, or Data Protection while the device is locked
    /// (Apple answers `EPERM` or `EACCES` for a file whose class key is not available). The
    /// data is intact and may be readable later.
    var isPermissionDenied: Bool { code == EACCES || code == EPERM }

    /// The failure says the directory cannot be written at all (rather than this one write
    /// failing): read-only file system, permissions, or a path component that is not a directory.
    var meansUnwritable: Bool {
        code == EROFS || code == EACCES || code == EPERM || code == ENOTDIR
    }
}

/// The first bytes of a file, and what `fstat` said about it.
struct FilePrefix {
    var data: Data
    var fileSize: Int
    var status: FileStatus
}

/// What `stat` says about a path.
struct FileStatus {
    var size: Int
    var modificationDate: Date
    var isDirectory: Bool
    var isRegularFile: Bool
    var device: UInt64
    var inode: UInt64

    init(_ status: stat) {
        size = Int(status.st_size)
        #if canImport(Darwin)
        let time = status.st_mtimespec
        #else
        let time = status.st_mtim
        #endif
        modificationDate = Date(timeIntervalSince1970: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
        isDirectory = (status.st_mode & S_IFMT) == S_IFDIR
        isRegularFile = (status.st_mode & S_IFMT) == S_IFREG
        device = UInt64(truncatingIfNeeded: status.st_dev)
        inode = UInt64(truncatingIfNeeded: status.st_ino)
    }
}

/// The few POSIX file operations the disk tier needs, with `errno` turned into `FileError`.
///
/// POSIX rather than `FileManager`: the store must tell `ENOENT` from `ENOSPC` from `EROFS`,
/// create files with `O_EXCL` and mode 0600, append with `O_APPEND` in one `write`, and replace
/// files with `rename`, none of which `FileManager` exposes the same way on every platform.
enum FileIO {
    static func status(_ path: String) throws -> FileStatus {
        var info = stat()
        guard stat(path, &info) == 0 else { throw FileError("stat", path) }
        return FileStatus(info)
    }

    /// Creates the directory with `mode` and the Data Protection class `protection` unless a
    /// directory already exists at `path` (whose class is left as it is).
    static func createDirectory(_ path: String, mode: mode_t, protection: CachingFileProtection) throws {
        if mkdir(path, mode) == 0 {
            protection.apply(toItemAt: path)
            return
        }
        let code = errno
        guard code == EEXIST else { throw FileError("mkdir", path, code: code) }
        guard try status(path).isDirectory else { throw FileError("mkdir", path, code: ENOTDIR) }
    }

    /// Creates the directory and any missing parents; the ones created get `mode` and `protection`.
    static func createDirectories(_ path: String, mode: mode_t, protection: CachingFileProtection) throws {
        do {
            try createDirectory(path, mode: mode, protection: protection)
        } catch let error as FileError where error.isMissing {
            let parent = (path as NSString).deletingLastPathComponent
            guard !parent.isEmpty, parent != path else { throw error }
            try createDirectories(parent, mode: mode, protection: protection)
            try createDirectory(path, mode: mode, protection: protection)
        }
    }

    /// The whole file. A file that shrinks while it is read comes back short, which the decoder
    /// reports as truncated.
    static func readFile(_ path: String) throws -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileError("open", path) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileError("fstat", path) }
        let size = Int(info.st_size)
        var data = Data(count: size)
        let received = try data.withUnsafeMutableBytes { buffer -> Int in
            try readFully(descriptor, into: buffer, from: 0, path: path)
        }
        if received < size { data.count = received }
        return data
    }

    /// Up to `length` bytes from the start of the file, and the file's size.
    static func readPrefix(_ path: String, length: Int) throws -> FilePrefix {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileError("open", path) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileError("fstat", path) }
        let status = FileStatus(info)
        var data = Data(count: max(0, min(length, status.size)))
        let received = try data.withUnsafeMutableBytes { buffer -> Int in
            try readFully(descriptor, into: buffer, from: 0, path: path)
        }
        if received < data.count { data.count = received }
        return FilePrefix(data: data, fileSize: status.size, status: status)
    }

    private static func readFully(
        _ descriptor: Int32,
        into buffer: UnsafeMutableRawBufferPointer,
        from offset: Int,
        path: String
    ) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let count = pread(descriptor, base + done, buffer.count - done, off_t(offset + done))
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError("read", path)
            }
            if count == 0 { break }
            done += count
        }
        return done
    }

    /// Creates a new file (failing if it exists) with `mode` and the Data Protection class
    /// `protection`, writes `data` to it and pushes it as far as `durability` says. On any
    /// failure the partial file is removed.
    static func createFile(_ path: String, contents data: Data, mode: mode_t,
                           protection: CachingFileProtection, durability: Durability) throws {
        try createFile(path, parts: [data], mode: mode, protection: protection, durability: durability)
    }

    /// `createFile(_:contents:…)` with contents that come in `parts`, written one after another.
    static func createFile(_ path: String, parts: [Data], mode: mode_t,
                           protection: CachingFileProtection, durability: Durability) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw FileError("open", path) }
        do {
            protection.apply(toItemAt: path)  // before the data goes in
            for part in parts { try writeAll(descriptor, part, path: path) }
            try synchronize(descriptor, path: path, durability)
            guard close(descriptor) == 0 else {
                let error = FileError("close", path)
                unlink(path)
                throw error
            }
        } catch {
            close(descriptor)
            unlink(path)
            throw error
        }
    }

    static func writeAll(_ descriptor: Int32, _ data: Data, path: String) throws {
        try data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var done = 0
            while done < buffer.count {
                let count = write(descriptor, base + done, buffer.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw FileError("write", path)
                }
                // A regular file only writes short when it cannot take more (full, size limit).
                if count == 0 { throw FileError("write", path, code: ENOSPC) }
                done += count
            }
        }
    }

    /// Writes all of `data` at `offset` of an open file, without moving its file offset.
    static func writeAll(_ descriptor: Int32, _ data: Data, at offset: Int, path: String) throws {
        try data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var done = 0
            while done < buffer.count {
                let count = pwrite(descriptor, base + done, buffer.count - done, off_t(offset + done))
                if count < 0 {
                    if errno == EINTR { continue }
                    throw FileError("write", path)
                }
                if count == 0 { throw FileError("write", path, code: ENOSPC) }
                done += count
            }
        }
    }

    /// Writes all of `pieces`, one after another, at `offset` of an open file (one `pwritev` for
    /// all of them, as long as the file takes them), without moving its file offset.
    static func writeAll(_ descriptor: Int32, _ pieces: [Data], at offset: Int, path: String) throws {
        var vectors: [iovec] = []
        vectors.reserveCapacity(pieces.count)
        try withBytes(of: pieces[...], gathering: &vectors) { vectors in
            var done = 0
            var first = 0
            while first < vectors.count {
                let count = vectors.withUnsafeBufferPointer { all in
                    pwritev(descriptor, all.baseAddress! + first, Int32(min(all.count - first, 1024)), off_t(offset + done))
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw FileError("write", path)
                }
                if count == 0 { throw FileError("write", path, code: ENOSPC) }
                done += count
                // Skip what was written: whole vectors, then the written part of the next.
                var left = count
                while first < vectors.count, left >= vectors[first].iov_len {
                    left -= vectors[first].iov_len
                    first += 1
                }
                if left > 0 {
                    vectors[first].iov_base = vectors[first].iov_base.map { $0 + left }
                    vectors[first].iov_len -= left
                }
            }
        }
    }

    /// Runs `body` with `vectors` extended by one `iovec` per piece, each valid meanwhile.
    private static func withBytes(of pieces: ArraySlice<Data>, gathering vectors: inout [iovec],
                                  _ body: (inout [iovec]) throws -> Void) throws {
        guard let piece = pieces.first else { return try body(&vectors) }
        try piece.withUnsafeBytes { bytes in
            vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count))
            try withBytes(of: pieces.dropFirst(), gathering: &vectors, body)
        }
    }

    /// `count` bytes at `offset` of an open file; fewer only when the file ends first.
    static func read(_ descriptor: Int32, count: Int, at offset: Int, path: String) throws -> Data {
        var data = Data(count: count)
        let received = try data.withUnsafeMutableBytes { buffer in
            try readFully(descriptor, into: buffer, from: offset, path: path)
        }
        if received < count { data.count = received }
        return data
    }

    /// Atomically replaces `destination` with `source` (same directory).
    static func replaceItem(at destination: String, with source: String) throws {
        guard rename(source, destination) == 0 else { throw FileError("rename", destination) }
    }

    /// Removes a file; a file that is already gone is not an error. Returns whether it existed.
    @discardableResult
    static func removeFile(_ path: String) throws -> Bool {
        if unlink(path) == 0 { return true }
        let code = errno
        if code == ENOENT { return false }
        throw FileError("unlink", path, code: code)
    }

    /// Removes a file if it can; for clean-ups whose failure changes nothing.
    static func removeQuietly(_ path: String) {
        _ = try? removeFile(path)
    }

    /// The names in a directory, without `.` and `..`.
    static func contentsOfDirectory(_ path: String) throws -> [String] {
        guard let directory = opendir(path) else { throw FileError("opendir", path) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: pointer.pointee)) {
                    String(cString: $0)
                }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Flushes a directory's entries (a rename in it) as far as `durability` says.
    static func synchronizeDirectory(_ path: String, _ durability: Durability) throws {
        guard durability != .none else { return }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileError("open", path) }
        defer { close(descriptor) }
        try synchronize(descriptor, path: path, durability)
    }

    /// How far a write is pushed towards the device before the call returns.
    enum Durability: Sendable, Equatable {
        /// Left in the page cache: survives the process, not necessarily a power loss.
        case none
        /// `fsync`: handed to the device. On Linux that includes flushing the drive's cache; on
        /// Darwin it does not (the drive may still reorder or lose it).
        case handedToDevice
        /// On Darwin `fcntl(F_FULLFSYNC)`, which also flushes the drive's cache (Apple's `fsync(2)`
        /// man page); elsewhere `fsync`. For files that must survive a power loss.
        case full
    }

    static func synchronize(_ descriptor: Int32, path: String, _ durability: Durability) throws {
        switch durability {
        case .none:
            return
        case .handedToDevice:
            break
        case .full:
            #if canImport(Darwin)
            // File systems without it (some network and FAT volumes) refuse it: fall back to fsync.
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
            #endif
        }
        guard fsync(descriptor) == 0 else { throw FileError("fsync", path) }
    }

    /// Whether a process with this id is running (for stale temporary files).
    static func processExists(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    static var currentProcessID: Int32 { getpid() }
}

/// The disk tier's reads of what is already on disk — entry files, their headers, the listing of
/// `entries/`, the index snapshot and journal — so that tests can make them fail as a locked
/// device does (Data Protection answers `EPERM` or `EACCES`) and check that the store deletes
/// and rebuilds nothing because of it. Writes need no such seam: the tests reach their failures
/// with real file systems (a full or read-only tmpfs).
///
/// In production `fault` is nil: one comparison per read, nothing allocated, no lock.
struct FileReader: Sendable {
    /// What a read is for, as a test's `fault` sees it.
    enum Target: Sendable, Equatable {
        /// An entry file, read whole by a lookup.
        case entry
        /// The first bytes of an entry file, read by a directory scan or `storedKeys()`.
        case entryHeader
        /// The listing of `entries/` (or of the cache directory, for temporary files).
        case directory
        /// The index snapshot or the journal, read when the store opens.
        case index
    }

    /// A test's stand-in failure: given what is read and its path, the `errno` to fail with,
    /// or nil to read. Nil (no faults) in production.
    var fault: (@Sendable (Target, String) -> Int32?)?

    init(fault: (@Sendable (Target, String) -> Int32?)? = nil) {
        self.fault = fault
    }

    func readFile(_ path: String, for target: Target) throws -> Data {
        if let fault, let code = fault(target, path) { throw FileError("open", path, code: code) }
        return try FileIO.readFile(path)
    }

    func readPrefix(_ path: String, length: Int) throws -> FilePrefix {
        if let fault, let code = fault(.entryHeader, path) { throw FileError("open", path, code: code) }
        return try FileIO.readPrefix(path, length: length)
    }

    func contentsOfDirectory(_ path: String) throws -> [String] {
        if let fault, let code = fault(.directory, path) { throw FileError("opendir", path, code: code) }
        return try FileIO.contentsOfDirectory(path)
    }
}

/// The journal file, open for appending.
///
/// Confined to the disk store's worker queue; not shared between threads.
struct JournalFile {
    let path: String
    private(set) var descriptor: Int32
    private let identity: (device: UInt64, inode: UInt64)

    /// Opens (creating with 0600 and `protection` if needed) the journal at `path` for appending.
    init(path: String, protection: CachingFileProtection) throws {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode_t(0o600))
        guard descriptor >= 0 else { throw FileError("open", path) }
        protection.apply(toItemAt: path)
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let error = FileError("fstat", path)
            _ = closeDescriptor(descriptor)
            throw error
        }
        self.path = path
        self.descriptor = descriptor
        let status = FileStatus(info)
        identity = (status.device, status.inode)
    }

    /// Whether the path still names the file this handle has open (it was not deleted or replaced).
    var isCurrent: Bool {
        guard let status = try? FileIO.status(path) else { return false }
        return status.device == identity.device && status.inode == identity.inode
    }

    /// Appends `data` with one `write`, so concurrent appenders interleave whole batches.
    func append(_ data: Data, durability: FileIO.Durability) throws {
        guard !data.isEmpty else { return }
        try data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var written: Int
            repeat {
                written = write(descriptor, base, buffer.count)
            } while written < 0 && errno == EINTR
            if written < 0 { throw FileError("write", path) }
            // A short append leaves a torn record that replay skips; report it as a failed write.
            if written < buffer.count { throw FileError("write", path, code: ENOSPC) }
        }
        try FileIO.synchronize(descriptor, path: path, durability)
    }

    /// The file's current size (including other processes' appends).
    func size() throws -> Int {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileError("fstat", path) }
        return Int(info.st_size)
    }

    func truncate() throws {
        guard ftruncate(descriptor, 0) == 0 else { throw FileError("ftruncate", path) }
    }

    func close() {
        _ = closeDescriptor(descriptor)
    }
}

@inline(__always)
private func closeDescriptor(_ descriptor: Int32) -> Int32 {
    close(descriptor)
}
