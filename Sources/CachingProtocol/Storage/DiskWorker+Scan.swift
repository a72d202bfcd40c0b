import Foundation

// Opening the index, and scanning the directory to reconcile the index with the files.
extension DiskWorker {
    // MARK: - Opening

    /// Loads the index from the snapshot and journal — without what was removed since the store
    /// opened (the tombstones) — then reconciles it with the directory, which rebuilds it from
    /// the entry files' headers when there was no usable snapshot. Lookups use the loaded index
    /// as soon as it is in place; until then they read entry files directly.
    func open() {
        var loaded: DiskIndex?
        var damagedJournalBytes = 0
        var metadataBytes = 0
        let origin: DiskStore.IndexOrigin
        do {
            let snapshot = try FileIO.readFile(paths.index)
            let journal = (try? FileIO.readFile(paths.journal)) ?? Data()
            do {
                let result = try DiskIndex.load(snapshot: snapshot, journal: journal)
                loaded = result.index
                damagedJournalBytes = result.damagedJournalBytes
                snapshotSize = snapshot.count
                journalSize = journal.count
                metadataBytes = snapshot.count + journal.count
                // A damaged journal is folded into a fresh snapshot by the reconcile below.
                snapshotNeeded = result.damagedJournalBytes > 0
                origin = .loaded
            } catch {
                origin = .rebuilt(reason: "index snapshot unreadable: \(error)")
            }
        } catch {
            origin = .rebuilt(reason: "no index snapshot (\(error))")
        }
        state.withLock { state in
            state.report.noteIndexLoad(origin, damagedJournalBytes: damagedJournalBytes)
            state.limits.metadataBytes = metadataBytes
            if let loaded { state.disk.install(loaded) } else { state.disk.indexMissing() }
        }
        indexLoaded?()
        indexLoaded = nil
        // Also when the index loaded: files written after the last journal append before a
        // crash, or by another process, are adopted (or deleted) so they cannot hold space forever.
        reconcile(full: loaded == nil)
    }

    // MARK: - Reconciling the index with the directory

    /// Compares the index with the files in `entries/`: entries whose file is gone are dropped;
    /// files the index does not list (written just before a crash, or by another process) are
    /// adopted as least recently used after their header checks out, or deleted when it does
    /// not; abandoned temporary files and foreign files in `entries/` are deleted. When `full`,
    /// the index could not be loaded and this rebuilds it. Lists the directory but reads only
    /// unlisted files.
    func reconcile(full: Bool) {
        // Also when listing fails: the index then holds what it could load.
        defer { state.withLock { $0.disk.finishScan() } }
        let names: [String]
        do {
            guard directory != .deleted else { return }
            names = try FileIO.contentsOfDirectory(paths.entries)
        } catch let error as FileError where error.isMissing {
            directoryVanished()  // deleted since it opened: the next write recreates it
            return
        } catch {
            reportWriteFailure(error)
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
    }

    /// What the headers of files the index did not list said.
    private struct HeaderScan {
        /// Valid entries, newest first (each adoption goes in front of the older ones, so the
        /// oldest file ends up evicted first).
        var found: [(digest: EntryDigest, entry: DiskIndex.Entry)] = []
        /// Damaged or unreadable files, deleted.
        var corrupt = 0
    }

    /// Reads the header of each file in `digests`: adopts what checks out, deletes the rest.
    private func readHeaders(of digests: [EntryDigest]) -> HeaderScan {
        var scan = HeaderScan()
        for digest in digests {
            let path = paths.entry(digest)
            switch Self.readEntryHeader(path) {
            case .valid(let header, let status) where EntryDigest(key: header.key) == digest:
                scan.found.append((digest, DiskIndex.Entry(
                    fileSize: status.size,
                    latestResponseDate: header.latestResponseDate,
                    lastAccess: status.modificationDate
                )))
            case .gone:
                break
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
    }

    /// The header of an entry file, read from its first bytes only.
    static func readEntryHeader(_ path: String) -> HeaderReading {
        do {
            var reading = try FileIO.readPrefix(path, length: EntryCodec.headerProbeSize)
            for _ in 0..<2 {
                var required = 0
                let header = try reading.data.withUnsafeBytes { buffer in
                    try EntryCodec.decodeHeader(buffer, fileSize: reading.fileSize, requiredPrefixLength: &required)
                }
                if let header { return .valid(header, reading.status) }
                // A key longer than the probe: read exactly the header once.
                guard required > reading.data.count, required <= reading.fileSize else { return .corrupt }
                reading = try FileIO.readPrefix(path, length: required)
            }
            return .corrupt
        } catch let error as FileError where error.isMissing {
            return .gone
        } catch {
            return .corrupt
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
