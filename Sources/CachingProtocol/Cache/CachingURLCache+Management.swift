import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// What an app does with what is stored: purge it, see what it takes per host.
extension CachingURLCache {
    /// Deletes everything stored for `url` (GET; its key made as the installation's key rules
    /// make it, so a signed URL removes what any of its signatures stored), from memory and from
    /// disk, and returns once
    /// its entry file is gone from the directory (for example when a user logs out: after the
    /// call, no file holds the response). Waits for disk writes handed in before the call, so
    /// it can take as long as those take. Do not call it from a `CachingConfiguration.observer`.
    public func purge(url: URL) {
        store.removeRecord(forKey: key(for: url))
        store.waitUntilRemoved()
    }

    /// Deletes everything stored for `host` — exactly, or every subdomain with `*.example.com` —
    /// from both tiers, and returns once the entry files are gone (for example "Clear image
    /// cache" for an image host). Reads each entry file's header to learn its URL, so it takes
    /// time in proportion to the number of entries (about a second for 100,000): call it off the
    /// main thread. Not from a `CachingConfiguration.observer`.
    public func purge(host: String) {
        let rule = CachingRule.bypass(host: host)
        purge { rule.matches(URLRequest(url: $0)) }
    }

    /// Deletes everything stored whose URL path starts with `pathPrefix` (on any host, or only
    /// on `host`), like ``purge(host:)``.
    public func purge(pathPrefix: String, host: String? = nil) {
        let rule = CachingRule.bypass(pathPrefix: pathPrefix, host: host)
        purge { rule.matches(URLRequest(url: $0)) }
    }

    private func purge(where matches: (URL) -> Bool) {
        for key in store.storedKeys().keys {
            guard let url = Self.url(ofKey: key), matches(url) else { continue }
            store.removeRecord(forKey: key)
        }
        store.waitUntilRemoved()
    }

    // MARK: Users

    /// Removes every response stored for the user `request` is for, from memory and from disk,
    /// and returns once no file of the directory holds one (a logout). The user is found as
    /// ``cachedResponse(for:)`` finds it: `request` as the session the installation that uses
    /// this cache reads for sends it (its additional header fields and cookies), told by the
    /// installation's ``CachingConfiguration/userIdentity``. A request for nobody in particular
    /// removes nothing. Responses stored for other users, and for nobody in particular, stay.
    ///
    /// With the default identity (``CachingUserIdentity/credentials``), a user is one credential:
    /// responses stored under that user's earlier tokens or cookies are other users to the cache.
    /// ``removeResponsesForAllUsers()`` removes those too; an identity that names the user
    /// (``CachingUserIdentity/cookie(named:)``, ``CachingUserIdentity/custom(_:)``) keeps all of
    /// one user's responses under one name.
    ///
    /// A response to a request of that user's sent before the call that arrives after it is not
    /// stored. Reads no entry file whose responses are all that user's (the disk index names each
    /// response's user); one shared with other users is written again without them. Waits for
    /// the disk writes handed in before the call: call it off the main thread, and not from a
    /// ``CachingConfiguration/observer``.
    public func removeResponses(forUserOf request: URLRequest) {
        guard let user = apiRequest(for: request)?.partition.user else { return }
        removeResponses(ofUser: user)
    }

    /// Removes every response stored for the user an identity names `user`: the value the cookie
    /// of ``CachingUserIdentity/cookie(named:)`` or the field of ``CachingUserIdentity/header(_:)``
    /// had, or what ``CachingUserIdentity/custom(_:)`` returned. Otherwise as
    /// ``removeResponses(forUserOf:)``; with the default identity, ``CachingUserIdentity/credentials``,
    /// no user has a name, and this removes nothing.
    public func removeResponses(forUser user: String) {
        guard !user.isEmpty else { return }
        removeResponses(ofUser: CachingUserIdentity.digest(ofUser: user))
    }

    /// Removes every response stored for any user — every answer to a request with credentials,
    /// or that the identity named a user for — keeping those stored for nobody in particular (a
    /// public image, a catalogue fetched signed out); otherwise as ``removeResponses(forUserOf:)``.
    /// The logout of an app whose users are told apart by the default identity, where a user's
    /// earlier tokens are users of their own.
    public func removeResponsesForAllUsers() {
        removeResponses(ofUser: nil)
    }

    /// Removes the responses of the user with digest `user` (nil: of every user).
    private func removeResponses(ofUser user: UInt64?) {
        store.removeVariants(ofUser: user)
        releaseBuiltResponses()
    }

    /// What is stored per host, for a settings screen ("Images: 120 MB"): the number of stored
    /// URLs and the bytes they take (entry files on disk; memory only for what is not on disk
    /// yet). Hosts are lowercase. Reads each entry file's header, like ``purge(host:)``: call it
    /// off the main thread.
    public func usageByHost() -> [String: HostUsage] {
        var usage: [String: HostUsage] = [:]
        for (key, bytes) in store.storedKeys() {
            guard let host = Self.url(ofKey: key)?.host?.lowercased() else { continue }
            usage[host, default: HostUsage()].entryCount += 1
            usage[host, default: HostUsage()].totalBytes += bytes
        }
        return usage
    }

    /// What one host's stored responses take; see ``usageByHost()``.
    public struct HostUsage: Sendable, Equatable {
        /// Stored URLs (each with all its `Vary` variants).
        public var entryCount = 0
        /// Bytes they take: their entry files' sizes on disk.
        public var totalBytes = 0

        public init(entryCount: Int = 0, totalBytes: Int = 0) {
            self.entryCount = entryCount
            self.totalBytes = totalBytes
        }
    }

    /// The URL of a GET key ("GET https://…").
    static func url(ofKey key: String) -> URL? {
        guard key.hasPrefix("GET ") else { return nil }
        return URL(string: String(key.dropFirst(4)))
    }
}
