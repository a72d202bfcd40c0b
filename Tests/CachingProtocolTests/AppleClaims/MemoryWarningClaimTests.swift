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
    /// A cache holding one memory-only entry.
    private func cacheWithAnEntryInMemory() -> CachingURLCache {
        let cache = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory)
        let (request, response) = storable("https://example.com/in-memory", body: Data.pattern(2_000), policy: .allowedInMemoryOnly)
        cache.storeCachedResponse(response, for: request)
        cache.waitUntilSettled()
        return cache
    }

    #if canImport(UIKit)
    /// The name the cache observes is UIKit's — read from UIKit's own constant
    /// (`UIApplicationDidReceiveMemoryWarningNotification`, looked up in the loaded UIKit: the
    /// test does not import UIKit, whose interface in the newer SDK subsets needs a module they
    /// lack) — and that notification, posted on the main thread as UIKit posts it, moves memory
    /// to disk without the post waiting for it.
    @MainActor
    func testA17_theCacheObservesUIKitsOwnMemoryWarning() throws {
        let uiKitName = try XCTUnwrap(Self.uiKitMemoryWarningName(), "UIKit is loaded in an iOS or tvOS test")
        XCTAssertEqual(CachingURLCache.memoryWarningNotification.rawValue, uiKitName)
        let cache = cacheWithAnEntryInMemory()
        XCTAssertEqual(cache.statistics.memory.entryCount, 1)
        NotificationCenter.default.post(name: Notification.Name(uiKitName), object: nil)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 0, "memory emptied")
        XCTAssertEqual(cache.statistics.disk.entryCount, 1, "moved to disk")
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
        var cache: CachingURLCache? = cacheWithAnEntryInMemory()
        let source = try XCTUnwrap(cache?.memoryPressureSource.withLock { $0 }, "armed when the cache is made")
        XCTAssertEqual(source.mask, .critical, "the critical level only")
        XCTAssertFalse(source.isCancelled)
        cache = nil
        XCTAssertTrue(source.isCancelled, "cancelled with the cache")
    }

    /// What the source reports: critical moves memory to disk (off the reporting thread);
    /// warning, which asks apps to relax future caching rather than walk their caches, does not.
    func testA18_onMacOSCriticalPressureMovesMemoryToDiskAndWarningDoesNot() {
        let cache = cacheWithAnEntryInMemory()
        cache.memoryPressureChanged(to: .warning)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 1, "warning: kept")
        cache.memoryPressureChanged(to: .critical)
        cache.waitUntilSettled()
        XCTAssertEqual(cache.statistics.memory.entryCount, 0, "critical: memory emptied")
        XCTAssertEqual(cache.statistics.disk.entryCount, 1, "critical: moved to disk")
    }
    #endif
}
#endif
