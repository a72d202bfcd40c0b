#if canImport(Darwin)
import Foundation
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

/// Foundation fact A20 on an Apple platform: Apple's loader adds `User-Agent` and
/// `Accept-Language` as it sends a request, after the protocols have seen it. A protocol that is
/// asked about the request finds neither field, and so does one that loads it. The origin still
/// receives both. Through the layer, whose upstream session's loader adds its own, the origin
/// receives the same values as without the layer.
///
/// The tests do not check the values. They depend on the process (its name and version,
/// CFNetwork's and Darwin's), so nothing here compares them with the layer's stand-ins
/// (`SessionSettings.fieldsAddedWhenSent`), which `Vary` matching needs to change when the real
/// values change, not to be equal to them. They also cannot show that every later OS keeps
/// adding the fields late, only that the OS they run on does.
final class LoaderFieldsClaimTests: CachingTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        origin.handle("/fields") { request in
            .text(LoaderFieldsClaimTests.fields(request.header), headers: [HTTPField("Cache-Control", "max-age=600")])
        }
    }

    /// The two fields as `value(name)` gives them, "-" for one that is missing.
    private static func fields(_ value: (String) -> String?) -> String {
        "User-Agent: \(value("User-Agent") ?? "-"), Accept-Language: \(value("Accept-Language") ?? "-")"
    }

    /// A plain session with a protocol that is asked first and takes nothing. It sees the
    /// request without either field, and the origin receives both.
    func testA20_aProtocolAskedAboutTheRequestSeesNeitherFieldThatTheOriginReceives() async throws {
        RequestWatcher.reset()
        let session = sessionAskingFirst(RequestWatcher.self)
        defer { session.finishTasksAndInvalidate() }
        _ = try await session.data(for: request("/fields"))

        let received = try XCTUnwrap(origin.requests(to: "/fields").first)
        XCTAssertFalse((received.header("User-Agent") ?? "").isEmpty, "the origin received a User-Agent")
        XCTAssertFalse((received.header("Accept-Language") ?? "").isEmpty, "the origin received an Accept-Language")
        let userAgents = RequestWatcher.values(of: "User-Agent")
        XCTAssertFalse(userAgents.isEmpty, "the watcher was asked")
        XCTAssertEqual(userAgents.compactMap { $0 }, [], "a protocol is asked about the request before the loader adds a User-Agent")
        XCTAssertEqual(RequestWatcher.values(of: "Accept-Language").compactMap { $0 }, [],
                       "a protocol is asked about the request before the loader adds an Accept-Language")
    }

    /// A protocol that loads the request, as the layer does, finds neither field in the request
    /// it is given in `startLoading`.
    func testA20_aProtocolThatLoadsTheRequestFindsNeitherField() async throws {
        EchoProtocol.reset()
        let session = sessionAskingFirst(EchoProtocol.self)
        defer { session.finishTasksAndInvalidate() }
        _ = try await session.data(for: request("/echo/fields"))
        let received = try XCTUnwrap(EchoProtocol.received.first, "loaded by the protocol")
        XCTAssertEqual(Self.fields(received.value(of:)), "User-Agent: -, Accept-Language: -")
        XCTAssertEqual(origin.requestCount(), 0, "answered by the protocol")
    }

    /// The same app code without and with the layer. The origin receives the same `User-Agent`
    /// and `Accept-Language` (it echoes them), and the layer fetched the load itself.
    func testA20_throughTheLayerTheOriginReceivesTheSameFields() async throws {
        let caching = makeConfiguration()
        let (without, with) = try await withoutAndWithTheLayer(caching: caching) { session in
            let (data, _) = try await session.data(for: request("/fields"))
            return String(decoding: data, as: UTF8.self)
        }
        XCTAssertFalse(without.contains(": -"), "both fields reached the origin: \(without)")
        XCTAssertEqual(with, without)
        XCTAssertEqual(caching.statistics.fetched, 1, "the layer fetched it")
    }
}
#endif
