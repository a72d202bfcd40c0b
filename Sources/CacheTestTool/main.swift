// A helper process for tests that need a process of their own: registration against
// URLSession.shared (which exists once per process), with protocols the app registers too
// (`registered-protocols`), the peak memory of one large body and the resources left after many
// sessions (`peak-memory`, `token-refresh`), several processes sharing one cache directory
// (`hammer`, `read-all`), a process killed in the middle of writes (`write-loop`, and
// `write-past-limit` at a known point), a process that may not read the cache's files (`fill`,
// then `read-all-as`), one that pins in a directory another process uses (`pin`, `pinned`), one
// that takes the package's lock twice (`relock`, Apple platforms), the stress run (`stress`: many
// sessions on a flaky origin, StressWorkload), and an app that cancels every task it starts
// (`cancel-race`, `cancel-rates`: CancelRace). Not a user-facing tool.
import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("CacheTestTool: \(message)\n".utf8))
    exit(2)
}

/// GETs `url` through URLSession.shared and prints the status and the Cache-Status header.
func fetchThroughSharedSession(_ url: URL) {
    let done = DispatchSemaphore(value: 0)
    URLSession.shared.dataTask(with: url) { data, response, error in
        if let http = response as? HTTPURLResponse {
            print("status=\(http.statusCode) bytes=\(data?.count ?? 0) cache-status=\(http.value(forHTTPHeaderField: "Cache-Status") ?? "none")")
        } else {
            print("error=\(String(describing: error))")
        }
        done.signal()
    }.resume()
    done.wait()
}

/// Loads `request` through URLSession.shared with a completion handler: "status <n> bytes
/// <count> <body, when short>", or the error code.
func loadThroughSharedSession(_ request: URLRequest) -> String {
    let done = DispatchSemaphore(value: 0)
    let outcome = AppProtocols.Record("")
    URLSession.shared.dataTask(with: request) { data, response, error in
        outcome.change { $0 = describe(data, response, error) }
        done.signal()
    }.resume()
    done.wait()
    return outcome.read { $0 }
}

func describe(_ data: Data?, _ response: URLResponse?, _ error: Error?) -> String {
    if let error { return "error \((error as? URLError)?.code.rawValue ?? -1)" }
    let data = data ?? Data()
    let text = data.count <= 32 ? " " + String(decoding: data, as: UTF8.self) : ""
    return "status \((response as? HTTPURLResponse)?.statusCode ?? 0) bytes \(data.count)\(text)"
}

