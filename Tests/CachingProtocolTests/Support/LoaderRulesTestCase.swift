import Foundation
import XCTest
@testable import CachingProtocol

/// The base of every test class of this bundle. Before its first test the process takes the
/// loader rules the run asks for: Apple's with `CACHINGPROTOCOL_LOADER_RULES=apple` (how `.ci/run`
/// runs the suite a second time on Linux), the platform's otherwise (`LoaderRules`). A class that
/// reads them before any of these chose (one that does not derive from this) stops the run.
class LoaderRulesTestCase: XCTestCase {
    override class func setUp() {
        super.setUp()
        let requested: LoaderRules = ProcessInfo.processInfo.environment["CACHINGPROTOCOL_LOADER_RULES"] == "apple" ? .apple : .native
        precondition(LoaderRules.choose(requested),
                     "the loader rules were read before the test bundle chose them: derive every test class from LoaderRulesTestCase")
    }
}
