import XCTest
@testable import CachingProtocol

/// A body written to its entry file as it arrives (`StreamedEntryFile`), at the disk tier: the
/// file it makes is the entry file the store would have encoded, lookups read a staged body from
/// it before the worker renames it, and a file nobody stores is deleted.
final class StreamedEntryFileTests: TemporaryDirectoryTestCase {
    private func makeStore(writeDelay: TimeInterval = 0.005) -> DiskStore {
        track(DiskStore(configuration: .init(directory: cacheDirectory(), accessTimeWriteDelay: 3600, writeDelay: writeDelay)))
    }

    private func entryPath(_ key: String) -> String {
        cacheDirectory().appendingPathComponent("entries").appendingPathComponent(EntryDigest(key: key).fileName).path
    }

    private func temporaryFiles() -> [String] {
        Self.temporaryFiles(in: cacheDirectory())
    }

    private static func temporaryFiles(in directory: URL) -> [String] {
        CacheFiles.entryNames(in: directory).filter { $0.hasPrefix(DiskStore.Paths.temporaryPrefix) }
    }

    /// Appends `body` in pieces of uneven sizes, as a transfer hands them over.
    private func append(_ body: Data, to file: StreamedEntryFile, bodyIsKept: Bool = false) {
        var start = 0
        var size = 1
        while start < body.count {
            let end = min(body.count, start + size)
            file.append(body[start..<end], bodyIsKept: bodyIsKept)
            start = end
            size = size * 3 % 40_000 + 7
        }
    }

    /// Waits (without sleeping) until `condition` holds.
    private func waitUntil(_ description: String, _ condition: @escaping @Sendable () -> Bool) {
        wait(for: [ConditionExpectation(description, condition)], timeout: 10)
    }