/// registered-protocols SCENARIO with|without|for-testing BASE-URL DIR: the same app code without and with
/// `register()`, with a stub or a logger of the app's registered as well (AppProtocols), against
/// the origin at BASE-URL. Prints `status=…` (with the layer), one `result …` line per request,
/// and what the app's protocol did. Scenarios:
/// - `stub-after`: `register()`, then the stub (for /stubbed); GETs of /stubbed and /real.
/// - `stub-before`: the stub, then `register()`; the same GETs.
/// - `logger-after`: `register()`, then the logger; GETs of /fresh, /plain, a POST of /form.
/// - `pieces-logger-after`: `register()`, then the logger; /big twice (a completion handler gets
///   only the last of the logger's pieces, Docs/foundation-facts.md, L10).
/// - `cutting-logger-after`: as `pieces-logger-after`, with a logger that hands on only the
///   first 100,000 bytes of every body, in one piece, and ends it cleanly.
/// - `stub-per-test`: two tests of an app's own suite, each registering the layer (`with`: a
///   configuration of its own on DIR, as an app's; `for-testing`: `CachingConfiguration.forTesting()`)
///   and then the stub, which answers /feed differently in each (fresh for ten minutes); each GETs
///   it twice, then unregisters both.
/// (The shared session's tasks cannot have a delegate of their own on Linux: such a task never
/// starts, with or without the layer, Docs/foundation-facts.md, L27. Delegates are in the
/// in-process pair tests.)
func registeredProtocols(scenario: String, side: String, base: URL, directory: String) -> Never {
    let withLayer = side != "without"
    let notStored = AppProtocols.Record<[String]>([])
    func register() {
        guard side != "for-testing" else { return print("status=\(CachingURLProtocol.register(.forTesting()))") }
        let cache = CachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 16 << 20, directory: URL(fileURLWithPath: directory))
        let status = CachingURLProtocol.register(CachingConfiguration(cache: cache, observer: { event in
            if let reason = event.notStoredReason { notStored.change { $0.append("\(reason)") } }
        }))
        print("status=\(status)")
    }
    func get(_ path: String) -> String { loadThroughSharedSession(URLRequest(url: base.appendingPathComponent(path))) }
    AppProtocols.Stub.routes.change { $0["/stubbed"] = AppProtocols.Stub.Canned(body: Data("stubbed".utf8)) }
    switch scenario {
    case "stub-after", "stub-before":
        if scenario == "stub-before" { _ = URLProtocol.registerClass(AppProtocols.Stub.self) }
        if withLayer { register() }
        if scenario == "stub-after" { _ = URLProtocol.registerClass(AppProtocols.Stub.self) }
        for path in ["stubbed", "real", "stubbed", "real"] { print("result \(path): \(get(path))") }
        print("stub answered \(AppProtocols.Stub.answered.read { $0 })")
    case "stub-per-test":
        for (test, answer) in ["first", "second"].enumerated() {
            // setUp: the layer, then the stub with this test's answer.
            if withLayer { register() }
            _ = URLProtocol.registerClass(AppProtocols.Stub.self)
            AppProtocols.Stub.routes.change {
                $0["/feed"] = AppProtocols.Stub.Canned(headers: ["Cache-Control": "max-age=600"], body: Data(answer.utf8))
            }
            for _ in 0..<2 { print("result test \(test + 1): \(get("feed"))") }
            // tearDown (the cache's writes settled first, as a later run would find them)
            URLProtocol.unregisterClass(AppProtocols.Stub.self)
            CachingURLProtocol.configuration?.cache.waitUntilSettled()
            if withLayer { CachingURLProtocol.unregister() }
        }
    case "logger-after", "pieces-logger-after", "cutting-logger-after":
        if withLayer { register() }
        _ = URLProtocol.registerClass(AppProtocols.Logger.self)
        if scenario == "logger-after" {
            for path in ["fresh", "fresh", "plain"] { print("result \(path): \(get(path))") }
            var post = URLRequest(url: base.appendingPathComponent("form"))
            post.httpMethod = "POST"
            post.httpBody = Data("a=1".utf8)
            print("result form: \(loadThroughSharedSession(post))")
        } else {
            if scenario == "cutting-logger-after" { AppProtocols.Logger.cutsBodyAfter.change { $0 = 100_000 } }
            print("result big: \(get("big"))")
            print("result big, again: \(get("big"))")
        }
        print("logger saw \(AppProtocols.Logger.seen.read { $0 })")
    default:
        fail("unknown scenario \(scenario)")
    }
    if withLayer, scenario != "stub-per-test" {
        let statistics = CachingURLProtocol.statistics
        print("layer fetched=\(statistics.fetched) hits=\(statistics.hits) not-stored=\(notStored.read { $0 })")
    }
    exit(0)
}

// MARK: - Resources, for the memory and session-churn tests

/// A field of /proc/self/status, in kB for sizes ("VmHWM", "VmRSS") or a count ("Threads"); -1
/// where there is no such file (macOS).
func processStatus(_ field: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
    }
    return -1
}

/// How many file descriptors the process has open (-1 where /proc is missing).
func openDescriptors() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// The caching configuration of the resource tests: a cache of its own in DIR, of 100 MB on disk,
/// so the largest response it stores is 5 MB (`maximumEntrySize`, 5% of the disk capacity).
func resourceTestConfiguration(directory: String, notStored: AppProtocols.Record<[String]>) -> CachingConfiguration {
    let cache = CachingURLCache(memoryCapacity: 8 << 20, diskCapacity: 100 << 20, directory: URL(fileURLWithPath: directory))
    return CachingConfiguration(cache: cache, observer: { event in
        if let reason = event.notStoredReason { notStored.change { $0.append("\(reason)") } }
    })
}

/// A delegate that counts the body's bytes and lets each piece go, as an app that writes a
/// download to a file or handles a stream's events does.
final class DiscardingDelegate: NSObject, URLSessionDataDelegate, Sendable {
    let done = DispatchSemaphore(value: 0)
    let state = AppProtocols.Record((bytes: 0, outcome: ""))

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.change { $0.bytes += data.count }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        state.change { state in
            let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
            state.outcome = error.map { "error \(($0 as? URLError)?.code.rawValue ?? -1)" } ?? "status \(status) bytes \(state.bytes)"
        }
        done.signal()
    }
}

