import Foundation
@testable import CachingProtocol

/// A disk whose writes of a streamed body's pieces (`StreamedEntryFile.WritePieces`) stall until
/// `release()`, then go to the file system: a disk slower than any network, for as long as a
/// test needs it.
final class StalledDisk: Sendable {
    private let gate = DispatchSemaphore(value: 0)
    private let released = Locked(false)

    /// Writes `pieces` once the disk is released.
    func write(_ descriptor: Int32, _ pieces: [Data], _ offset: Int, _ path: String) throws {
        if !released.withLock({ $0 }) {
            // Each write that waited lets the next one through.
            gate.wait()
            gate.signal()
        }
        try FileIO.writeAll(descriptor, pieces, at: offset, path: path)
    }

    /// Lets every write through, now and from now on. Once only.
    func release() {
        let first = released.withLock { released -> Bool in
            defer { released = true }
            return !released
        }
        if first { gate.signal() }
    }

    /// A file for `key` in `directory` whose pieces go to this disk.
    func file(forKey key: String, in directory: URL) -> StreamedEntryFile {
        StreamedEntryFile(key: key, path: directory.appendingPathComponent(".tmp-\(getpid())-\(UUID().uuidString)").path,
                          protection: .none, writePieces: { try self.write($0, $1, $2, $3) })
    }
}
