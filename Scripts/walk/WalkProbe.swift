import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

@_silgen_name("__llvm_profile_reset_counters") func llvmResetCounters()
@_silgen_name("__llvm_profile_write_file") func llvmWriteFile() -> Int32
@_silgen_name("__llvm_profile_set_filename") func llvmSetFilename(_ name: UnsafePointer<CChar>)

final class WalkProbe: CachingTestCase {
    /// Counts what `body` runs, after the disk work handed in before it has settled (unless
    /// `settlingFirst` is false: the disk worker is held, and settling would wait for it).
    private func capture(_ name: String, settlingFirst: Bool = true, _ body: () throws -> Void) rethrows {
        if settlingFirst { cache.waitUntilSettled() }
        llvmResetCounters()
        try body()
        let path = "/tmp/walk-\(name).profraw"
        path.withCString { llvmSetFilename($0) }
        _ = llvmWriteFile()
        "/tmp/walk-ignored.profraw".withCString { llvmSetFilename($0) }
    }

    func testWalkHit() throws {
        origin.handle("/feed") { _ in .text("feed", headers: [HTTPField("Cache-Control", "max-age=600")]) }
        _ = try loadWithCompletionHandler(URLRequest(url: origin.url("/feed")))
        _ = try loadWithCompletionHandler(URLRequest(url: origin.url("/feed")))
        try capture("hit") { _ = try loadWithCompletionHandler(URLRequest(url: origin.url("/feed"))) }
    }

    func testWalk304() throws {
        origin.handle("/etag") { request in
            if request.header("If-None-Match") == "\"v1\"" { return OriginResponse(status: 304, headers: [HTTPField("ETag", "\"v1\"")]) }
            return .text("etag", headers: [HTTPField("ETag", "\"v1\""), HTTPField("Cache-Control", "max-age=60")])
        }
        _ = try loadWithCompletionHandler(URLRequest(url: origin.url("/etag")))
        clock.advance(by: 120)
        cache.waitUntilSettled()
        // The 304's write lands on the disk worker `writeDelay` (5 ms) after the store: hold the
        // worker so that it waits for the third capture instead of landing between the two.
        let held = DispatchSemaphore(value: 0)
        cache.store.disk.worker.async { held.wait() }
        try capture("reval", settlingFirst: false) { _ = try loadWithCompletionHandler(URLRequest(url: origin.url("/etag"))) }
        try capture("writebehind", settlingFirst: false) {
            held.signal()
            cache.waitUntilSettled()
        }
    }
}