/// peak-memory with|without URL DIR: one GET of URL as the task of a delegate that lets every
/// piece go, on a session made from the default configuration, with the layer injected (cache in
/// DIR) or not. Prints the outcome and the peak resident size (`VmHWM`, kB).
func peakMemory(withLayer: Bool, url: URL, directory: String) -> Never {
    let notStored = AppProtocols.Record<[String]>([])
    let configuration = URLSessionConfiguration.default
    if withLayer {
        CachingURLProtocol.inject(into: configuration, using: resourceTestConfiguration(directory: directory, notStored: notStored))
    }
    let delegate = DiscardingDelegate()
    let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    session.dataTask(with: url).resume()
    delegate.done.wait()
    print("result \(delegate.state.read { $0.outcome })")
    print("peak-rss-kb \(processStatus("VmHWM"))")
    if withLayer { print("not-stored \(notStored.read { $0 })") }
    exit(0)
}

/// A session delegate that says when its session is invalidated.
final class InvalidationWaiter: NSObject, URLSessionDelegate, Sendable {
    let invalidated = DispatchSemaphore(value: 0)

    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        invalidated.signal()
    }
}

/// token-refresh with|without URL DIR COUNT: what an app does at each token refresh, COUNT
/// times: a new configuration with a fresh `Authorization` in `httpAdditionalHeaders`, the layer
/// injected into it (cache in DIR) or not, a session, one GET of URL, and the session
/// invalidated (waited for). Prints the open descriptors, threads and resident size (kB) after
/// the first 100 refreshes and after all of them: `resources after=N fds=… threads=… rss-kb=…`.
func tokenRefresh(withLayer: Bool, url: URL, directory: String, count: Int) -> Never {
    let notStored = AppProtocols.Record<[String]>([])
    let caching = resourceTestConfiguration(directory: directory, notStored: notStored)
    for refresh in 1...count {
        let configuration = URLSessionConfiguration.default
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer token-\(refresh)-\(UUID().uuidString)"]
        if withLayer { CachingURLProtocol.inject(into: configuration, using: caching) }
        let waiter = InvalidationWaiter()
        let session = URLSession(configuration: configuration, delegate: waiter, delegateQueue: nil)
        let done = DispatchSemaphore(value: 0)
        let outcome = AppProtocols.Record("")
        session.dataTask(with: url) { data, response, error in
            outcome.change { $0 = describe(data, response, error) }
            done.signal()
        }.resume()
        done.wait()
        session.finishTasksAndInvalidate()
        waiter.invalidated.wait()
        if refresh == 1 { print("result \(outcome.read { $0 })") }
        if refresh == 100 || refresh == count {
            print("resources after=\(refresh) fds=\(openDescriptors()) threads=\(processStatus("Threads")) rss-kb=\(processStatus("VmRSS"))")
        }
    }
    exit(0)
}

// MARK: - Self-verifying entries, for the multi-process and kill -9 tests

/// Writes a line to standard output at once (unbuffered), so a test reading the pipe sees
/// progress before the process is killed.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The URL of test key `index`.
func itemURL(_ index: Int) -> URL {
    URL(string: "http://cache-test.invalid/item/\(index)?q=\(index % 7)")!
}

/// 64-bit FNV-1a, to seed the body pattern (any stable hash would do).
func fnv1a(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    return hash
}

/// A body that names its URL, writer and version and whose every byte follows from them:
/// `CPT1 <url> <writer> <version> <length>\n` then a pseudo-random pattern seeded by that line,
/// `length` bytes in all. A torn, truncated, mixed or misplaced body fails `verify`.
func selfVerifyingBody(url: URL, writer: String, version: Int) -> Data {
    let seed = fnv1a("\(url.absoluteString) \(writer) \(version)")
    let length = 300 + Int(seed % 30_000)
    let header = Data("CPT1 \(url.absoluteString) \(writer) \(version) \(length)\n".utf8)
    var body = header
    body.reserveCapacity(length)
    var state = seed
    while body.count < length {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        body.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return body
}

/// Nil when `body` is exactly a body `selfVerifyingBody` made for `url`; else what is wrong.
func verify(_ body: Data, url: URL) -> String? {
    guard let newline = body.firstIndex(of: 10) else { return "no header line" }
    let fields = String(decoding: body[body.startIndex..<newline], as: UTF8.self).split(separator: " ")
    guard fields.count == 5, fields[0] == "CPT1", let version = Int(fields[3]), let length = Int(fields[4]) else {
        return "bad header line"
    }
    guard fields[1] == url.absoluteString else { return "body of another URL: \(fields[1])" }
    guard body.count == length else { return "length \(body.count), header says \(length)" }
    guard body == selfVerifyingBody(url: url, writer: String(fields[2]), version: version) else {
        return "bytes differ from writer \(fields[2]) version \(version)"
    }
    return nil
}

func openCache(_ directory: String, memory: Int, disk: Int) -> CachingURLCache {
    CachingURLCache(memoryCapacity: memory, diskCapacity: disk, directory: URL(fileURLWithPath: directory))
}

func store(_ cache: CachingURLCache, index: Int, writer: String, version: Int) {
    let url = itemURL(index)
    let body = selfVerifyingBody(url: url, writer: writer, version: version)
    let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                   headerFields: ["Cache-Control": "max-age=86400", "Content-Length": "\(body.count)"])!
    cache.storeCachedResponse(CachedURLResponse(response: response, data: body), for: URLRequest(url: url))
}

