import Foundation

extension DiskStore {
    /// The tier's settings, with their defaults.
    struct Configuration: Sendable {
        /// The cache directory. Created (with its parents) if missing, owner-only (0700).
        var directory: URL
        /// The most bytes the directory's files may take once writes settle. Default: 100 MiB.
        var capacity: Int
        /// The largest share of `capacity` one entry file may take; larger records are not
        /// stored. Default: 0.25.
        var maximumEntryFraction: Double
        /// Whether to sync each file the store writes before relying on it: entry files before
        /// they are renamed into place (`fsync`), and the journal and snapshot, which must
        /// survive a power loss to be worth syncing at all, with `F_FULLFSYNC` on Darwin (where
        /// `fsync` leaves the data in the drive's cache). Default: false: a file in the page cache
        /// survives the process being killed, a torn entry fails its checksum and is a miss, and a
        /// torn or stale index is rebuilt from the entry files, so a sync per write buys only
        /// keeping the last few seconds of entries through a power loss.
        var synchronizesWrites: Bool
        /// The journal size at which it is folded into a new index snapshot. Default: 1 MiB.
        /// (The journal also counts against `capacity`, so it is folded sooner in a small cache:
        /// at `capacity / 16`, but never below 4 KiB.)
        var journalCompactionThreshold: Int
        /// How long the access times of hits wait to be written when nothing else is being
        /// written; they otherwise go with the next journal append. Default: 1 second.
        var accessTimeWriteDelay: TimeInterval
        /// How long a stored record waits before the worker starts writing it (write-behind).
        /// The response a miss fetched reaches the app while its record waits, so on a machine
        /// with few cores the write does not compete with the app for the processor at that
        /// moment (`Docs/benchmarks.md` has the measurement), and a burst of misses is written in
        /// one pass. Lookups find the record in the staging area meanwhile; `flush()` and
        /// back-pressure start the write at once. A crash in that window loses the record (a
        /// miss next time). Default: 5 ms.
        var writeDelay: TimeInterval
        /// The most bytes of records waiting to be written. A `store` that finds more staged
        /// (before its own record) waits until the worker has written them, so a burst of large
        /// responses faster than the disk holds memory at this bound instead of growing without
        /// limit. Default: 8 MiB.
        var maximumStagedBytes: Int
        /// The Data Protection class of every file and directory the store creates (Apple
        /// platforms; no effect elsewhere). Default: `.completeUntilFirstUserAuthentication`.
        var fileProtection: CachingFileProtection
        /// How often, at most, a lookup has the worker try again to load an index or scan files
        /// that could not be read (permissions, Data Protection while the device is locked).
        /// Measured with `now`. Default: 5 seconds.
        var unreadableRetryInterval: TimeInterval
        /// Where the store reads files it did not just write; tests inject read failures here.
        /// Default: the file system, with no faults.
        var reader: FileReader
        /// The clock for last-access times (the LRU order). Default: `systemClock`; the cache
        /// replaces it with its installation's clock (`DiskStore.clock`), and tests inject one.
        var now: @Sendable () -> Date

        init(
            directory: URL,
            capacity: Int = 100 * 1024 * 1024,
            maximumEntryFraction: Double = 0.25,
            synchronizesWrites: Bool = false,
            journalCompactionThreshold: Int = 1024 * 1024,
            accessTimeWriteDelay: TimeInterval = 1,
            writeDelay: TimeInterval = 0.005,
            maximumStagedBytes: Int = 8 * 1024 * 1024,
            fileProtection: CachingFileProtection = .completeUntilFirstUserAuthentication,
            unreadableRetryInterval: TimeInterval = 5,
            reader: FileReader = FileReader(),
            now: @escaping @Sendable () -> Date = systemClock
        ) {
            self.directory = directory
            self.capacity = capacity
            self.maximumEntryFraction = maximumEntryFraction
            self.synchronizesWrites = synchronizesWrites
            self.journalCompactionThreshold = journalCompactionThreshold
            self.accessTimeWriteDelay = accessTimeWriteDelay
            self.writeDelay = writeDelay
            self.maximumStagedBytes = maximumStagedBytes
            self.fileProtection = fileProtection
            self.unreadableRetryInterval = unreadableRetryInterval
            self.reader = reader
            self.now = now
        }
    }

