import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `URLCache` whose memory and disk tiers are bounded, keyed correctly and safe to share.
///
/// It keeps entries in two tiers: memory (LRU by byte cost, never above ``memoryCapacity``) and
/// disk (one directory, LRU by last access kept in its own index, never above ``diskCapacity``
/// once a write settles). Writes go to both tiers; disk writes happen off the caller's thread and
/// lookups see them before they land. Keys are the method and the full URL, query included.
///
/// It works as a plain `URLCache` for any caller (set it as `URLCache.shared` or a session
/// configuration's `urlCache`), and it is where ``CachingURLProtocol`` keeps what it caches.
/// Nothing of Foundation's own URLCache storage is used.
///
/// Threading: every member may be called from any thread, concurrently.
open class CachingURLCache: URLCache, @unchecked Sendable {
    // @unchecked: all mutable state lives in `store` (thread-safe) and in `Locked`s.

    /// The cache most installations share: 4 MB in memory, 100 MB on disk, in
    /// ``defaultDirectory``. Created on first use.
    public static let standard = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 100 << 20, directory: nil)

    /// `<user caches directory>/CachingProtocol/<bundle identifier or process name>`.
    public static var defaultDirectory: URL {
        let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        let name = (Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName)
            .replacingOccurrences(of: "/", with: "_")
        return caches.appendingPathComponent("CachingProtocol", isDirectory: true)
            .appendingPathComponent(name, isDirectory: true)
    }

    /// The directory of the disk tier.
    public let directory: URL

    /// The two tiers behind the `URLCache` face; the engine looks records up here.
    let store: TieredStore

    /// How entries stored through the `URLCache` API are dated and how long they count as fresh:
    /// the policy and clock of the installation that uses this cache (see `use(policy:clock:)`).
    private struct APIStorage {
        var policy = CachingPolicy.heuristic()
        var clock = systemClock
        /// The installation's key rules: keys of the `URLCache` API, purges and pins are made
        /// with them, as the protocol makes them.
        var keyRules: [CachingRule] = []
        /// An installation of the protocol uses this cache (see `getCachedResponse(for:completionHandler:)`).
        var servedByProtocol = false
        /// How the `URLCache` API reads a request, given its key: as the session the installation
        /// reads for sends it, for the user it is for (`CacheEngine.sessionlessRequest`); before an
        /// installation uses the cache, as it is, its credentials naming the user.
        var request: @Sendable (URLRequest, String) -> CacheRequest = { CacheRequest($0, key: $1) }
    }
    private let apiStorage = Locked(APIStorage())
    /// The memory-warning observation, removed when the cache goes.
    private let memoryWarningObserver = Locked<NSObjectProtocol?>(nil)
    #if os(macOS)
    /// The system's memory-pressure source, macOS's memory warning; cancelled when the cache goes.
    let memoryPressureSource = Locked<(any DispatchSourceMemoryPressure)?>(nil)
    #endif
    /// The `CachedURLResponse` the `URLCache` API handed out for each entry revision, reused for
    /// the next lookup of the same entry (it does not change). Bounded by `builtResponsesCapacity`.
    private let builtResponses = Locked<[EntryRevision: CachedURLResponse?]>([:])
    private static let builtResponsesCapacity = 1_024

    #if canImport(FoundationNetworking)
    /// Creates a cache with the given capacities in bytes.
    ///
    /// - Parameters:
    ///   - memoryCapacity: the most bytes kept in memory.
    ///   - diskCapacity: the most bytes kept on disk, counting every file in `directory`.
    ///   - directory: where the disk tier lives; nil means ``defaultDirectory``. The directory is
    ///     created with owner-only permissions. If it cannot be used, the cache works from
    ///     memory alone and ``statistics`` says why.
    public init(memoryCapacity: Int, diskCapacity: Int, directory: URL?) {
        self.directory = directory ?? Self.defaultDirectory
        store = TieredStore(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: self.directory)
        // The base class only creates the directory here; its storage is never used.
        super.init(memoryCapacity: 0, diskCapacity: 0, diskPath: self.directory.path)
        observeMemoryWarnings(Self.observesMemoryWarnings)
    }

    /// A cache in `path`: absolute as it is, relative under the user's caches directory, nil
    /// ``defaultDirectory``. For callers of `URLCache`'s path-based initialiser.
    public override convenience init(memoryCapacity: Int, diskCapacity: Int, diskPath path: String?) {
        self.init(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: Self.directory(forDiskPath: path))
    }
    #else
    // On Apple platforms `init(memoryCapacity:diskCapacity:directory:)` is a convenience
    // initialiser of `URLCache` (added by the Swift overlay) that calls the designated
    // `init(__memoryCapacity:diskCapacity:directoryURL:)`. A subclass cannot declare its own
    // with those labels, but it inherits the convenience one when it implements every designated
    // initialiser of `URLCache`: the three below. So `CachingURLCache(memoryCapacity:
    // diskCapacity:directory:)` is written the same on every platform and runs this code.

    /// Creates a cache with the given capacities in bytes, in `directoryURL` (nil:
    /// ``defaultDirectory``); what `CachingURLCache(memoryCapacity:diskCapacity:directory:)`
    /// calls on Apple platforms. See the Linux initialiser of the same name for the details.
    public override init(__memoryCapacity memoryCapacity: Int, diskCapacity: Int, directoryURL: URL?) {
        self.directory = directoryURL ?? Self.defaultDirectory
        store = TieredStore(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: self.directory)
        // The base class gets no capacity and a directory of its own; its storage is never used.
        super.init(__memoryCapacity: 0, diskCapacity: 0,
                   directoryURL: self.directory.appendingPathComponent("unused-foundation-store", isDirectory: true))
        observeMemoryWarnings(Self.observesMemoryWarnings)
    }

    /// A cache in `path`: absolute as it is, relative under the app's caches directory (as Apple
    /// documents it for iOS), nil ``defaultDirectory``. For callers of `URLCache`'s initialiser.
    public override convenience init(memoryCapacity: Int, diskCapacity: Int, diskPath path: String?) {
        self.init(__memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directoryURL: Self.directory(forDiskPath: path))
    }

    /// A cache with the capacities of ``standard`` (4 MB in memory, 100 MB on disk) in
    /// ``defaultDirectory``.
    public override convenience init() {
        self.init(__memoryCapacity: 4 << 20, diskCapacity: 100 << 20, directoryURL: nil)
    }
    #endif

    /// The directory of `init(memoryCapacity:diskCapacity:diskPath:)`: an absolute `path` (`~`
    /// expanded) as it is; a relative one under the user's caches directory, on every platform, as
    /// Apple documents it for iOS — never the working directory (`/` in an iOS app); nil or empty:
    /// ``defaultDirectory``.
    static func directory(forDiskPath path: String?) -> URL? {
        guard let path, !path.isEmpty else { return nil }
        let expanded = NSString(string: path).expandingTildeInPath
        if expanded.hasPrefix("/") { return URL(fileURLWithPath: expanded, isDirectory: true) }
        let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return caches.appendingPathComponent(expanded, isDirectory: true)
    }

    deinit {
        if let observer = memoryWarningObserver.withLock({ $0 }) { NotificationCenter.default.removeObserver(observer) }
        #if os(macOS)
        memoryPressureSource.withLock { $0 }?.cancel()
        #endif
    }

    // MARK: Memory warnings

    /// UIKit's memory warning, by its name (`UIApplication.didReceiveMemoryWarningNotification`):
    /// the name is a plain string, so observing it needs neither UIKit's main actor nor UIKit.
    static let memoryWarningNotification = Notification.Name("UIApplicationDidReceiveMemoryWarningNotification")

    /// Whether caches move memory to disk on the platform's memory warning: UIKit's where UIKit
    /// posts one (iOS, tvOS, Mac Catalyst), the system's memory pressure turning critical on
    /// macOS; none on Linux.
    #if (canImport(UIKit) && !os(watchOS)) || os(macOS)
    static let observesMemoryWarnings = true
    #else
    static let observesMemoryWarnings = false
    #endif

    /// Starts (when `observing`) moving memory to disk on every memory warning, as
    /// ``flushMemoryToDisk()`` does but off the thread that reports it (UIKit's main thread): the
    /// move can wait for disk writes. UIKit's notification is observed on every platform, so tests
    /// anywhere can post it (on macOS nothing else does).
    ///
    /// macOS has no memory warning. Its counterpart is the system's memory pressure, reported by a
    /// dispatch source at three levels: normal, warning ("consider relaxing caching policy") and
    /// critical ("consider dropping all caches"), as XNU's `doc/vm/memorystatus_notify.md`
    /// describes them; `dispatch_source_create(3)` asks apps not to walk and discard their caches
    /// when the pressure is merely elevated, since that aggravates it. So the cache answers the
    /// critical level only.
    func observeMemoryWarnings(_ observing: Bool) {
        // Once: the initialiser starts it, and a test may ask again.
        guard observing, memoryWarningObserver.withLock({ $0 == nil }) else { return }
        let observer = NotificationCenter.default.addObserver(
            forName: Self.memoryWarningNotification, object: nil, queue: nil
        ) { [weak self] _ in
            self?.didReceiveMemoryWarning()
        }
        memoryWarningObserver.withLock { $0 = observer }
        #if os(macOS)
        let source = DispatchSource.makeMemoryPressureSource(eventMask: .critical)
        source.setEventHandler { [weak self, weak source] in
            guard let event = source?.data else { return }
            self?.memoryPressureChanged(to: event)
        }
        source.resume()
        memoryPressureSource.withLock { $0 = source }
        #endif
    }

    /// A memory warning: the kept `CachedURLResponse`s go at once, the move to disk is queued.
    func didReceiveMemoryWarning() {
        releaseBuiltResponses()
        store.flushMemoryToDiskInBackground()
    }

    /// Lets go of the `CachedURLResponse`s kept for the next lookups, each with its body.
    func releaseBuiltResponses() {
        builtResponses.withLock { $0 = [:] }
    }

    /// How many `CachedURLResponse`s are kept for the next lookups (for tests).
    var keptResponseCount: Int { builtResponses.withLock { $0.count } }

    #if os(macOS)
    /// What the memory-pressure source reported: when it turned critical, what a memory warning does.
    /// Internal so tests on a Mac can report a level the system cannot be made to.
    func memoryPressureChanged(to event: DispatchSource.MemoryPressureEvent) {
        guard event.contains(.critical) else { return }
        didReceiveMemoryWarning()
    }
    #endif

    // MARK: Capacities and usage

    /// The most bytes kept in memory. Lowering it evicts least recently used entries at once.
    open override var memoryCapacity: Int {
        get { store.memoryCapacity }
        set { store.memoryCapacity = newValue }
    }

    /// The most bytes kept on disk (all files of ``directory``). Lowering it evicts least
    /// recently used entries; ``waitUntilSettled()`` returns once the directory is within it.
    open override var diskCapacity: Int {
        get { store.diskCapacity }
        set { store.diskCapacity = newValue }
    }

    /// The largest response, in bytes (body, headers and URL), the cache stores. A larger one is
    /// delivered to the app as usual and not stored: it replaces nothing and evicts nothing, so
    /// one big download never flushes the entries an app uses every day.
    ///
    /// Default: 5 % of the larger of ``memoryCapacity`` and ``diskCapacity`` (Apple's URLCache
    /// stores nothing above about 5 % of its disk capacity), following the capacities when they
    /// change: 5 MB for ``standard``. Setting it fixes it (a negative value means 0). Each tier
    /// also keeps nothing above a quarter of its own capacity. Thread-safe.
    public var maximumEntrySize: Int {
        get { store.maximumEntrySize }
        set { store.maximumEntrySize = newValue }
    }

    /// How long a response may stay stored, in seconds since it was stored (or last confirmed
    /// by a `304`), whatever its freshness: older ones are never served and are removed — when
    /// the limit is set (after the disk index loads, for a cache just opened), then whenever the
    /// disk tier settles and a tenth of the limit (between a minute and an hour) has passed, and
    /// on a timer at that interval while the cache is idle — off the caller's thread. Pinned URLs
    /// (`pin(_:)`) are exempt. Age is judged on the clock of the installation that uses the cache
    /// (``CachingConfiguration/now``; the system clock before one does), so set it after
    /// installing when that clock is not the system's.
    ///
    /// Default nil: no limit. Headers and the ``CachingPolicy`` already decide what may be served,
    /// and an old response with a validator still saves its body on every revalidation (a `304`);
    /// LRU eviction keeps the directory within ``diskCapacity``. Set a limit when old responses
    /// must not be kept at all (for example a privacy promise: "nothing older than 30 days"), like
    /// SDWebImage's `maxDiskAge` or Kingfisher's `expiration`. Thread-safe.
    public var maximumEntryAge: TimeInterval? {
        get { store.maximumEntryAge }
        set { store.maximumEntryAge = newValue }
    }

    open override var currentMemoryUsage: Int { store.statistics.memory.byteCount }

    open override var currentDiskUsage: Int { store.statistics.disk.byteCount }

    /// What each tier holds and how often it answered, and the disk tier's condition.
    public var statistics: Statistics {
        let diagnostics = store.diskDiagnostics
        let tiers = store.statistics
        let problem: CachingError?
        switch diagnostics.status {
        case .available: problem = nil
        case .unavailable(let error): problem = error
        }
        return Statistics(memory: tiers.memory, disk: tiers.disk, diskProblem: problem,
                          diskWriteFailures: diagnostics.writeFailures,
                          corruptEntriesRemoved: diagnostics.corruptEntriesRemoved,
                          unavailableDiskReads: diagnostics.unavailableReads)
    }

    /// Usage and hit counts of both tiers, and what went wrong on disk.
    public struct Statistics: Sendable, Equatable {
        /// The memory tier: records, bytes charged, capacity, hits and misses.
        public var memory: StoreStatistics
        /// The disk tier: records, the real size of its files, capacity, hits and misses.
        public var disk: StoreStatistics
        /// Why the disk tier cannot write, or nil while it can: ``CachingError/Code/diskUnavailable``
        /// when the directory cannot be created or written (read-only file system, permissions,
        /// a file in its place), ``CachingError/Code/diskWriteFailed`` when the last write failed
        /// (for example a full disk). Meanwhile the cache keeps answering from memory and from the
        /// entry files it can still read, and drops disk writes; the next write that succeeds
        /// clears it. A cache directory deleted while the app runs is not a problem: the next
        /// write recreates it.
        public var diskProblem: CachingError?
        /// Disk writes (entry files, index and journal) that failed and were dropped since the
        /// cache was created.
        public var diskWriteFailures: Int
        /// Entry files found torn, truncated, garbage, of another format version or of another
        /// key since the cache was created: each was treated as a miss and deleted.
        public var corruptEntriesRemoved: Int
        /// Disk reads (entry files, each a miss; the directory; the index) that failed since the
        /// cache was created for a reason that may pass: permissions, Data Protection while the
        /// device is locked (``CachingFileProtection``), I/O. Nothing was deleted or rebuilt.
        public var unavailableDiskReads: Int
    }

    // MARK: Memory pressure and maintenance

    /// Moves the memory tier to disk and empties memory (and the `CachedURLResponse`s kept for the
    /// `URLCache` API): what the disk tier lacks is handed to it, except entries kept in memory
    /// only — a `Set-Cookie` response, one stored `.allowedInMemoryOnly` — which are dropped,
    /// never written to a file. What MKNetworkKit did on a memory warning; UIKit's memory warning
    /// (and on macOS the system's memory pressure turning critical) runs it, off the main thread.
    /// Call it from any thread but the main one: it can wait for disk writes.
    public func flushMemoryToDisk() {
        releaseBuiltResponses()
        store.flushMemoryToDisk()
    }

    /// Blocks until every disk write handed in so far has landed (or failed) and the directory
    /// is within ``diskCapacity``, including a memory warning's move of memory to disk.
    public func waitUntilSettled() {
        store.waitUntilSettled()
    }

    /// Evicts least recently used disk entries until the disk tier holds at most `bytes`,
    /// without changing ``diskCapacity``.
    public func trimDisk(toBytes bytes: Int) {
        store.trimDisk(toBytes: max(0, bytes))
    }

    /// Deletes every entry from both tiers and returns once every entry file is gone from the
    /// directory (waiting for disk writes handed in before the call). Entries stored by another
    /// process sharing the directory after the call are not affected.
    public func removeAll() {
        store.removeAll()
        store.waitUntilSettled()
    }

    // MARK: The installation's policy and clock

    /// Called by each installation that uses this cache: entries stored through the `URLCache`
    /// API are dated with `clock` and get their freshness from `policy` (heuristic until an
    /// installation says otherwise), the disk tier's last-access times and the age limit follow
    /// `clock`, keys are made with the key rules among `rules`, and requests of the `URLCache`
    /// API are read with `request` (the last installation's).
    func use(policy: CachingPolicy, clock: @escaping @Sendable () -> Date, rules: [CachingRule] = [],
             request: @escaping @Sendable (URLRequest, String) -> CacheRequest = { CacheRequest($0, key: $1) }) {
        let keyRules = rules.filter(\.isKeyRule)
        apiStorage.withLock {
            $0 = APIStorage(policy: policy, clock: clock, keyRules: keyRules, servedByProtocol: true, request: request)
        }
        store.clock = clock
    }

    /// The clock of the installation that uses this cache (the system clock before one does).
    var clock: @Sendable () -> Date { apiStorage.withLock { $0.clock } }

    /// The GET key of `url`, made as the protocol of the installation that uses this cache makes it.
    func key(for url: URL) -> String {
        let rules = apiStorage.withLock { $0.keyRules }
        return rules.isEmpty ? CacheKey.make(method: "GET", url: url) : rules.cacheKey(for: url)
    }

    // MARK: URLCache

    /// The stored response the session the installation that uses this cache reads for would be
    /// answered with, whatever its freshness: the request is read as that session sends it (its
    /// additional header fields and cookies; on Apple platforms, the `User-Agent` and
    /// `Accept-Language` the system adds, for `Vary`), for the user the installation's
    /// ``CachingConfiguration/userIdentity`` says it is for, and under that session's trust
    /// judge — the session configuration the installation was last injected into, or
    /// `URLSession.shared`'s. A response stored for another user is never returned.
    open override func cachedResponse(for request: URLRequest) -> CachedURLResponse? {
        guard let request = apiRequest(for: request), let record = store.record(forKey: request.key),
              let entry = CachingPolicy.matchingVariant(in: record, for: request)
        else { return nil }
        return cachedURLResponse(from: entry)
    }

    /// Stores `cachedResponse` for `request`, read as ``cachedResponse(for:)`` reads it: for the
    /// user it is for, where that session finds it.
    open override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) {
        guard cachedResponse.storagePolicy != .notAllowed, let request = apiRequest(for: request) else { return }
        let (policy, clock) = apiStorage.withLock { ($0.policy, $0.clock) }
        let entry = Self.entry(from: cachedResponse, request: request, policy: policy, now: clock())
        store.storeVariant(entry, key: request.key, memoryOnly: cachedResponse.storagePolicy == .allowedInMemoryOnly)
    }

    /// Like ``purge(url:)``: every user's response for the URL goes, and this returns once the
    /// entry's file is gone.
    open override func removeCachedResponse(for request: URLRequest) {
        guard let key = key(for: request) else { return }
        store.removeRecord(forKey: key)
        store.waitUntilRemoved()
    }

    /// ``removeAll()``: returns once every entry file is gone.
    open override func removeAllCachedResponses() {
        removeAll()
    }

    /// Returns once the files of the removed entries are gone.
    open override func removeCachedResponses(since date: Date) {
        store.removeRecords(storedSince: date)
        store.waitUntilRemoved()
    }

    open override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for dataTask: URLSessionDataTask) {
        guard let request = dataTask.currentRequest ?? dataTask.originalRequest else { return }
        storeCachedResponse(cachedResponse, for: request)
    }

    /// Answers on the calling thread (the lookup is a memory or a small disk read).
    ///
    /// Foundation asks this before every data task of a session whose `urlCache` this is
    /// (swift-corelibs-foundation, `URLSessionTask._getProtocol`). Once an installation of
    /// ``CachingURLProtocol`` uses this cache it answers nil at once: the protocol answers the
    /// requests it takes from the cache itself (a second lookup would be wasted), and Foundation's
    /// own HTTP protocol, which loads the requests the protocol leaves to it, then neither serves
    /// the cache's entries to them nor (on Linux, where it rejects them) deletes them.
    open override func getCachedResponse(for dataTask: URLSessionDataTask,
                                         completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void) {
        if apiStorage.withLock({ $0.servedByProtocol }) {
            completionHandler(nil)
            return
        }
        guard let request = dataTask.currentRequest ?? dataTask.originalRequest else {
            completionHandler(nil)
            return
        }
        completionHandler(cachedResponse(for: request))
    }

    open override func removeCachedResponse(for dataTask: URLSessionDataTask) {
        guard let request = dataTask.currentRequest ?? dataTask.originalRequest else { return }
        removeCachedResponse(for: request)
    }

    // MARK: Conversions

    /// GET requests to http(s) URLs have keys; everything else is never stored.
    private func key(for request: URLRequest) -> String? {
        guard let url = request.url, (request.httpMethod ?? "GET").uppercased() == "GET" else { return nil }
        return key(for: url)
    }

    /// `request` as the `URLCache` API reads it (`APIStorage.request`), or nil when it has no key.
    func apiRequest(for request: URLRequest) -> CacheRequest? {
        guard let key = key(for: request) else { return nil }
        let read = apiStorage.withLock { $0.request }
        return read(request, key)
    }

    /// The entry as a `CachedURLResponse`, built once per entry revision and then reused.
    package func cachedURLResponse(from entry: CacheEntry) -> CachedURLResponse? {
        if let built = builtResponses.withLock({ $0[entry.revision] }) { return built }
        let built = Self.buildCachedURLResponse(from: entry)
        builtResponses.withLock { built_ in
            if built_.count >= Self.builtResponsesCapacity { built_.removeAll(keepingCapacity: true) }
            built_[entry.revision] = built
        }
        return built
    }

    package static func buildCachedURLResponse(from entry: CacheEntry) -> CachedURLResponse? {
        guard let url = URL(string: entry.responseURL) else { return nil }
        let response: URLResponse
        if entry.statusCode > 0 {
            guard let http = HTTPURLResponse(url: url, statusCode: entry.statusCode, httpVersion: "HTTP/1.1",
                                             headerFields: entry.headers.dictionary) else { return nil }
            response = http
        } else {
            response = URLResponse(url: url, mimeType: entry.headers["Content-Type"], expectedContentLength: entry.body.count,
                                   textEncodingName: entry.headers["X-Text-Encoding-Name"])
        }
        let userInfo = entry.userInfo.flatMap {
            try? PropertyListSerialization.propertyList(from: $0, options: [], format: nil) as? [AnyHashable: Any]
        }
        return CachedURLResponse(response: response, data: entry.body, userInfo: userInfo,
                                 storagePolicy: entry.isMemoryOnly ? .allowedInMemoryOnly : .allowed)
    }

    /// An entry for a response stored through the `URLCache` API. It is stored whatever its
    /// headers say (the caller decided); the policy only computes how long it counts as fresh
    /// when the protocol later finds it. A non-HTTP response is kept with status 0.
    static func entry(from cachedResponse: CachedURLResponse, request: CacheRequest, policy: CachingPolicy, now: Date) -> CacheEntry {
        let response = cachedResponse.response
        var headers: HTTPHeaders
        var status = 0
        if let http = response as? HTTPURLResponse {
            headers = CachingPolicy.storableHeaders(HTTPHeaders(http.allHeaderFields))
            status = http.statusCode
        } else {
            headers = HTTPHeaders()
            if let mimeType = response.mimeType { headers.set("Content-Type", mimeType) }
            if let encoding = response.textEncodingName { headers.set("X-Text-Encoding-Name", encoding) }
        }
        var lifetime: TimeInterval = 0
        var initialAge: TimeInterval = 0
        if case .store(let computedLifetime, let computedAge) = policy.storageDecision(
            for: request, status: status, headers: headers, requestDate: now, responseDate: now) {
            lifetime = computedLifetime
            initialAge = computedAge
        }
        let userInfo = cachedResponse.userInfo.flatMap { info -> Data? in
            guard PropertyListSerialization.propertyList(info, isValidFor: .binary) else { return nil }
            return try? PropertyListSerialization.data(fromPropertyList: info, format: .binary, options: 0)
        }
        return CachingPolicy.entry(storing: status, headers: headers, body: cachedResponse.data,
                                   url: (response.url ?? request.urlRequest.url)?.absoluteString ?? "", for: request,
                                   requestDate: now, responseDate: now, freshnessLifetime: lifetime, initialAge: initialAge,
                                   userInfo: userInfo)
    }
}