/// Reads key `index` from `cache`: "hit", "miss", or a description of a wrong entry.
func check(_ cache: CachingURLCache, index: Int) -> (found: Bool, problem: String?) {
    let url = itemURL(index)
    guard let cached = cache.cachedResponse(for: URLRequest(url: url)) else { return (false, nil) }
    return (true, verify(cached.data, url: url))
}

/// write-loop DIR KEYS WRITER: stores self-verifying entries for keys 0..<KEYS, round and
/// round, until killed. Prints `settled stored=N` each time 50 more have landed on disk.
func writeLoop(directory: String, keys: Int, writer: String) -> Never {
    let cache = openCache(directory, memory: 0, disk: 256 << 20)
    say("started pid=\(ProcessInfo.processInfo.processIdentifier)")
    var stored = 0
    while true {
        store(cache, index: stored % keys, writer: writer, version: stored)
        stored += 1
        if stored % 50 == 0 {
            cache.waitUntilSettled()
            say("settled stored=\(stored)")
        }
    }
}

/// The bodies of `write-past-limit`: a first entry that fits under its file-size limit, and a
/// second for the same URL that does not.
func limitBody(_ version: Int) -> Data {
    Data((0..<(version == 0 ? 1_000 : 200_000)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ version) })
}

/// write-past-limit DIR: stores `limitBody(0)` for key 0 and waits until it is on disk, then
/// limits the size of any file it writes to 64 KiB (`RLIMIT_FSIZE`, with `SIGXFSZ` at its
/// default action) and stores `limitBody(1)` for the same key: the entry write that replaces the
/// first dies at 64 KiB, a crash at a known point of a write. Prints `stored first`, and
/// `survived` only if the process was not killed.
func writePastLimit(directory: String) -> Never {
    let cache = openCache(directory, memory: 0, disk: 256 << 20)
    let url = itemURL(0)
    func store(_ version: Int) {
        let body = limitBody(version)
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=86400", "Content-Length": "\(body.count)"])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: body), for: URLRequest(url: url))
    }
    store(0)
    cache.waitUntilSettled()
    say("stored first")
    var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
    var limit = rlimit(rlim_cur: 64 << 10, rlim_max: 64 << 10)
    #if canImport(Glibc)
    guard setrlimit(Int32(RLIMIT_CORE.rawValue), &noCore) == 0, setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0 else {
        fail("setrlimit: errno \(errno)")
    }
    #else
    guard setrlimit(RLIMIT_CORE, &noCore) == 0, setrlimit(RLIMIT_FSIZE, &limit) == 0 else { fail("setrlimit: errno \(errno)") }
    #endif
    signal(SIGXFSZ, SIG_DFL)
    store(1)
    cache.waitUntilSettled()
    say("survived")
    exit(0)
}

/// read-all DIR KEYS: opens the directory as a restarted app would and reads every key.
/// Prints `missing key=N` for each miss, `bad key=N …` for each wrong entry, and a summary;
/// exits 1 if any entry was wrong.
func readAll(directory: String, keys: Int) -> Never {
    let cache = openCache(directory, memory: 0, disk: 256 << 20)
    cache.waitUntilSettled()  // the opening reconcile has run: orphans adopted, leftovers removed
    var found = 0, bad = 0
    for index in 0..<keys {
        let (hit, problem) = check(cache, index: index)
        if hit { found += 1 } else { say("missing key=\(index)") }
        if let problem {
            bad += 1
            say("bad key=\(index) \(problem)")
        }
    }
    let statistics = cache.statistics
    say("read-all found=\(found) missing=\(keys - found) bad=\(bad) corrupt=\(statistics.corruptEntriesRemoved) "
        + "entries=\(statistics.disk.entryCount) problem=\(statistics.diskProblem.map { "\($0.code)" } ?? "none") "
        + "unavailable=\(statistics.unavailableDiskReads)")
    exit(bad == 0 ? 0 : 1)
}

