import Foundation

extension DiskStore {
    /// Pins `keys` (their records are kept from eviction and the age limit), in the directory's
    /// pins file, once the writes handed in before have landed (so their sizes are known). All
    /// or nothing: throws `CachingError.pinnedBeyondCapacity` when the pinned records would leave
    /// less than `room` bytes of the capacity for the rest, or a write failure. Runs on the
    /// worker; returns once the file is written.
    func pin(_ keys: [String], leavingRoom room: Int) throws {
        try changePins(adding: keys, removing: [], room: room)
    }

    /// Unpins `keys`; they are evicted like any other record from now on.
    func unpin(_ keys: [String]) throws {
        try changePins(adding: [], removing: keys, room: 0)
    }

    private func changePins(adding added: [String], removing removed: [String], room: Int) throws {
        do {
            try worker.sync {
                fileWorker.drain()
                try fileWorker.changePins(adding: added, removing: removed, room: room)
                fileWorker.settle()
            }
        } catch let error as CachingError {
            throw error
        } catch {
            throw CachingError(.diskUnavailable, "pins: \(error)")
        }
    }

    /// The pinned keys, in pinning order, as the pins file says now (read again when another
    /// process changed it).
    var pinnedKeys: [String] {
        DiskWorker.refreshPins(paths: paths, state: state, reader: configuration.reader)
        return state.withLock { $0.disk.pins.keys }
    }

    /// Whether `key` is pinned, as the pins file said when last read (no file is read here).
    func isPinned(_ key: String) -> Bool {
        state.withLock { $0.disk.pins.contains(EntryDigest(key: key)) }
    }

    /// The digests pinned now, after reading the pins file again if another process changed it.
    func currentPins() -> Pins {
        DiskWorker.refreshPins(paths: paths, state: state, reader: configuration.reader)
        return state.withLock { $0.disk.pins }
    }
}
