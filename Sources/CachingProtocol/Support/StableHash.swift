import Foundation

/// A 64-bit non-cryptographic hash whose value is the same in every process and on every platform
/// (the XXH64 algorithm, implemented here from its public specification).
///
/// Swift's `Hasher` is seeded per process, so it cannot name files or fingerprint credentials
/// that must be recognised after a restart. This one can, and it runs at several GB/s, which
/// makes it cheap enough to checksum whole entry files on every disk read.
package enum StableHash {
    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    /// Hashes the bytes of `buffer` with `seed`.
    package static func hash(_ buffer: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = buffer.count
        guard let base = buffer.baseAddress, count > 0 else { return finalize(seed &+ prime5, length: 0) }
        var offset = 0
        var accumulator: UInt64

        if count >= 32 {
            var lane1 = seed &+ prime1 &+ prime2
            var lane2 = seed &+ prime2
            var lane3 = seed
            var lane4 = seed &- prime1
            let stripesEnd = count - 32
            while offset <= stripesEnd {
                lane1 = round(lane1, readWord(base, offset))
                lane2 = round(lane2, readWord(base, offset + 8))
                lane3 = round(lane3, readWord(base, offset + 16))
                lane4 = round(lane4, readWord(base, offset + 24))
                offset += 32
            }
            accumulator = rotate(lane1, 1) &+ rotate(lane2, 7) &+ rotate(lane3, 12) &+ rotate(lane4, 18)
            accumulator = merge(accumulator, lane1)
            accumulator = merge(accumulator, lane2)
            accumulator = merge(accumulator, lane3)
            accumulator = merge(accumulator, lane4)
        } else {
            accumulator = seed &+ prime5
        }

        accumulator &+= UInt64(count)
        return finish(accumulator, UnsafeRawBufferPointer(rebasing: buffer[offset...]))
    }

    /// Folds the last bytes (fewer than 32) into `accumulator` and mixes the result.
    private static func finish(_ accumulator: UInt64, _ tail: UnsafeRawBufferPointer) -> UInt64 {
        var accumulator = accumulator
        let count = tail.count
        guard let base = tail.baseAddress else { return avalanche(accumulator) }
        var offset = 0
        while offset + 8 <= count {
            accumulator ^= round(0, readWord(base, offset))
            accumulator = rotate(accumulator, 27) &* prime1 &+ prime4
            offset += 8
        }
        if offset + 4 <= count {
            let half = UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            accumulator ^= half &* prime1
            accumulator = rotate(accumulator, 23) &* prime2 &+ prime3
            offset += 4
        }
        while offset < count {
            accumulator ^= UInt64(base.load(fromByteOffset: offset, as: UInt8.self)) &* prime5
            accumulator = rotate(accumulator, 11) &* prime1
            offset += 1
        }
        return avalanche(accumulator)
    }

    /// The same hash computed over bytes that arrive in pieces: `combine` each piece in order,
    /// then `finalize`. For any split, the result equals `hash` of the bytes laid end to end, so
    /// a file can be checksummed as it is written from several buffers.
    struct Streaming {
        private var lanes: (UInt64, UInt64, UInt64, UInt64)
        private let seed: UInt64
        /// Bytes of an unfinished 32-byte stripe.
        private var pending = [UInt8]()
        private var length = 0

        init(seed: UInt64 = 0) {
            self.seed = seed
            lanes = (seed &+ prime1 &+ prime2, seed &+ prime2, seed, seed &- prime1)
            pending.reserveCapacity(32)
        }

        mutating func combine(_ buffer: UnsafeRawBufferPointer) {
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
            length += buffer.count
            var offset = 0
            if !pending.isEmpty {
                let taken = min(32 - pending.count, buffer.count)
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<taken]))
                offset = taken
                guard pending.count == 32 else { return }
                pending.withUnsafeBytes { stripe(UnsafeRawPointer($0.baseAddress!), at: 0) }
                pending.removeAll(keepingCapacity: true)
            }
            while offset + 32 <= buffer.count {
                stripe(base, at: offset)
                offset += 32
            }
            if offset < buffer.count {
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[offset...]))
            }
        }

        mutating func combine(_ data: Data) {
            data.withUnsafeBytes { combine($0) }
        }

        private mutating func stripe(_ base: UnsafeRawPointer, at offset: Int) {
            lanes.0 = round(lanes.0, readWord(base, offset))
            lanes.1 = round(lanes.1, readWord(base, offset + 8))
            lanes.2 = round(lanes.2, readWord(base, offset + 16))
            lanes.3 = round(lanes.3, readWord(base, offset + 24))
        }

        /// The hash of every byte combined so far (the state is left as it is).
        func finalize() -> UInt64 {
            var accumulator: UInt64
            if length >= 32 {
                accumulator = rotate(lanes.0, 1) &+ rotate(lanes.1, 7) &+ rotate(lanes.2, 12) &+ rotate(lanes.3, 18)
                accumulator = merge(accumulator, lanes.0)
                accumulator = merge(accumulator, lanes.1)
                accumulator = merge(accumulator, lanes.2)
                accumulator = merge(accumulator, lanes.3)
            } else {
                accumulator = seed &+ prime5
            }
            accumulator &+= UInt64(length)
            return pending.withUnsafeBytes { tail in StableHash.finish(accumulator, tail) }
        }
    }

    /// Hashes the UTF-8 bytes of `string`.
    static func hash(_ string: String, seed: UInt64 = 0) -> UInt64 {
        var string = string
        return string.withUTF8 { hash(UnsafeRawBufferPointer($0), seed: seed) }
    }

    /// A 128-bit digest: two hashes of `string` with different seeds.
    static func digest128(_ string: String) -> (high: UInt64, low: UInt64) {
        (hash(string, seed: 0), hash(string, seed: prime3))
    }

    /// `digest128` as 32 lowercase hex digits. Entry file names are these, so a file name never
    /// contains any part of a URL.
    static func hexDigest128(_ string: String) -> String {
        let digest = digest128(string)
        return hex(digest.high) + hex(digest.low)
    }

    /// `value` as 16 lowercase hex digits, zero-padded.
    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    @inline(__always)
    private static func readWord(_ base: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    private static func rotate(_ value: UInt64, _ bits: UInt64) -> UInt64 {
        (value << bits) | (value >> (64 - bits))
    }

    @inline(__always)
    private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
        rotate(accumulator &+ input &* prime2, 31) &* prime1
    }

    @inline(__always)
    private static func merge(_ accumulator: UInt64, _ lane: UInt64) -> UInt64 {
        (accumulator ^ round(0, lane)) &* prime1 &+ prime4
    }

    private static func finalize(_ accumulator: UInt64, length: Int) -> UInt64 {
        avalanche(accumulator &+ UInt64(length))
    }

    @inline(__always)
    private static func avalanche(_ value: UInt64) -> UInt64 {
        var hash = value
        hash ^= hash >> 33
        hash &*= prime2
        hash ^= hash >> 29
        hash &*= prime3
        hash ^= hash >> 32
        return hash
    }
}
