import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import XCTest
@testable import CachingProtocol

extension Data {
    /// `megabytes` MB quickly: a 1 MB pseudo-random block repeated, each copy stamped with its
    /// index in its first 8 bytes, so a missing, repeated or reordered megabyte shows up.
    static func largePattern(megabytes: Int) -> Data {
        var block = Data(count: 1 << 20)
        block.withUnsafeMutableBytes { buffer in
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15
            for index in stride(from: 0, to: buffer.count, by: 8) {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                buffer.storeBytes(of: state, toByteOffset: index, as: UInt64.self)
            }
        }
        var data = Data(capacity: megabytes << 20)
        for index in 0..<megabytes {
            var stamped = block
            stamped.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(index), toByteOffset: 0, as: UInt64.self) }
            data.append(stamped)
        }
        return data
    }
}