// MARK: - Data Protection

extension CachingURLCache {
    /// The Data Protection class of every file and directory the cache creates in ``directory``:
    /// when the system lets them be read (see ``CachingFileProtection``).
    ///
    /// Default: ``CachingFileProtection/completeUntilFirstUserAuthentication``, the class Apple
    /// gives app files by default (readable in the background once the device was unlocked after
    /// a restart). Setting it also gives the files and directories the cache already created the
    /// new class; that runs on the cache's disk worker, after the disk writes handed in before,
    /// and ``waitUntilSettled()`` waits for it. On Linux and other platforms without Data
    /// Protection it has no effect.
    ///
    /// Threading: may be read and set from any thread.
    public var fileProtection: CachingFileProtection {
        get { store.fileProtection }
        set { store.fileProtection = newValue }
    }
}

// MARK: - Pins

// Pinning: content kept for offline use, safe from eviction and the age limit.
extension CachingURLCache {
    /// Keeps what is stored for `url` (GET, every `Vary` variant) on disk whatever least recently
    /// used eviction and ``maximumEntryAge`` would do: for content an app promises offline (a
    /// downloaded article, a map tile set).
    ///
    /// A pinned response is still revalidated when its policy says so and replaced by a newer
    /// one, and explicit removals (``purge(url:)``, ``removeAll()``) still remove it; the pin
    /// stays until ``unpin(_:)-(URL)``. A URL can be pinned before it is stored. Pins are kept in
    /// the cache directory (a small `pins` file), so they survive reopening it and every process
    /// that shares the directory sees them. The key is made as the protocol makes it, so a key
    /// rule applies (``CachingRule/ignoringQueryItems(_:host:pathPrefix:)``). Responses kept in
    /// memory only (those that set a cookie) never reach the disk, so a pin does not keep them.
    ///
    /// Pinned bytes count toward ``diskCapacity``, and must leave room in it for one response of
    /// ``maximumEntrySize`` (so the cache can still keep what the app fetches): when the responses
    /// pinned, with the index files and that room, would not fit, this throws
    /// ``CachingError/Code/pinnedBeyondCapacity`` and pins nothing. Should pinned responses alone
    /// outgrow the capacity later (they were replaced by larger ones, or the capacity was
    /// lowered), the least recently used of them are evicted (and stay pinned).
    ///
    /// For offline-first apps, give the cache a `directory` outside the caches directory: iOS
    /// deletes the contents of Caches when the device runs low on space, pins or not.
    ///
    /// Waits for the disk writes handed in before the call, then writes the pins file: call it
    /// off the main thread. Thread-safe.
    public func pin(_ url: URL) throws {
        try pin([url])
    }

    /// Pins every URL in `urls`, or none of them (see ``pin(_:)-(URL)``).
    public func pin(_ urls: [URL]) throws {
        try store.pin(urls.map(key(for:)), leavingRoom: maximumEntrySize)
    }

    /// Stops keeping `url` from eviction and the age limit; what is stored for it stays until
    /// they remove it. Unpinning a URL that is not pinned changes nothing. Thread-safe; waits like
    /// ``pin(_:)-(URL)``.
    public func unpin(_ url: URL) throws {
        try unpin([url])
    }

    /// Unpins every URL in `urls` (see ``unpin(_:)-(URL)``).
    public func unpin(_ urls: [URL]) throws {
        try store.unpin(urls.map(key(for:)))
    }

    /// The pinned URLs, in the order they were pinned, as the cache keys them (without what a
    /// key rule leaves out). Includes what another process sharing the directory pinned.
    /// Thread-safe; reads the small pins file when it changed.
    public var pinnedURLs: [URL] {
        store.currentPins().keys.compactMap(Self.url(ofKey:))
    }
}
