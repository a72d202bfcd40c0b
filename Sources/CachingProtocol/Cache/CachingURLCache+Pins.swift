import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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
        try store.disk.pin(urls.map(key(for:)), leavingRoom: maximumEntrySize)
    }

    /// Stops keeping `url` from eviction and the age limit; what is stored for it stays until
    /// they remove it. Unpinning a URL that is not pinned changes nothing. Thread-safe; waits like
    /// ``pin(_:)-(URL)``.
    public func unpin(_ url: URL) throws {
        try unpin([url])
    }

    /// Unpins every URL in `urls` (see ``unpin(_:)-(URL)``).
    public func unpin(_ urls: [URL]) throws {
        try store.disk.unpin(urls.map(key(for:)))
    }

    /// The pinned URLs, in the order they were pinned, as the cache keys them (without what a
    /// key rule leaves out). Includes what another process sharing the directory pinned.
    /// Thread-safe; reads the small pins file when it changed.
    public var pinnedURLs: [URL] {
        store.disk.pinnedKeys.compactMap(Self.url(ofKey:))
    }
}
