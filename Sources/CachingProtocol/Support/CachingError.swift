import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one error type of the package. Each error carries a code (compare with the static members,
/// e.g. `error.code == .diskUnavailable`) and a readable description with the context.
///
/// Errors from the network are not wrapped: the app receives the `URLError` the upstream session
/// produced, exactly as it would without the cache.
public struct CachingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, without the context. New codes may be added without breaking callers.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The code's name, e.g. `diskUnavailable`.
        public var description: String { name }

        /// The cache directory cannot be created or written; the disk tier is off, memory still works.
        public static let diskUnavailable = Code("diskUnavailable")
        /// An entry could not be written (disk full, directory removed, permissions).
        public static let diskWriteFailed = Code("diskWriteFailed")
        /// An entry file was torn, truncated, of another version or not ours; it was removed.
        public static let corruptEntry = Code("corruptEntry")
        /// A file of the cache could not be read for a reason that may pass: permissions, Data
        /// Protection while the device is locked, an I/O error. The lookup was a miss; nothing
        /// was deleted or rebuilt, and the file is read again later.
        public static let fileUnreadable = Code("fileUnreadable")
        /// `URLSession.shared` existed before `CachingURLProtocol.register()`, so it never consults the protocol.
        public static let registeredTooLate = Code("registeredTooLate")
        /// The request may only be answered from the cache (offline mode, `only-if-cached`,
        /// `.returnCacheDataDontLoad`) and nothing usable is stored.
        public static let notInCache = Code("notInCache")
        /// The task kind cannot be served through a `URLProtocol` on this platform (download tasks on Linux).
        public static let unsupportedTask = Code("unsupportedTask")
        /// The request is not one the cache answers (not a GET, conditional, ranged or `no-store`).
        public static let notCacheable = Code("notCacheable")
        /// A request started after ``CachingURLProtocol/unregister()`` removed the installation.
        public static let notInstalled = Code("notInstalled")
        /// Pinning would keep more bytes pinned than ``CachingURLCache/diskCapacity`` holds;
        /// nothing was pinned.
        public static let pinnedBeyondCapacity = Code("pinnedBeyondCapacity")
    }

    /// What went wrong.
    public let code: Code
    /// Context: the path, URL or reason.
    public let detail: String

    init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// `CachingError.<code>: <detail>`.
    public var description: String { "CachingError.\(code): \(detail)" }

    /// A `URLError` with `code` that carries this error as its underlying error and description:
    /// what an app's URL loading code expects, with the cache's reason inside.
    func urlError(_ code: URLError.Code, url: URL? = nil) -> URLError {
        var info: [String: Any] = [NSUnderlyingErrorKey: self, NSLocalizedDescriptionKey: description]
        if let url { info[NSURLErrorFailingURLErrorKey] = url }
        return URLError(code, userInfo: info)
    }
}
