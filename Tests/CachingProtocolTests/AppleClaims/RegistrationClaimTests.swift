#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation facts A9 and A10 on an Apple platform: `URLSession.shared` consults the classes
/// registered with `URLProtocol.registerClass` whenever a task starts — also when it was made
/// before the registration (on Linux it never does, fact L12) — and so does `NSURLConnection`.
final class RegistrationClaimTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        origin.handle("/registered") { _ in .text("registered", headers: [HTTPField("Cache-Control", "max-age=600")]) }
    }

    func testA9_theSharedSessionMadeBeforeRegistrationConsultsTheProtocol() async throws {
        _ = URLSession.shared.configuration   // the shared session exists before the registration
        XCTAssertEqual(CachingURLProtocol.register(makeConfiguration()), .active)
        var statuses: [String?] = []
        for _ in 0..<2 {
            let (data, response) = try await URLSession.shared.data(for: request("/registered"))
            XCTAssertEqual(String(decoding: data, as: UTF8.self), "registered")
            statuses.append((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status"))
        }
        XCTAssertEqual(statuses.last, "CachingProtocol; hit", "\(statuses)")
        XCTAssertEqual(origin.requestCount(path: "/registered"), 1)
    }

    /// `NSURLConnection` is deprecated (iOS 9, macOS 10.11), so the test is marked deprecated too:
    /// it uses it on purpose, and the type-check stays free of warnings.
    @available(*, deprecated, message: "exercises NSURLConnection on purpose")
    func testA10_nsURLConnectionConsultsTheRegisteredProtocol() throws {
        XCTAssertEqual(CachingURLProtocol.register(makeConfiguration()), .active)
        var statuses: [String?] = []
        for _ in 0..<2 {
            let done = expectation(description: "NSURLConnection finished")
            let result = Locked<(Data?, HTTPURLResponse?)>((nil, nil))
            NSURLConnection.sendAsynchronousRequest(request("/registered"), queue: OperationQueue()) { response, data, _ in
                result.withLock { $0 = (data, response as? HTTPURLResponse) }
                done.fulfill()
            }
            wait(for: [done], timeout: 10)
            let (data, response) = result.withLock { $0 }
            XCTAssertEqual(data.map { String(decoding: $0, as: UTF8.self) }, "registered")
            statuses.append(response?.value(forHTTPHeaderField: "Cache-Status"))
        }
        XCTAssertEqual(statuses.last, "CachingProtocol; hit", "\(statuses)")
        XCTAssertEqual(origin.requestCount(path: "/registered"), 1)
    }
}
#endif
