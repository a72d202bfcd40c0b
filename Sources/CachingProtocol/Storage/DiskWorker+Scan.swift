import Foundation

// Opening the index, and scanning the directory to reconcile the index with the files.
extension DiskWorker {
    // MARK: - Opening

    /// Loads the index from the snapshot and journal — without what was removed since the store
    /// opened (the tombstones) — then reconciles it with the directory, which rebuilds it from
    /// the entry files' headers when there was no usable snapshot. Lookups use the loaded index
    /// as soon as it is in place; until then they read entry files directly.
    ///
    /// A snapshot or journal that exists but cannot be read (permissions, Data Protection while
    /// the device is locked) is not damage: nothing is rebuilt, scanned or overwritten, and a
    /// later lookup queues this operation again (`DiskState.takeOwedWork`).
    func open() {
        let reader = configuration.reader
        var loaded: DiskIndex?
        var damagedJournalBytes = 0
        var metadataBytes = 0
        let origin: DiskStore.IndexOrigin
        do {
            let snapshot = try reader.readFile(paths.index, for: .index)
            let journal: Data
            do {
                journal = try reader.readFile(paths.journal, for: .index)
            } catch let error as FileError where error.isMissing {
                journal = Data()
            }
            do {
                let result = try DiskIndex.load(snapshot: snapshot, journal: journal)
                loaded = result.index
                damagedJournalBytes = result.damagedJournalBytes
                snapshotSize = snapshot.count
                journalSize = journal.count
                metadataBytes = snapshot.count + journal.count
                // A damaged journal is folded into a fresh snapshot by the reconcile below.
                snapshotNeeded = snapshotNeeded || result.damagedJournalBytes > 0
                origin = .loaded
            } catch {
                origin = .rebuilt(reason: "index snapshot unreadable: \(error)")
            }
        } catch let error as FileError where error.isMissing {
            origin = .rebuilt(reason: "no index snapshot (\(error))")
        } catch {
            origin = .unreadable(reason: "\(error)")
        }
        let readable = state.withLock { state -> Bool in
            state.report.noteIndexLoad(origin, damagedJournalBytes: damagedJournalBytes)
            if case .unreadable(let reason) = origin {
                state.report.noteUnavailable(CachingError(.fileUnreadable, "index: \(reason)"))
                state.disk.indexUnreadable()
                return false
            }
            state.limits.metadataBytes = metadataBytes
            if let loaded { state.disk.install(loaded) } else { state.disk.indexMissing() }
            return true
        }
        indexLoaded?()
        indexLoaded = nil
        // Also when the index loaded: files written after the last journal append before a
        // crash, or by another process, are adopted (or deleted) so they cannot hold space forever.
        if readable { reconcile(full: loaded == nil) }
    }

    // MARK: - Reconciling the index with the directory

    /// Compares the index with the files in `entries/`: entries whose file is gone are dropped;
    /// files the index does not list (written just before a crash, or by another process) are
    /// adopted as least recently used after their header checks out, or deleted when it does
    /// not; abandoned temporary files and foreign files in `entries/` are deleted. When `full`,
    /// the index could not be loaded and this rebuilds it. Lists the directory but reads only
    /// unlisted files.
    ///
    /// A file it cannot read (permissions, Data Protection) is neither adopted nor deleted, and
    /// a listing it cannot get changes nothing: a later lookup has the scan tried again.
    func reconcile(full: Bool) {
        let postponed = state.withLock { state -> Bool in
            guard !state.disk.persistsIndex else { return false }
            state.disk.scanPostponed()  // adopting files now would rebuild the unreadable index
            return true
        }
        if postponed { return }
        let names: [String]
        do {
            guard directory != .deleted else {
                state.withLock { $0.disk.scanAbandoned() }
                return
            }
            names = try configuration.reader.contentsOfDirectory(paths.entries)
        } catch let error as FileError where error.isMissing {
            directoryVanished()  // deleted since it opened: the next write recreates it
            state.withLock { $0.disk.scanAbandoned() }
            return
        } catch {
            let failure = CachingError(.fileUnreadable, "\(error)")
            state.withLock { state in
                state.report.noteUnavailable(failure)
                state.disk.scanUnavailable()
            }
            return
        }
        var listed = Set<EntryDigest>()
        listed.reserveCapacity(names.count)
        var others: [String] = []
        for name in names {
            if let digest = EntryDigest(fileName: name) { listed.insert(digest) } else { others.append(name) }
        }

        let (unlisted, vanished) = state.withLock { $0.disk.compare(listed: listed) }
        for digest in vanished { pendingJournal.append(.remove(digest)) }

        let reading = readHeaders(of: unlisted)
        let (adopted, removed) = state.withLock { state in
            state.report.countFileReads(unlisted.count)
            if reading.corrupt > 0 {
                state.report.noteCorrupt(CachingError(.corruptEntry, "\(reading.corrupt) unreadable entry file(s) in \(paths.entries)"),
                                         count: reading.corrupt)
            }
            if let error = reading.unreadableError {
                state.report.noteUnavailable(CachingError(
                    .fileUnreadable, "\(reading.unreadable.count) entry file(s) in \(paths.entries) could not be read: \(error)"),
                    count: reading.unreadable.count)
            }
            return state.disk.adopt(reading.found)
        }
        pendingJournal.append(contentsOf: adopted)
        for digest in removed {
            removeEntryFile(digest)
            pendingJournal.append(.remove(digest))
        }

        for name in others {
            let path = paths.entries + "/" + name
            if name.hasPrefix(Paths.temporaryPrefix), !isAbandonedTemporaryFile(name: name, path: path) { continue }
            FileIO.removeQuietly(path)  // not ours: `entries/` holds only entry files
        }
        for name in (try? FileIO.contentsOfDirectory(paths.root)) ?? [] where name.hasPrefix(Paths.temporaryPrefix) {
            let path = paths.root + "/" + name
            if isAbandonedTemporaryFile(name: name, path: path) { FileIO.removeQuietly(path) }
        }
        if full || !adopted.isEmpty || !vanished.isEmpty {
            snapshotNeeded = true
        }
        // Once no scan is pending the index lists every file, so removals go through it alone.
        state.withLock { $0.disk.finishScan(unreadable: reading.unreadable) }
    }

