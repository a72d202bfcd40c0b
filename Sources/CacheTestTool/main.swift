// A helper process for tests that need a process of their own: registration against
// URLSession.shared (which exists once per process), several processes sharing one cache
// directory (`hammer`, `read-all`), a process killed in the middle of writes (`write-loop`),
// a process that may not read the cache's files (`fill`, then `read-all-as`), and one that
// pins in a directory another process uses (`pin`, `pinned`). Not a
// user-facing tool.
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
case "write-loop":
    guard arguments.count == 4, let keys = Int(arguments[2]), keys > 0 else { fail("usage: write-loop DIR KEYS WRITER") }
    writeLoop(directory: arguments[1], keys: keys, writer: arguments[3])
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
