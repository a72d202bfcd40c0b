#if canImport(Darwin)
import Darwin
import Foundation
import XCTest
@testable import CachingProtocol

/// Foundation facts A17 and A18 on an Apple platform: where UIKit exists the cache observes
/// UIKit's own memory warning (by its name, which must be UIKit's), posted on the main thread,
/// and returns at once; on macOS, which has no memory warning, it answers the system's memory
/// pressure turning critical, reported by a dispatch source, and the source goes with the cache.
///
/// Not provable here: that the system posts the warning, or reports critical pressure, when it
/// does — a test cannot make it (UIKit's simulated warning is private API, and real pressure
/// takes gigabytes: `sudo memory_pressure -l critical` by hand on a Mac).
final class MemoryWarningClaimTests: ScratchDirectoryTestCase {
    private let kept = Data.pattern(2_000, seed: 17)
    private let secret = Data("memory-only-s3cr3t".utf8)

    /// A cache holding two entries in memory alone: one the disk may take, and one the app stored
    /// for memory only (`.allowedInMemoryOnly`), which no file may ever hold.
    private func cacheWithEntriesInMemory() -> CachingURLCache {
        let cache = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        let (request, response) = storable("https://example.com/in-memory", body: kept)
        let key = cache.key(for: request.url!)
        let entry = CachingURLCache.entry(from: response, request: CacheRequest(request, key: key), policy: .heuristic(), now: Date())
        cache.store.memory.store(CacheRecord(key: key, variants: [entry]))
        let (secretRequest, secretResponse) = storable("https://example.com/memory-only", body: secret, policy: .allowedInMemoryOnly)
        cache.storeCachedResponse(secretResponse, for: secretRequest)
        cache.waitUntilSettled()
        return cache
    }

    /// What a memory warning must have done to `cacheWithEntriesInMemory()`'s cache: memory
    /// emptied, the entry the disk may take on disk byte for byte, the memory-only one in no file.
    private func assertMovedToDiskButTheMemoryOnlyEntry(_ cache: CachingURLCache, _ moment: String,
                                                        file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(cache.statistics.memory.entryCount, 0, "\(moment): memory emptied", file: file, line: line)
        XCTAssertEqual(cache.statistics.disk.entryCount, 1, "\(moment): one entry moved to disk", file: file, line: line)
        let reopened = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        XCTAssertEqual(reopened.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/in-memory")!))?.data, kept,
                       "\(moment): on disk, byte for byte", file: file, line: line)
        XCTAssertNil(reopened.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/memory-only")!)),
                     "\(moment): the memory-only entry was dropped", file: file, line: line)
        XCTAssertEqual(CacheFiles.files(in: directory, containing: secret), [], "\(moment): in no file", file: file, line: line)
    }

    #if canImport(UIKit)
    /// The name the cache observes is UIKit's — read from UIKit's own constant
    /// (`UIApplicationDidReceiveMemoryWarningNotification`, looked up in the loaded UIKit: the
    /// test does not import UIKit, whose interface in the newer SDK subsets needs a module they
    /// lack) — and that notification, posted on the main thread as UIKit posts it, moves memory
    /// to disk without the post waiting for it, all but what the app stored for memory only.
    @MainActor
    func testA17_theCacheObservesUIKitsOwnMemoryWarning() throws {
        let uiKitName = try XCTUnwrap(Self.uiKitMemoryWarningName(), "UIKit is loaded in an iOS or tvOS test")
        XCTAssertEqual(CachingURLCache.memoryWarningNotification.rawValue, uiKitName)
        let cache = cacheWithEntriesInMemory()
        XCTAssertEqual(cache.statistics.memory.entryCount, 2)
        XCTAssertEqual(cache.statistics.disk.entryCount, 0, "in memory alone before the warning")
        NotificationCenter.default.post(name: Notification.Name(uiKitName), object: nil)
        cache.waitUntilSettled()
        assertMovedToDiskButTheMemoryOnlyEntry(cache, "after UIKit's warning")
    }

    /// The value of UIKit's `UIApplicationDidReceiveMemoryWarningNotification` (an `NSString *
    /// const`), found in the process's loaded images; nil when UIKit is not loaded.
    private static func uiKitMemoryWarningName() -> String? {
        let defaultHandle = UnsafeMutableRawPointer(bitPattern: -2)   // RTLD_DEFAULT
        guard let symbol = dlsym(defaultHandle, "UIApplicationDidReceiveMemoryWarningNotification") else { return nil }
        return symbol.assumingMemoryBound(to: NSString?.self).pointee.map { $0 as String }
    }
    #endif

    #if os(macOS)
    /// A cache arms a memory-pressure source for the critical level, and cancels it when it goes.
    func testA18_onMacOSACacheAnswersTheSystemsMemoryPressureSource() throws {
        var cache: CachingURLCache? = cacheWithEntriesInMemory()
        let source = try XCTUnwrap(cache?.memoryPressureSource.withLock { $0 }, "armed when the cache is made")
        XCTAssertEqual(source.mask, .critical, "the critical level only")
        XCTAssertFalse(source.isCancelled)
        cache = nil
        XCTAssertTrue(source.isCancelled, "cancelled with the cache")
    }

    /// What the source reports: critical moves memory to disk (off the reporting thread), all but
    /// what the app stored for memory only; warning, which asks apps to relax future caching
    /// rather than walk their caches, does not.
    func testA18_onMacOSCriticalPressureMovesMemoryToDiskAndWarningDoesNot() {
        let cache = cacheWithEntriesInMemory()
        cache.memoryPressureChanged(to: .warning)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 2, "warning: kept")
        XCTAssertEqual(cache.statistics.disk.entryCount, 0, "warning: nothing written")
        cache.memoryPressureChanged(to: .critical)
        cache.waitUntilSettled()
        assertMovedToDiskButTheMemoryOnlyEntry(cache, "critical")
    }
    #endif
}
#endif
