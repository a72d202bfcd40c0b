#if canImport(FoundationNetworking)
import Foundation
import FoundationNetworking
import XCTest
@testable import CachingProtocol

/// What the layer reads of an app's task that corelibs keeps internal (Linux): the session that
/// owns it, read at the field's offset rather than through a `Mirror`.
final class AppTaskRedirectsTests: LoaderRulesTestCase {
    func testTheOwningSessionIsReadAtItsOffset() {
        // Given corelibs' task layout
        XCTAssertNotNil(AppTaskRedirects.sessionFieldOffset, "URLSessionTask.session was not found: every load would take the Mirror")
        // When tasks of two sessions, of each kind, are asked for their session
        let first = URLSession(configuration: .ephemeral)
        let second = URLSession(configuration: .ephemeral, delegate: nil, delegateQueue: nil)
        defer {
            first.invalidateAndCancel()
            second.invalidateAndCancel()
        }
        let url = URL(string: "http://127.0.0.1:9/")!
        let tasks: [(URLSessionTask, URLSession)] = [
            (first.dataTask(with: url), first), (second.dataTask(with: url) { _, _, _ in }, second),
            (second.downloadTask(with: url), second), (first.uploadTask(with: URLRequest(url: url), from: Data()), first),
        ]
        // Then each names its own
        for (task, session) in tasks {
            XCTAssertTrue(AppTaskRedirects.owningSession(of: task) === session, "\(task)")
        }
    }
}
#endif