    /// What the headers of files the index did not list said.
    private struct HeaderScan {
        /// Valid entries, newest first (each adoption goes in front of the older ones, so the
        /// oldest file ends up evicted first).
        var found: [(digest: EntryDigest, entry: DiskIndex.Entry)] = []
        /// Damaged files, deleted.
        var corrupt = 0
        /// Files that could not be read, left alone; and the last reason.
        var unreadable: Set<EntryDigest> = []
        var unreadableError: Error?
    }

    /// Reads the header of each file in `digests`: adopts what checks out, deletes what is
    /// damaged, and leaves alone what cannot be read.
    private func readHeaders(of digests: [EntryDigest]) -> HeaderScan {
        var scan = HeaderScan()
        for digest in digests {
            let path = paths.entry(digest)
            switch Self.readEntryHeader(path, reader: configuration.reader) {
            case .valid(let header, let status) where EntryDigest(key: header.key) == digest:
                scan.found.append((digest, DiskIndex.Entry(
                    fileSize: status.size,
                    latestResponseDate: header.latestResponseDate,
                    lastAccess: status.modificationDate,
                    summary: EntrySummary(key: header.key, variants: nil)  // the rest is read when listed
                )))
            case .gone:
                break
            case .unreadable(let error):
                scan.unreadable.insert(digest)
                scan.unreadableError = error
            case .valid, .corrupt:
                FileIO.removeQuietly(path)
                scan.corrupt += 1
            }
        }
        scan.found.sort { $0.entry.lastAccess > $1.entry.lastAccess }
        return scan
    }

    enum HeaderReading {
        case valid(EntryCodec.Header, FileStatus)
        /// Damaged, or not an entry file.
        case corrupt
        case gone
        /// It could not be read for a reason that may pass (permissions, Data Protection, I/O).
        case unreadable(Error)
    }

    /// The header of an entry file, read from its first bytes only.
    static func readEntryHeader(_ path: String, reader: FileReader) -> HeaderReading {
        do {
            var reading = try reader.readPrefix(path, length: EntryCodec.headerProbeSize)
            for _ in 0..<2 {
                var required = 0
                let header = try reading.data.withUnsafeBytes { buffer in
                    try EntryCodec.decodeHeader(buffer, fileSize: reading.fileSize, requiredPrefixLength: &required)
                }
                if let header { return .valid(header, reading.status) }
                // A key longer than the probe: read exactly the header once.
                guard required > reading.data.count, required <= reading.fileSize else { return .corrupt }
                reading = try reader.readPrefix(path, length: required)
            }
            return .corrupt
        } catch let error as FileError where error.isMissing {
            return .gone
        } catch is BinaryDecodingError {
            return .corrupt
        } catch {
            return .unreadable(error)
        }
    }

    /// A temporary file whose writer is gone: its process no longer runs, or it is older than
    /// any write takes. (A crash between creating and renaming one leaves it behind.)
    func isAbandonedTemporaryFile(name: String, path: String) -> Bool {
        let rest = name.dropFirst(Paths.temporaryPrefix.count)
        guard let pid = Int32(rest.prefix { $0.isASCII && $0.isNumber }), FileIO.processExists(pid) else {
            return true
        }
        guard let status = try? FileIO.status(path) else { return false }
        // File times are wall-clock times, so this compares with the wall clock, not `now`.
        return Date().timeIntervalSince(status.modificationDate) > Self.abandonedTemporaryFileAge
    }
}
