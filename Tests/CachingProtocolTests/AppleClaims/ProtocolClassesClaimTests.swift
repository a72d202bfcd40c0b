#if canImport(Darwin)
import Foundation
import XCTest
@testable import CachingProtocol

/// Foundation facts A26 and A27, on an Apple platform: Foundation's own protocol classes are
/// defined in system images (so a class a swizzled `URLSessionConfiguration.default` adds is told
/// apart from them), and the layer's upstream session does not wait for connectivity first.
final class ProtocolClassesClaimTests: LoaderRulesTestCase {
    /// Every class `.default` lists in a process that swizzles nothing is defined in an image under
    /// a system path; the caching protocol and a class of this test bundle are not.
    func testA26_foundationsProtocolClassesAreDefinedInSystemImages() throws {
        let listed = URLSessionConfiguration.default.protocolClasses ?? []
        XCTAssertFalse(listed.isEmpty)
        for protocolClass in listed {
            let image = class_getImageName(protocolClass).map { String(cString: $0) } ?? "none"
            XCTAssertTrue(SessionSettings.isFoundationProtocol(protocolClass), "\(protocolClass) in \(image)")
        }
        XCTAssertFalse(SessionSettings.isFoundationProtocol(CachingURLProtocol.self))
        XCTAssertFalse(SessionSettings.isFoundationProtocol(BundleProtocol.self))
        XCTAssertEqual(SessionSettings.foundationProtocolClasses.count, listed.count)
    }

    /// The upstream session of a session that waits for connectivity does not wait; the one it
    /// sends again through does (`SessionSettings.waitingForConnectivity`).
    func testA27_theUpstreamSessionWaitsOnlyWhenSentAgainToWait() {
        let configuration = URLSessionConfiguration.default
        configuration.waitsForConnectivity = true
        let settings = SessionSettings(configuration)
        XCTAssertTrue(settings.waitsForConnectivity)
        let leavingOut: (AnyClass) -> Bool = { $0 is CachingURLProtocol.Type }
        XCTAssertFalse(settings.upstreamConfiguration(leavingOut: leavingOut).waitsForConnectivity)
        XCTAssertTrue(settings.waitingForConnectivity.upstreamConfiguration(leavingOut: leavingOut).waitsForConnectivity)
        XCTAssertFalse(SessionSettings(.default).waitsForConnectivity)
    }
}

/// A protocol class of this test bundle's own.
private final class BundleProtocol: URLProtocol {}
#endif
