#if canImport(Darwin)
import Darwin
import Foundation
import XCTest
@testable import CachingProtocol

/// Base of the claim tests that need a cache but no origin: a fresh directory for it, removed
/// afterwards (its files made readable again first, for tests that took the permission away), and
/// responses to store through `URLCache`'s API.
class ScratchDirectoryTestCase: LoaderRulesTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(type(of: self))-\(UUID().uuidString)", isDirectory: true)
    }

    override func tearDownWithError() throws {
        if let directory {
            for path in CacheFiles.all(in: directory) { chmod(path, 0o600) }
            try? FileManager.default.removeItem(at: directory)
        }
        try super.tearDownWithError()
    }

    /// A request for `url` and a 200 for it, fresh for ten minutes, stored with `policy`.
    func storable(_ url: String, body: Data, policy: URLCache.StoragePolicy = .allowed) -> (URLRequest, CachedURLResponse) {
        let request = URLRequest(url: URL(string: url)!)
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=600"])!
        return (request, CachedURLResponse(response: response, data: body, userInfo: nil, storagePolicy: policy))
    }
}
#endif