    func testABodyWrittenAsItArrivesBecomesTheEntryFileTheStoreWouldHaveWritten() throws {
        // Given a record with two variants whose first body arrives in pieces
        let store = makeStore(writeDelay: 3600)
        store.waitUntilOpen()
        let record = CacheRecord(key: "GET https://example.com/streamed", variants: [
            Fixtures.entry(body: Data.pattern(700_000, seed: 3)), Fixtures.entry(body: Data.pattern(5_000, seed: 4)),
        ])
        let file = store.streamedEntryFile(forKey: record.key)
        append(record.variants[0].body, to: file)
        // When the record is stored with the file, its first body held only there
        var withoutBody = record
        withoutBody.variants[0].body = Data()
        store.store(withoutBody, bodyFile: file)
        // Then lookups read the body from the file before the worker wrote anything
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath(record.key)), "not renamed yet")
        XCTAssertEqual(store.record(forKey: record.key), record)
        // And once written it is the entry file an ordinary write makes, and nothing else is left
        store.flush()
        XCTAssertEqual(try FileIO.readFile(entryPath(record.key)), EntryCodec.encode(record))
        XCTAssertEqual(temporaryFiles(), [])
        XCTAssertEqual(store.listing().first?.summary, EntrySummary(record))
    }

    func testAFileNobodyStoresIsDeleted() throws {
        let store = makeStore()
        store.waitUntilOpen()
        let discarded = store.streamedEntryFile(forKey: "GET https://example.com/a")
        append(Data.pattern(300_000), to: discarded)
        var abandoned: StreamedEntryFile? = store.streamedEntryFile(forKey: "GET https://example.com/b")
        abandoned?.append(Data.pattern(1_000), bodyIsKept: false)
        let directory = cacheDirectory()
        waitUntil("both files are created") { Self.temporaryFiles(in: directory).count == 2 }
        // When one is discarded (a body cut short, or one grown past the largest entry), and the
        // other let go of without a word (a load abandoned on the way)
        discarded.discard()
        abandoned = nil
        waitUntil("both files are deleted") { Self.temporaryFiles(in: directory).isEmpty }
    }

    func testAStagedFileReplacedBeforeItWasWrittenIsDeleted() throws {
        // Given a record staged with its file, not written yet
        let store = makeStore(writeDelay: 3600)
        store.waitUntilOpen()
        let key = "GET https://example.com/replaced"
        var first: StreamedEntryFile? = store.streamedEntryFile(forKey: key)
        append(Data.pattern(600_000, seed: 1), to: try XCTUnwrap(first))
        store.store(CacheRecord(key: key, variants: [Fixtures.entry(body: Data())]), bodyFile: first)
        first = nil  // the store holds it now
        // When a newer response for the key is stored, its body in a file of its own
        let newer = CacheRecord(key: key, variants: [Fixtures.entry(body: Data.pattern(650_000, seed: 2))])
        var second: StreamedEntryFile? = store.streamedEntryFile(forKey: key)
        append(newer.variants[0].body, to: try XCTUnwrap(second))
        store.store(newer, bodyFile: second)
        second = nil
        store.flush()
        // Then only the newer one is on disk, whole, and the first file went
        XCTAssertEqual(try EntryCodec.decode(FileIO.readFile(entryPath(key))), newer)
        let directory = cacheDirectory()
        waitUntil("the replaced file is deleted") { Self.temporaryFiles(in: directory).isEmpty }
    }

    func testARemovalWhileTheFileWaitsLeavesNothing() throws {
        let store = makeStore(writeDelay: 3600)
        store.waitUntilOpen()
        let key = "GET https://example.com/removed"
        var file: StreamedEntryFile? = store.streamedEntryFile(forKey: key)
        append(Data.pattern(600_000), to: try XCTUnwrap(file))
        store.store(CacheRecord(key: key, variants: [Fixtures.entry(body: Data())]), bodyFile: file)
        file = nil  // the store holds it now
        // When the app removes it before the worker wrote it
        store.removeRecord(forKey: key)
        store.flush()
        // Then no entry and no file is left
        XCTAssertNil(store.record(forKey: key))
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath(key)))
        let directory = cacheDirectory()
        waitUntil("the file is deleted") { Self.temporaryFiles(in: directory).isEmpty }
    }

    func testAStagedFileDiscardedBeforeItsBytesWereWrittenIsAMissNotAShortBody() throws {
        // Given a record staged with its file, whose 100 KB are still waiting to be written
        let store = makeStore(writeDelay: 3600)
        store.waitUntilOpen()
        let key = "GET https://example.com/discarded"
        let file = store.streamedEntryFile(forKey: key)
        append(Data.pattern(100_000), to: file)
        store.store(CacheRecord(key: key, variants: [Fixtures.entry(body: Data())]), bodyFile: file)
        // When the file is discarded before the worker made it whole (what it does when the
        // directory cannot be prepared), and the record is looked up before it is unstaged
        file.discard()
        // Then the lookup is a miss, not the body as far as it was written (nothing)
        XCTAssertNil(store.record(forKey: key))
    }

    func testAFileThatCannotBeCreatedFailsItsWritesAndLeavesNoFile() throws {
        // Given a file whose directory does not exist: it is created on the file's queue, not by
        // the caller (the transfer's callback, on corelibs' one serial queue)
        let missing = cacheDirectory().appendingPathComponent("gone").appendingPathComponent(".tmp-1-test").path
        let file = StreamedEntryFile(key: "GET https://example.com/nowhere", path: missing, protection: .none)
        // When a body is appended, past the bytes that start the writes
        append(Data.pattern(300_000), to: file)
        // Then the body cannot be read back or made into an entry, and no file appeared
        XCTAssertThrowsError(try file.readBody())
        XCTAssertThrowsError(try file.finish(CacheRecord(key: file.key, variants: [Fixtures.entry(body: Data())]),
                                             durability: .none))
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing))
    }

    func testAFileDiscardedBeforeItWasCreatedLeavesNoFile() throws {
        let store = makeStore()
        store.waitUntilOpen()
        // When files are discarded as soon as they are asked for, while their creation may still
        // be queued (a transfer cut at once, a body past the largest entry from its first piece)
        for number in 0..<200 {
            let file = store.streamedEntryFile(forKey: "GET https://example.com/\(number)")
            if number.isMultiple(of: 2) { file.append(Data.pattern(1_000), bodyIsKept: false) }
            file.discard()
            // Then no file is left once `discard` returns
            XCTAssertEqual(temporaryFiles(), [], "file \(number)")
        }
    }

    // MARK: A disk slower than the network

    /// Appends `pieces` on another thread, as a transfer's callbacks do.
    private func appendElsewhere(_ pieces: [Data], to file: StreamedEntryFile, bodyIsKept: Bool) -> BackgroundWork {
        BackgroundWork { for piece in pieces { file.append(piece, bodyIsKept: bodyIsKept) } }
    }

    private func entriesDirectory() throws -> URL {
        let entries = cacheDirectory().appendingPathComponent("entries")
        try FileManager.default.createDirectory(at: entries, withIntermediateDirectories: true)
        return entries
    }

    /// The files `fileOnAStalledDisk` made in this test, with their disks.
    private var stalledFiles: [(disk: StalledDisk, file: StreamedEntryFile)] = []

    override func tearDownWithError() throws {
        for (disk, file) in stalledFiles {
            disk.release()
            file.discard()
        }
        stalledFiles = []
        try super.tearDownWithError()
    }

    /// A file for a GET of `path` whose writes stall until the returned disk is released; the
    /// disk is released and the file discarded when the test ends.
    private func fileOnAStalledDisk(_ path: String) throws -> (disk: StalledDisk, file: StreamedEntryFile) {
        let disk = StalledDisk()
        let file = disk.file(forKey: "GET https://example.com\(path)", in: try entriesDirectory())
        stalledFiles.append((disk, file))
        return (disk, file)
    }

    /// The appends (`appendElsewhere`) stop once `file` took `stop` bytes and wait there for the
    /// disk; once it is released, they go on to the end.
    private func assertTheAppendsWait(at stop: Int, _ file: StreamedEntryFile, for disk: StalledDisk,
                                      _ appending: BackgroundWork,
                                      file path: StaticString = #filePath, line: UInt = #line) {
        waitUntil("\(stop) bytes appended") { file.appendedBytes >= stop }
        XCTAssertEqual(XCTWaiter().wait(for: [appending.early], timeout: 0.3), .timedOut, "an append waits for the disk",
                       file: path, line: line)
        XCTAssertEqual(file.appendedBytes, stop, "the appends stopped there", file: path, line: line)
        disk.release()
        wait(for: [appending.done], timeout: 30)
    }

    func testABodyKeptWholeInMemoryIsNotHeldBackByADiskThatStalls() throws {
        // Given a disk that takes nothing for now, and a body kept whole for its answer anyway
        let (disk, file) = try fileOnAStalledDisk("/kept")
        let body = Data.pattern(6 << 20, seed: 5)
        // When all of it arrives
        let appending = appendElsewhere(body.pieces(of: 16 << 10), to: file, bodyIsKept: true)
        // Then every piece was taken without waiting for the disk
        wait(for: [appending.done], timeout: 10)
        XCTAssertEqual(file.appendedBytes, body.count)
        // And once the disk takes them, the file holds the body byte for byte
        disk.release()
        XCTAssertEqual(try file.readBody(), body)
    }

    func testABodyOnlyHandedOnWaitsForADiskThatStallsPastTheBound() throws {
        // Given a disk that takes nothing for now, and a body the app takes piece by piece
        let (disk, file) = try fileOnAStalledDisk("/handed-on")
        let body = Data.pattern(6 << 20, seed: 6)
        // When it arrives
        let appending = appendElsewhere(body.pieces(of: 16 << 10), to: file, bodyIsKept: false)
        // Then the transfer waits at the first piece past the bound (memory stays bounded, and
        // the transfer goes at the disk's pace), and goes on once the disk takes the bytes
        assertTheAppendsWait(at: StreamedEntryFile.maximumPendingBytes + (16 << 10), file, for: disk, appending)
        // And the file holds the body byte for byte
        XCTAssertEqual(try file.readBody(), body)
    }

    func testKeptBodiesWaitForTheDiskOnceTheProcesssBacklogIsFull() throws {
        // Given a disk that takes nothing for now, and a kept body larger than the backlog the
        // process allows (one 1 MB piece handed over again and again: the pieces share it)
        let (disk, file) = try fileOnAStalledDisk("/backlog")
        let piece = Data.pattern(1 << 20, seed: 7)
        let (bound, backlog) = (StreamedEntryFile.maximumPendingBytes, StreamedEntryFile.largestBacklog)
        let count = (bound + backlog) / piece.count + 4
        // When it arrives
        let appending = appendElsewhere(Array(repeating: piece, count: count), to: file, bodyIsKept: true)
        // Then the pieces past the bound wait in memory up to the backlog, the transfer waits for
        // the disk at the first piece past it, and goes on once the disk takes the bytes
        assertTheAppendsWait(at: bound + backlog + piece.count, file, for: disk, appending)
        // And every piece is in the file, in order
        let written = try file.readBody()
        XCTAssertEqual(written.count, count * piece.count)
        for index in 0..<count {
            XCTAssertEqual(written[(index * piece.count)..<((index + 1) * piece.count)], piece, "piece \(index)")
        }
    }
}
