import CachingProtocol
import Foundation
import XCTest

/// The base of every test class of this bundle: the loader rules the run asks for, as in
/// CachingProtocolTests' `LoaderRulesTestCase` (both bundles run in one process on Linux).
class LoaderRulesTestCase: XCTestCase {
    override class func setUp() {
        super.setUp()
        let requested: LoaderRules = ProcessInfo.processInfo.environment["CACHINGPROTOCOL_LOADER_RULES"] == "apple" ? .apple : .native
        precondition(LoaderRules.choose(requested),
                     "the loader rules were read before the test bundle chose them: derive every test class from LoaderRulesTestCase")
    }
}
