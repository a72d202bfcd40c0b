import Foundation

extension DiskStore {
    /// One record as a listing shows it.
    struct Listed: Sendable {
        /// Its summary, with its variants known.
        let summary: EntrySummary
        /// The size of its file; for a record not written yet, its estimated cost.
        let fileBytes: Int
    }

    /// Every record on disk or staged, from the index's summaries: no entry file is read, except
    /// once those whose index entry has no complete summary (a file adopted by a scan, which
    /// reads headers only, or an index from before summaries). Those are read here, on the
    /// calling thread, and their summaries kept in the index (and in its next snapshot), so the
    /// next listing reads nothing. Waits for the index to load, and for a rebuild to end.
    func listing() -> [Listed] {
        waitUntilOpen()
        if !state.withLock({ $0.disk.isIndexReady }) { flush() }
        let (staged, indexed) = state.withLock { state in
            (state.disk.stagedRecords, state.disk.index.entries.map { (digest: $0.key, entry: $0.value) })
        }
        var listed: [Listed] = []
        listed.reserveCapacity(indexed.count + staged.count)
        var stagedDigests = Set<EntryDigest>()
        for record in staged {
            stagedDigests.insert(EntryDigest(key: record.key))
            listed.append(Listed(summary: EntrySummary(record), fileBytes: record.cost))
        }
        var described: [(digest: EntryDigest, summary: EntrySummary, generation: UInt64)] = []
        var reads = 0
        for item in indexed where !stagedDigests.contains(item.digest) {
            if let summary = item.entry.summary, summary.isComplete {
                listed.append(Listed(summary: summary, fileBytes: item.entry.fileSize))
                continue
            }
            reads += 1
            if let record = try? EntryCodec.decode(configuration.reader.readFile(paths.entry(item.digest), for: .entry),
                                                          expectedKey: item.entry.summary?.key),
                      EntryDigest(key: record.key) == item.digest {
                // A file that cannot be read now is left out; a lookup deals with it as usual.
                let summary = EntrySummary(record)
                described.append((item.digest, summary, item.entry.generation))
                listed.append(Listed(summary: summary, fileBytes: item.entry.fileSize))
            }
        }
        guard reads > 0 else { return listed }
        let start = state.withLock { state -> Bool in
            state.report.countFileReads(reads)
            var kept = false
            for item in described where state.disk.describe(item.digest, item.summary, generation: item.generation) {
                kept = true
            }
            return kept && state.work.enqueue(.persistIndex)
        }
        if start { startWorker() }
        return listed
    }
}