    /// Whether the store can write.
    enum Status: Sendable, Equatable {
        /// The directory exists and the last write succeeded.
        case available
        /// The directory could not be created or the last write failed (read-only file system,
        /// the path is a file, the disk is full). Lookups still answer from readable files;
        /// the next write tries again.
        case unavailable(CachingError)
    }

    /// How the index was obtained when the store opened.
    enum IndexOrigin: Sendable, Equatable {
        /// Not known yet: the worker has not loaded the index (see `waitUntilOpen()`).
        case opening
        /// From the snapshot and journal, without reading entry files.
        case loaded
        /// The snapshot was missing or damaged; it was rebuilt from the entry files' headers.
        case rebuilt(reason: String)
        /// The snapshot or journal could not be read (permissions, Data Protection while the
        /// device is locked): nothing was rebuilt, lookups read entry files directly, and a later
        /// lookup tries again (then `.loaded`).
        case unreadable(reason: String)
        /// The directory could not be used; the store started empty.
        case unavailable
    }

    /// What went wrong and how often, beyond `statistics`.
    struct Diagnostics: Sendable, Equatable {
        var status: Status
        /// The most recent failure (a write, a corrupt or unreadable file), or nil.
        var lastError: CachingError?
        /// Entry files found torn, truncated, foreign, of another version or another key, and removed.
        var corruptEntriesRemoved: Int
        /// Reads of entry files, of the directory or of the index that failed for a reason that
        /// may pass (permissions, Data Protection, I/O errors): each left everything in place.
        var unavailableReads: Int
        /// Writes that failed (entry files, journal appends, snapshots) and were dropped.
        var writeFailures: Int
        /// Entry files opened for reading (lookups and index rebuilds): a test hook.
        var entryFileReads: Int
        var indexOrigin: IndexOrigin
        /// Journal bytes skipped as damaged when the index was loaded.
        var damagedJournalBytes: Int
        /// Records accepted by `store` and not yet written.
        var stagedCount: Int
    }

    /// Work for the worker, done in the order handed in.
    enum Operation {
        /// Write the staged record of this digest, if it is still staged.
        case write(EntryDigest)
        /// Delete these entry files unless a write settled for them since (and journal it).
        case discard([EntryDigest])
        /// Delete every entry file not in the index, then write a fresh snapshot.
        case removeAll
        /// Evict down to the capacity.
        case enforceCapacity
        /// Evict down to this many bytes once, leaving the capacity as it is.
        case trim(toBytes: Int)
        /// Compare the index with the files in `entries/`; when `full`, the index was not loaded
        /// and is rebuilt from the files.
        case reconcile(full: Bool)
        /// Load the index snapshot and journal, then reconcile: the store's first operation, and
        /// what a lookup queues again when they could not be read.
        case open
        /// Give every file and directory of the cache this Data Protection class, and new ones too.
        case protect(CachingFileProtection)
        /// Remove the records past the age limit now, whenever the last sweep was.
        case expire
        /// Write a fresh snapshot (and empty the journal) at the next settle: a listing filled in
        /// summaries the journal does not have, or the app removed records whose keys must leave
        /// every file.
        case persistIndex
    }

    /// Everything the store's readers and its worker share, under the store's one lock.
    struct Shared {
        /// The files and the records about to become files, changed only through its operations.
        var disk = DiskState()
        var work = WorkQueue()
        var limits: Limits
        var report = Report()
        /// The clock for last-access times: `configuration.now` until the cache hands the store
        /// its installation's clock (`clock`).
        var clock: @Sendable () -> Date
        /// The Data Protection class asked for last; the worker applies it in order with writes.
        var fileProtection: CachingFileProtection
    }

    /// The worker's queue of operations.
    struct WorkQueue {
        private(set) var operations: [Operation] = []
        /// A run of the worker is queued or running and will see new operations.
        private var isScheduled = false

        /// Queues `operation`; returns true when the caller must start the worker.
        mutating func enqueue(_ operation: Operation) -> Bool {
            operations.append(operation)
            guard !isScheduled else { return false }
            isScheduled = true
            return true
        }