/// fill DIR KEYS: stores self-verifying entries for keys 0..<KEYS, waits until they are on
/// disk, and exits.
func fill(directory: String, keys: Int) -> Never {
    let cache = openCache(directory, memory: 0, disk: 256 << 20)
    for index in 0..<keys {
        store(cache, index: index, writer: "fill", version: 0)
    }
    cache.waitUntilSettled()
    say("filled stored=\(keys) entries=\(cache.statistics.disk.entryCount)")
    exit(0)
}

/// read-all-as UID DIR KEYS: `read-all` in a process that first gives up root for user UID, so
/// that file permissions apply to it (as Data Protection applies to an app launched in the
/// background while the device is locked).
func readAllAs(user: UInt32, directory: String, keys: Int) -> Never {
    guard setgid(user) == 0, setuid(user) == 0, getuid() == user else { fail("could not become user \(user)") }
    readAll(directory: directory, keys: keys)
}

/// hammer DIR KEYS ITERATIONS WRITER: stores, reads (verifying), removes and reopens at random
/// on a small disk tier shared with other processes. Exits 1 if any read was wrong.
func hammer(directory: String, keys: Int, iterations: Int, writer: String) -> Never {
    var generator = SystemRandomNumberGenerator()
    var cache = openCache(directory, memory: 0, disk: 600_000)
    var reads = 0, hits = 0, bad = 0, reopens = 0
    for step in 0..<iterations {
        let index = Int.random(in: 0..<keys, using: &generator)
        switch Int.random(in: 0..<100, using: &generator) {
        case 0..<50:
            reads += 1
            let (hit, problem) = check(cache, index: index)
            if hit { hits += 1 }
            if let problem {
                bad += 1
                say("bad key=\(index) \(problem)")
            }
        case 50..<92:
            store(cache, index: index, writer: writer, version: step)
        case 92..<98:
            cache.removeCachedResponse(for: URLRequest(url: itemURL(index)))
        default:
            // A restart: a new instance learns what the other process wrote since.
            cache.waitUntilSettled()
            cache = openCache(directory, memory: 0, disk: 600_000)
            reopens += 1
        }
    }
    cache.waitUntilSettled()
    say("hammer writer=\(writer) reads=\(reads) hits=\(hits) bad=\(bad) reopens=\(reopens) "
        + "corrupt=\(cache.statistics.corruptEntriesRemoved)")
    exit(bad == 0 ? 0 : 1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "register":
    // register <early|shared-first|late> <cache-directory> <url>
    guard arguments.count == 4, let url = URL(string: arguments[3]) else { fail("usage: register early|shared-first|late DIR URL") }
    switch arguments[1] {
    case "shared-first":
        // The shared session is the first session of the process and exists before registration.
        _ = URLSession.shared.delegateQueue
    case "late":
        // Another session, then the shared session, both before registration.
        _ = URLSession(configuration: .default)
        _ = URLSession.shared.delegateQueue
    default:
        break
    }
    let cache = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: URL(fileURLWithPath: arguments[2]))
    let status = CachingURLProtocol.register(CachingConfiguration(cache: cache))
    print("registration=\(status)")
    fetchThroughSharedSession(url)
    fetchThroughSharedSession(url)
case "relock":
    // The package's lock taken again by the thread that holds it: on Apple platforms an
    // os_unfair_lock, which aborts the process (Docs/foundation-facts.md, A11). Never run on
    // Linux, where pthread's default mutex would wait for ever.
    #if canImport(Darwin)
    let lock = Locked(0)
    lock.withLock { _ in lock.withLock { _ in } }
    print("relocked")
    #else
    fail("relock: Apple platforms only")
    #endif
case "registered-protocols":
    guard arguments.count == 5, ["with", "without", "for-testing"].contains(arguments[2]), let base = URL(string: arguments[3]) else {
        fail("usage: registered-protocols SCENARIO with|without|for-testing BASE-URL DIR")
    }
    registeredProtocols(scenario: arguments[1], side: arguments[2], base: base, directory: arguments[4])
case "peak-memory":
    guard arguments.count == 4, ["with", "without"].contains(arguments[1]), let url = URL(string: arguments[2]) else {
        fail("usage: peak-memory with|without URL DIR")
    }
    peakMemory(withLayer: arguments[1] == "with", url: url, directory: arguments[3])
case "cancel-race":
    // cancel-race redirects|delegate-redirects|plain with|without SECONDS DIR: one run of CancelRace.
    guard arguments.count == 5, let pattern = CancelRace.Pattern(rawValue: arguments[1]), ["with", "without"].contains(arguments[2]),
          let seconds = TimeInterval(arguments[3]) else {
        fail("usage: cancel-race redirects|delegate-redirects|plain with|without SECONDS DIR")
    }
    CancelRace.run(pattern, withLayer: arguments[2] == "with", seconds: seconds, directory: URL(fileURLWithPath: arguments[4]))
case "cancel-rates":
    // cancel-rates PATTERN RUNS SECONDS: how many cancel-race runs crash, both ways.
    guard arguments.count == 4, let pattern = CancelRace.Pattern(rawValue: arguments[1]), let runs = Int(arguments[2]), runs > 0,
          let seconds = TimeInterval(arguments[3]) else {
        fail("usage: cancel-rates redirects|delegate-redirects|plain RUNS SECONDS")
    }
    CancelRace.rates(pattern, runs: runs, seconds: seconds)
case "stress":
    // stress with|without SEED SECONDS DIR: the stress run (StressWorkload); exits 1 on a wrong
    // answer or a hung load, 3 when the run does not end.
    guard arguments.count == 5, ["with", "without"].contains(arguments[1]), let seed = UInt64(arguments[2]),
          let seconds = TimeInterval(arguments[3]) else {
        fail("usage: stress with|without SEED SECONDS DIR")
    }
    do {
        let workload = try StressWorkload(StressWorkload.Settings(
            seed: seed, seconds: seconds, withLayer: arguments[1] == "with", directory: URL(fileURLWithPath: arguments[4])))
        exit(workload.run() ? 0 : 1)
    } catch {
        fail("\(error)")
    }
case "token-refresh":
    guard arguments.count == 5, ["with", "without"].contains(arguments[1]), let url = URL(string: arguments[2]),
          let count = Int(arguments[4]), count >= 100 else {
        fail("usage: token-refresh with|without URL DIR COUNT (COUNT at least 100)")
    }
    tokenRefresh(withLayer: arguments[1] == "with", url: url, directory: arguments[3], count: count)
case "write-loop":
    guard arguments.count == 4, let keys = Int(arguments[2]), keys > 0 else { fail("usage: write-loop DIR KEYS WRITER") }
    writeLoop(directory: arguments[1], keys: keys, writer: arguments[3])
case "write-past-limit":
    guard arguments.count == 2 else { fail("usage: write-past-limit DIR") }
    writePastLimit(directory: arguments[1])
case "read-all":
    guard arguments.count == 3, let keys = Int(arguments[2]), keys > 0 else { fail("usage: read-all DIR KEYS") }
    readAll(directory: arguments[1], keys: keys)
case "fill":
    guard arguments.count == 3, let keys = Int(arguments[2]), keys > 0 else { fail("usage: fill DIR KEYS") }
    fill(directory: arguments[1], keys: keys)
case "read-all-as":
    guard arguments.count == 4, let user = UInt32(arguments[1]), let keys = Int(arguments[3]), keys > 0 else {
        fail("usage: read-all-as UID DIR KEYS")
    }
    readAllAs(user: user, directory: arguments[2], keys: keys)
case "hammer":
    guard arguments.count == 5, let keys = Int(arguments[2]), let iterations = Int(arguments[3]), keys > 0 else {
        fail("usage: hammer DIR KEYS ITERATIONS WRITER")
    }
    hammer(directory: arguments[1], keys: keys, iterations: iterations, writer: arguments[4])
case "pin", "pinned":
    // pin DIR URL…: pins the URLs in the cache in DIR (another process sharing it); both print
    // the pinned URLs, one per line.
    guard arguments.count >= 2 else { fail("usage: pin DIR URL… | pinned DIR") }
    let cache = CachingURLCache(memoryCapacity: 0, diskCapacity: 8 << 20, directory: URL(fileURLWithPath: arguments[1]))
    do {
        try cache.pin(arguments.dropFirst(2).compactMap(URL.init(string:)))
    } catch {
        fail("\(error)")
    }
    for url in cache.pinnedURLs { print(url.absoluteString) }
default:
    fail("unknown command \(arguments.first ?? "(none)")")
}
