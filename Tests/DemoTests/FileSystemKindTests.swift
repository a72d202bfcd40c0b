import Foundation
import XCTest
#if os(macOS) || os(Linux)
@testable import CacheBenchmarks

/// The bench names the file system its cache directories are on (the mixed load's note, checked
/// in `BenchmarkSmokeTests`), since what a stored entry's file costs depends on it.
final class FileSystemKindTests: LoaderRulesTestCase {
    func testADirectorysFileSystemIsNamedFromItsMount() throws {
        #if os(Linux)
        // /proc is procfs on every Linux; a path not made yet is judged by the directory it goes in
        XCTAssertEqual(FileSystemKind.describe(URL(fileURLWithPath: "/proc")), "proc")
        XCTAssertEqual(FileSystemKind.describe(URL(fileURLWithPath: "/proc/self/not-there/nor-this")), "proc")
        #endif
        XCTAssertNotEqual(FileSystemKind.describe(FileManager.default.temporaryDirectory), "unknown")
    }

    func testMountinfosEscapesAreDecoded() {
        XCTAssertEqual(FileSystemKind.unescaped(#"/mnt/two\040words"#), "/mnt/two words")
        XCTAssertEqual(FileSystemKind.unescaped(#"/mnt/tab\011and\134slash"#), "/mnt/tab\tand\\slash")
        XCTAssertEqual(FileSystemKind.unescaped("/plain"), "/plain")
        XCTAssertEqual(FileSystemKind.unescaped(#"/cut\04"#), #"/cut\04"#)
    }
}
#endif
