// A stand-in for Apple's XCTest module, used ONLY by Scripts/apple-typecheck.sh to type-check the
// test targets for iOS on Linux: XCTest is not part of any SDK (Xcode ships it with the platform),
// so the iOS SDK subset has none. Nothing here runs; the bodies only satisfy the compiler.
//
// Every declaration follows the signature of Apple's XCTest (Xcode 16, as documented and as its
// Swift interface declares it): the same labels, defaults (`#filePath`), autoclosures, `throws`,
// `async`, `noasync` and Sendability, and classes rooted in `NSObject` as Apple's are — so that a
// test which compiles against this module compiles against Apple's XCTest too. Checked against
// Apple's XCTest documentation, not against Xcode (there is none here). Only the API the tests use
// is declared: add a declaration, copied from Apple's signature, when a test uses more. Nothing
// in the package imports this module; it is never built by SwiftPM (it is not under Sources/).

// Apple's XCTest re-exports Foundation (its Objective-C umbrella imports it): `import XCTest`
// alone makes `Date`, `URL`, `DispatchQueue`... visible, and tests rely on it.
@_exported import Foundation

// MARK: - Test cases

/// Apple: `class XCTest : NSObject` (the abstract base of `XCTestCase` and `XCTestSuite`).
open class XCTest: NSObject {
    /// Apple: `var name: String { get }`.
    open var name: String { fatalError("XCTest stand-in: type-check only") }
    /// Apple: `func setUp()`, `func tearDown()`, `func setUpWithError() throws`,
    /// `func tearDownWithError() throws` — instance methods, not isolated to any actor.
    open func setUp() {}
    open func tearDown() {}
    open func setUpWithError() throws {}
    open func tearDownWithError() throws {}
}

/// Apple: `class XCTestCase : XCTest`. Not `Sendable` (an `NSObject` subclass), not main-actor
/// isolated: a test method without `@MainActor` runs nonisolated.
open class XCTestCase: XCTest {
    /// Apple: `var continueAfterFailure: Bool { get set }`, default `true`.
    open var continueAfterFailure: Bool {
        get { fatalError("XCTest stand-in: type-check only") }
        set { _ = newValue }
    }
    /// Apple: `class func setUp()`, `class func tearDown()`, once per test case class.
    open class func setUp() {}
    open class func tearDown() {}

    /// Apple: `func expectation(description: String) -> XCTestExpectation`.
    open func expectation(description: String) -> XCTestExpectation {
        XCTestExpectation(description: description)
    }

    /// Apple: `func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval)`,
    /// unavailable from asynchronous contexts since Xcode 14.3 (an error in Swift 6).
    @available(*, noasync, message: "Use await fulfillment(of:timeout:enforceOrder:) instead.")
    open func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval) {}

    /// Apple: `func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval,
    /// enforceOrder enforceOrderOfFulfillment: Bool)`, also `noasync`.
    @available(*, noasync, message: "Use await fulfillment(of:timeout:enforceOrder:) instead.")
    open func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval, enforceOrder enforceOrderOfFulfillment: Bool) {}

    /// Apple: `@nonobjc func fulfillment(of expectations: [XCTestExpectation], timeout seconds:
    /// TimeInterval = .infinity, enforceOrder enforceOrderOfFulfillment: Bool = false) async`
    /// (iOS 13, macOS 10.15), nonisolated.
    @available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
    public func fulfillment(of expectations: [XCTestExpectation], timeout seconds: TimeInterval = .infinity, enforceOrder enforceOrderOfFulfillment: Bool = false) async {}

    /// Apple: `func measure(_ block: () -> Void)`.
    open func measure(_ block: () -> Void) { block() }
}

/// Apple: `class XCTestExpectation : NSObject, @unchecked Sendable` (documented as `Sendable`).
open class XCTestExpectation: NSObject, @unchecked Sendable {
    /// Apple: `init(description expectationDescription: String)`.
    public init(description expectationDescription: String) {
        self.expectationDescription = expectationDescription
        super.init()
    }
    /// Apple: `var expectationDescription: String { get set }`.
    open var expectationDescription: String
    /// Apple: `var isInverted: Bool { get set }`, default `false`.
    open var isInverted: Bool = false
    /// Apple: `var expectedFulfillmentCount: Int { get set }`, default 1.
    open var expectedFulfillmentCount: Int = 1
    /// Apple: `var assertForOverFulfill: Bool { get set }`, default `true` for expectations made
    /// by `expectation(description:)`.
    open var assertForOverFulfill: Bool = true
    /// Apple: `func fulfill()`, callable from any thread.
    open func fulfill() {}
}