        /// Queues `operation` for a worker that is running it already (it drains until empty).
        mutating func enqueueFromWorker(_ operation: Operation) {
            operations.append(operation)
        }

        /// The operations queued so far, for the worker to perform.
        mutating func takeAll() -> [Operation] {
            defer { operations = [] }
            return operations
        }

        /// The worker found nothing left to do: the next `enqueue` starts it again. Returns
        /// false when something arrived meanwhile (the worker goes on).
        mutating func finishRun() -> Bool {
            guard operations.isEmpty else { return false }
            isScheduled = false
            return true
        }
    }

    /// How much the directory may hold.
    struct Limits {
        var capacity: Int
        var maximumEntryFraction: Double
        /// The size of the index snapshot and journal files, as the worker last saw them.
        var metadataBytes = 0
        /// Records whose newest response was stored longer ago than this are removed (unless
        /// pinned); nil: no age limit.
        var maximumEntryAge: TimeInterval?

        var maximumEntryBytes: Int {
            entryCostLimit(capacity: capacity, fraction: maximumEntryFraction)
        }
    }

    /// What lookups found and what went wrong since the store opened, and whether it can write.
    struct Report {
        private(set) var hits = 0
        private(set) var misses = 0
        private(set) var corruptEntriesRemoved = 0
        private(set) var unavailableReads = 0
        private(set) var writeFailures = 0
        private(set) var entryFileReads = 0
        private(set) var damagedJournalBytes = 0
        private(set) var status = Status.available
        private(set) var lastError: CachingError?
        private(set) var indexOrigin = IndexOrigin.loaded

        mutating func countLookup(found: Bool) {
            if found { hits += 1 } else { misses += 1 }
        }

        mutating func countFileReads(_ count: Int = 1) {
            entryFileReads += count
        }

        /// Damaged entry files were found; their deletion is queued or done.
        mutating func noteCorrupt(_ error: CachingError, count: Int = 1) {
            corruptEntriesRemoved += count
            lastError = error
        }

        /// Reads failed for a reason that may pass; nothing was deleted.
        mutating func noteUnavailable(_ error: CachingError, count: Int = 1) {
            unavailableReads += count
            lastError = error
        }

        mutating func noteWriteFailure(_ error: CachingError) {
            writeFailures += 1
            status = .unavailable(error)
            lastError = error
        }

        /// A write succeeded: the store can write again.
        mutating func noteWriteSucceeded() {
            if case .unavailable = status { status = .available }
        }

        /// The directory could not be created when the store opened: it starts empty.
        mutating func noteDirectoryUnusable(_ error: CachingError) {
            status = .unavailable(error)
            lastError = error
            indexOrigin = .unavailable
        }

        mutating func noteOpening() {
            indexOrigin = .opening
        }

        /// The worker tried to load the index.
        mutating func noteIndexLoad(_ origin: IndexOrigin, damagedJournalBytes: Int) {
            indexOrigin = origin
            self.damagedJournalBytes = damagedJournalBytes
        }
    }

    /// The paths of one cache directory.
    struct Paths: Sendable {
        let root: String
        let entries: String
        let index: String
        let journal: String
        /// The pinned keys (`Pins`), and the file whose lock serialises changes to them.
        let pins: String
        let pinsLock: String

        init(directory: URL) {
            var root = directory.path
            while root.count > 1, root.hasSuffix("/") { root.removeLast() }
            self.root = root
            entries = root + "/entries"
            index = root + "/index"
            journal = root + "/journal"
            pins = root + "/pins"
            pinsLock = root + "/pins.lock"
        }

        func entry(_ digest: EntryDigest) -> String {
            entries + "/" + digest.fileName
        }

        /// A new temporary file name in `directory`: `.tmp-<pid>-<random>`, unique across
        /// processes and store instances.
        func temporaryFile(in directory: String) -> String {
            directory + "/" + Self.temporaryPrefix + "\(FileIO.currentProcessID)-" + StableHash.hex(UInt64.random(in: .min ... .max))
        }

        static let temporaryPrefix = ".tmp-"
    }
}
