import Foundation
import XCTest
@testable import CachingProtocol

/// A clock that moves one second forward each time it is read, so every access has its own
/// time and LRU order is deterministic without sleeping.
final class SteppingClock: Sendable {
    private let current: Locked<Date>

    init(start: Date = Date(timeIntervalSinceReferenceDate: 700_000_000)) {
        current = Locked(start)
    }

    func now() -> Date {
        current.withLock { date in
            date.addTimeInterval(1)
            return date
        }
    }

    var closure: @Sendable () -> Date {
        { [self] in now() }
    }
}

enum Fixtures {
    /// A body whose bytes identify the key and version: "<version>#" and then bytes generated
    /// from a seed of both, so a test can tell whose body it got.
    static func body(key: String, version: Int = 0, size: Int) -> Data {
        var data = Data(count: size)
        let prefix = Array("\(version)#".utf8)
        var state = StableHash.hash(key, seed: UInt64(bitPattern: Int64(version)))
        data.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                withUnsafeBytes(of: state) { word in
                    let count = min(8, buffer.count - offset)
                    buffer.baseAddress!.advanced(by: offset).copyMemory(from: word.baseAddress!, byteCount: count)
                }
                offset += 8
            }
            for (index, byte) in prefix.prefix(buffer.count).enumerated() { buffer[index] = byte }
        }
        return data
    }

    /// The version a body made by `body(key:version:size:)` says it is, parsed from its bytes.
    static func version(ofBody body: Data) -> Int? {
        guard let end = body.firstIndex(of: UInt8(ascii: "#")) else { return nil }
        return Int(String(decoding: body[body.startIndex..<end], as: UTF8.self))
    }

    /// Whether `record` is exactly a record `record(key:version:bodySize:)` made for `key`.
    static func isIntact(_ record: CacheRecord, key: String) -> Bool {
        guard record.key == key, record.variants.count == 1,
              let version = version(ofBody: record.variants[0].body)
        else { return false }
        let body = record.variants[0].body
        return body == self.body(key: key, version: version, size: body.count)
            && record.variants[0].responseURL == "https://example.com/\(key)"
    }

    static func entry(
        url: String = "https://example.com/a",
        body: Data,
        responseDate: Date = Date(timeIntervalSinceReferenceDate: 600_000_000),
        vary: [CacheEntry.VaryField] = [],
        partition: Partition = .anonymous,
        userInfo: Data? = nil
    ) -> CacheEntry {
        CacheEntry(
            responseURL: url,
            statusCode: 200,
            headers: HTTPHeaders([
                HTTPHeaders.Field(name: "Content-Type", value: "text/plain"),
                HTTPHeaders.Field(name: "ETag", value: "\"v1\""),
                HTTPHeaders.Field(name: "Set-Cookie", value: "a=1"),
                HTTPHeaders.Field(name: "Set-Cookie", value: "b=2"),
            ]),
            body: body,
            requestDate: responseDate.addingTimeInterval(-0.25),
            responseDate: responseDate,
            initialAge: 3,
            freshnessLifetime: 600,
            varyFields: vary,
            partition: partition,
            userInfo: userInfo
        )
    }

    static func record(
        key: String,
        version: Int = 0,
        bodySize: Int = 100,
        responseDate: Date = Date(timeIntervalSinceReferenceDate: 600_000_000)
    ) -> CacheRecord {
        CacheRecord(key: key, variants: [
            entry(url: "https://example.com/\(key)", body: body(key: key, version: version, size: bodySize), responseDate: responseDate),
        ])
    }

    /// A record with every optional field set and two variants.
    static func richRecord(key: String = "GET https://example.com/feed?page=2") -> CacheRecord {
        CacheRecord(key: key, variants: [
            entry(
                url: "https://example.com/feed?page=2",
                body: body(key: key, size: 300),
                vary: [
                    CacheEntry.VaryField(name: "accept-encoding", value: "gzip"),
                    CacheEntry.VaryField(name: "accept-language", value: nil),
                ],
                partition: Partition(user: 0xDEAD_BEEF_CAFE_F00D, judge: 0x0123_4567_89AB_CDEF),
                userInfo: Data([0, 1, 2, 3, 255])
            ),
            entry(
                url: "https://example.com/feed?page=2&ü=✓",
                body: Data(),
                responseDate: Date(timeIntervalSinceReferenceDate: 600_000_100),
                vary: [CacheEntry.VaryField(name: "accept-encoding", value: "br")]
            ),
        ])
    }
}

/// A fresh temporary directory per test, removed (and unmounted, if a test mounted it) in tearDown.
class TemporaryDirectoryTestCase: LoaderRulesTestCase {
    private(set) var temporaryDirectory: URL!
    let mounts = Mounts()

    override func setUpWithError() throws {
        try super.setUpWithError()
        temporaryDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("CachingProtocolTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: temporaryDirectory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        // Let every store finish its queued work (and be released) before its directory goes,
        // so no write lands in a directory being deleted.
        for store in trackedStores { store.flush() }
        trackedStores = []
        mounts.unmountAll()
        if let temporaryDirectory {
            try? FileManager.default.removeItem(at: temporaryDirectory)
        }
        try super.tearDownWithError()
    }

    private var trackedStores: [DiskStore] = []

    /// Keeps `store` until tearDown, which flushes it before removing the directory.
    @discardableResult
    func track(_ store: DiskStore) -> DiskStore {
        trackedStores.append(store)
        return store
    }

    /// A cache directory inside the test's temporary directory.
    func cacheDirectory(_ name: String = "cache") -> URL {
        temporaryDirectory.appendingPathComponent(name, isDirectory: true)
    }

    /// The sum of the sizes of all regular files under `directory`.
    func sizeOfFiles(in directory: URL) -> Int {
        CacheFiles.totalSize(in: directory)
    }

    func entryFiles(in directory: URL) -> [String] {
        CacheFiles.entryNames(in: directory)
    }

}
