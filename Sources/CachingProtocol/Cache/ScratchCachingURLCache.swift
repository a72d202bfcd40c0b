import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A cache in a directory of its own that it deletes when it goes: the cache of
/// ``CachingConfiguration/forTesting()``.
final class ScratchCachingURLCache: CachingURLCache, @unchecked Sendable {
    // @unchecked: no state of its own; CachingURLCache's is thread-safe.

    deinit {
        // Writes handed in before land first, so none recreates a file in the removed directory.
        waitUntilSettled()
        try? FileManager.default.removeItem(at: directory)
    }
}

extension CachingConfiguration {
    /// A configuration for an app's own tests: a new, empty cache of its own (4 MB in memory,
    /// 100 MB on disk, as ``CachingURLCache/standard``) in a new temporary directory, which is
    /// deleted when nothing uses the configuration any more (after
    /// ``CachingURLProtocol/unregister()``, once the sessions that use it are gone). Everything
    /// else is the default configuration.
    ///
    /// Make one per test — `CachingURLProtocol.register(.forTesting())` in `setUp`, `unregister()`
    /// in `tearDown` — and no test sees an answer cached by another test or an earlier run: a
    /// stub's answer (OHHTTPStubs, Mocker) the layer stored in one test, when it was asked before
    /// the stub, never answers the next test, which stubs the same URL differently. The disk tier
    /// is used as in the app, in a place of its own.
    ///
    /// Threading: call it from any thread. The directory is removed on the thread that lets go of
    /// the cache last, after the disk writes handed in before have landed.
    public static func forTesting() -> CachingConfiguration {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("CachingProtocol-test-\(UUID().uuidString)", isDirectory: true)
        return CachingConfiguration(cache: ScratchCachingURLCache(memoryCapacity: 4 << 20, diskCapacity: 100 << 20, directory: directory))
    }
}
