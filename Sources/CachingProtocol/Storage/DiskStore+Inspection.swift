import Foundation

extension DiskStore {
    /// What a cache directory holds, read without opening a store on it and without writing,
    /// creating or deleting anything (`Demo inspect`): the index and journal as they are, every
    /// entry file the index does not list or does not summarise (read whole), and the pins file.
    /// Index entries whose file is gone are left out, so are files that do not decode. Throws
    /// when the directory has no `entries/` to list.
    static func inspect(directory: URL, reader: FileReader = FileReader()) throws -> (listed: [Listed], pins: Pins) {
        let paths = Paths(directory: directory)
        let names = try reader.contentsOfDirectory(paths.entries)
        var files: [EntryDigest: Void] = [:]
        for name in names { if let digest = EntryDigest(fileName: name) { files[digest] = () } }

        var index = DiskIndex()
        if let snapshot = try? reader.readFile(paths.index, for: .index) {
            let journal = (try? reader.readFile(paths.journal, for: .index)) ?? Data()
            index = (try? DiskIndex.load(snapshot: snapshot, journal: journal).index) ?? DiskIndex()
        }
        var listed: [Listed] = []
        for element in index.entries where files.removeValue(forKey: element.key) != nil {
            if let summary = element.value.summary, summary.isComplete {
                listed.append(Listed(summary: summary, fileBytes: element.value.fileSize))
            } else if let read = read(element.key, paths: paths, reader: reader) {
                listed.append(read)
            }
        }
        // Files the index does not list: written after its last append, or by another process.
        for digest in files.keys {
            if let read = read(digest, paths: paths, reader: reader) { listed.append(read) }
        }
        var pins = Pins()
        if let data = try? reader.readFile(paths.pins, for: .index), let keys = try? Pins.decode(data) {
            pins.install(keys, from: nil)
        }
        return (listed, pins)
    }

    private static func read(_ digest: EntryDigest, paths: Paths, reader: FileReader) -> Listed? {
        guard let data = try? reader.readFile(paths.entry(digest), for: .entry), let record = try? EntryCodec.decode(data),
              EntryDigest(key: record.key) == digest else { return nil }
        return Listed(summary: EntrySummary(record), fileBytes: data.count)
    }
}