/// Apple: `class XCTNSPredicateExpectation : XCTestExpectation`: fulfilled once `predicate`
/// holds for `object`, evaluated while a waiter waits.
open class XCTNSPredicateExpectation: XCTestExpectation, @unchecked Sendable {
    /// Apple: `init(predicate: NSPredicate, object: Any? = nil)`.
    public init(predicate: NSPredicate, object: Any? = nil) {
        super.init(description: "Expect predicate")
    }
}

/// Apple: `class XCTWaiter : NSObject` (documented as `Sendable`): waits for expectations
/// without a test case; `XCTWaiter()` and `init(delegate:)` both make one.
open class XCTWaiter: NSObject, @unchecked Sendable {
    /// Apple: `enum XCTWaiter.Result : Int` (`Sendable`).
    public enum Result: Int, Sendable {
        case completed = 1, timedOut, incorrectOrder, invertedFulfillment, interrupted
    }

    override public init() { super.init() }

    /// Apple: `func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval)
    /// -> XCTWaiter.Result`, unavailable from asynchronous contexts since Xcode 14.3. Imported
    /// from Objective-C, so its result may be ignored.
    @available(*, noasync, message: "Use await fulfillment(of:timeout:enforceOrder:) instead.")
    @discardableResult
    open func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval) -> XCTWaiter.Result {
        fatalError("XCTest stand-in: type-check only")
    }

    /// Apple: `class func wait(for expectations: [XCTestExpectation], timeout seconds:
    /// TimeInterval) -> XCTWaiter.Result`, also `noasync`.
    @available(*, noasync, message: "Use await fulfillment(of:timeout:enforceOrder:) instead.")
    @discardableResult
    open class func wait(for expectations: [XCTestExpectation], timeout seconds: TimeInterval) -> XCTWaiter.Result {
        fatalError("XCTest stand-in: type-check only")
    }

    /// Apple: `func fulfillment(of expectations: [XCTestExpectation], timeout seconds:
    /// TimeInterval = .infinity, enforceOrder enforceOrderOfFulfillment: Bool = false) async
    /// -> XCTWaiter.Result` (iOS 13, macOS 10.15).
    @available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
    @discardableResult
    public func fulfillment(of expectations: [XCTestExpectation], timeout seconds: TimeInterval = .infinity, enforceOrder enforceOrderOfFulfillment: Bool = false) async -> XCTWaiter.Result {
        fatalError("XCTest stand-in: type-check only")
    }
}

// MARK: - Skipping

/// Apple: `struct XCTSkip : Error` with `init(_ message: String? = nil, file: StaticString =
/// #filePath, line: UInt = #line)`.
public struct XCTSkip: Error {
    public init(_ message: String? = nil, file: StaticString = #filePath, line: UInt = #line) {}
}

/// Apple: `func XCTSkipIf(_ expression: @autoclosure () throws -> Bool, _ message: @autoclosure
/// () -> String? = nil, file: StaticString = #filePath, line: UInt = #line) throws`.
public func XCTSkipIf(_ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String? = nil, file: StaticString = #filePath, line: UInt = #line) throws {
    fatalError("XCTest stand-in: type-check only")
}

/// Apple: `func XCTSkipUnless(...)`, the same parameters as `XCTSkipIf`.
public func XCTSkipUnless(_ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String? = nil, file: StaticString = #filePath, line: UInt = #line) throws {
    fatalError("XCTest stand-in: type-check only")
}

// MARK: - Assertions (Apple: global functions, not isolated, messages as autoclosures)

public func XCTFail(_ message: String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssert(_ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertTrue(_ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertFalse(_ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertNil(_ expression: @autoclosure () throws -> Any?, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertNotNil(_ expression: @autoclosure () throws -> Any?, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertEqual<T: Equatable>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertEqual<T: FloatingPoint>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, accuracy: T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertEqual<T: Numeric>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, accuracy: T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertNotEqual<T: Equatable>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertIdentical(_ expression1: @autoclosure () throws -> AnyObject?, _ expression2: @autoclosure () throws -> AnyObject?, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertNotIdentical(_ expression1: @autoclosure () throws -> AnyObject?, _ expression2: @autoclosure () throws -> AnyObject?, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertGreaterThan<T: Comparable>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertGreaterThanOrEqual<T: Comparable>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertLessThan<T: Comparable>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertLessThanOrEqual<T: Comparable>(_ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

public func XCTAssertThrowsError<T>(_ expression: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line, _ errorHandler: (_ error: any Error) -> Void = { _ in }) {}

public func XCTAssertNoThrow<T>(_ expression: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) {}

/// Apple: `func XCTUnwrap<T>(_ expression: @autoclosure () throws -> T?, _ message: @autoclosure
/// () -> String = "", file: StaticString = #filePath, line: UInt = #line) throws -> T`.
public func XCTUnwrap<T>(_ expression: @autoclosure () throws -> T?, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) throws -> T {
    fatalError("XCTest stand-in: type-check only")
}
