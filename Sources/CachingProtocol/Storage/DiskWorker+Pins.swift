import Foundation

// The pins file: read when it changed (a reopen, another process), written when the app pins or
// unpins, under a lock shared by the processes that use the directory.
extension DiskWorker {
    /// Reads the pins file into the shared state when it is not the version last read (a new
    /// store, or another process changed it). A missing file means no pins; a damaged one too
    /// (counted as corrupt); one that cannot be read now leaves the pins as they were. Safe on
    /// any thread: it only reads files, and installs what it read under the store's lock.
    static func refreshPins(paths: DiskStore.Paths, state: Locked<DiskStore.Shared>, reader: FileReader) {
        let stamp = (try? FileIO.status(paths.pins)).map(FileStamp.init)
        guard state.withLock({ $0.disk.pins.source != stamp }) else { return }
        var keys: [String] = []
        if stamp != nil {
            do {
                keys = try Pins.decode(try reader.readFile(paths.pins, for: .index))
            } catch let error as FileError where !error.isMissing {
                state.withLock { $0.report.noteUnavailable(CachingError(.fileUnreadable, "pins: \(error)")) }
                return
            } catch let error as BinaryDecodingError {
                state.withLock { $0.report.noteCorrupt(CachingError(.corruptEntry, "\(paths.pins): \(error)")) }
            } catch {
                // Gone between the stat and the read: no pins.
            }
        }
        state.withLock { $0.disk.pins.install(keys, from: stamp) }
    }

    /// `refreshPins` for this worker's store, and the pins file's size for the capacity.
    func refreshPins() {
        Self.refreshPins(paths: paths, state: state, reader: configuration.reader)
        pinsSize = state.withLock { $0.disk.pins.source?.size ?? 0 }
    }

    /// Pins `added` and unpins `removed` keys, in the pins file and in the shared state, so that a
    /// process that pins at the same moment is not lost: the new file is prepared (read, changed,
    /// written to a temporary file) without a lock, then the directory's pins lock is taken
    /// without waiting, only to check that the file is still the one read and to rename the new
    /// one into place. A lock held while an iOS app is suspended gets it killed when the
    /// directory is in an App Group container (0xdead10cc), and a lock some other process holds
    /// must not stall the caller: so it is never waited for, and never held across file writes.
    /// When the file changed meanwhile or the lock is busy, it starts again (at most
    /// `pinAttempts` times, then throws `diskWriteFailed`). Throws `pinnedBeyondCapacity`,
    /// changing nothing, when the pinned records (with the index files) would leave less than
    /// `room` bytes of the capacity (capped at what one record may take here) for everything else;
    /// throws a write failure when the file cannot be written.
    func changePins(adding added: [String], removing removed: [String], room: Int) throws {
        try prepareDirectory()
        for attempt in 1...Self.pinAttempts {
            refreshPins()
            let metadata = snapshotSize + journalSize
            let (read, keys, pinnedBytes, capacity, room) = state.withLock { state in
                let keys = state.disk.pins.keys(adding: added, removing: removed)
                return (state.disk.pins.source, keys, state.disk.bytes(of: Set(keys.map(EntryDigest.init(key:)))),
                        state.limits.capacity, min(max(0, room), state.limits.maximumEntryBytes))
            }
            guard keys != state.withLock({ $0.disk.pins.keys }) else { return }
            let data = Pins.encode(keys)
            if !added.isEmpty, pinnedBytes + metadata + data.count + room > capacity {
                throw CachingError(.pinnedBeyondCapacity, "pinning \(added.count) URL(s) would keep \(pinnedBytes) bytes pinned; "
                                   + "with \(metadata + data.count) bytes of index files and room for one response of \(room) bytes "
                                   + "that is more than diskCapacity (\(capacity) bytes). Nothing was pinned")
            }
            let temporary = paths.temporaryFile(in: paths.root)
            let replaced: Bool
            do {
                try FileIO.createFile(temporary, contents: data, mode: 0o600, protection: protection, durability: indexDurability)
                replaced = try FileIO.withExclusiveLockIfFree(paths.pinsLock, protection: protection) { () throws -> Bool in
                    guard (try? FileIO.status(paths.pins)).map(FileStamp.init) == read else { return false }
                    try FileIO.replaceItem(at: paths.pins, with: temporary)
                    return true
                } ?? false
            } catch {
                FileIO.removeQuietly(temporary)
                reportWriteFailure(error)
                throw CachingError(.diskWriteFailed, "pins: \(error)")
            }
            guard replaced else {
                FileIO.removeQuietly(temporary)
                // Another process is changing the file: it holds the lock for a rename.
                if attempt < Self.pinAttempts { usleep(useconds_t(attempt * 1_000)) }
                continue
            }
            try? FileIO.synchronizeDirectory(paths.root, indexDurability)
            let stamp = (try? FileIO.status(paths.pins)).map(FileStamp.init)
            state.withLock { $0.disk.pins.install(keys, from: stamp) }
            pinsSize = data.count
            return
        }
        throw CachingError(.diskWriteFailed, "pins: another process kept changing the pins file (\(Self.pinAttempts) attempts); "
                           + "nothing was changed, try again")
    }

    /// How many times `changePins` prepares the file before it gives up: about 45 ms of pauses
    /// in all, much longer than another process holds the lock (a stat and a rename).
    static let pinAttempts = 10
}
