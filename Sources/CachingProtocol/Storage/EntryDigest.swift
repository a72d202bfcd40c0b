/// The 128-bit digest of a cache key that names its entry file and keys the disk index.
///
/// The file name is `StableHash.hexDigest128(key)`: 32 lowercase hex digits and nothing else, so
/// no part of a URL (a `..`, a percent-encoded slash) ever reaches the file system. The index
/// keeps the two 64-bit halves instead of the key, which keeps the snapshot small and fixed-size
/// per entry; the entry file holds the key and a read checks it.
package struct EntryDigest: Hashable, Sendable {
    var high: UInt64
    var low: UInt64

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The digest of `key`, equal to the halves of `StableHash.hexDigest128(key)` without
    /// building the hex string.
    package init(key: String) {
        (high, low) = StableHash.digest128(key)
    }

    /// The digest a file name spells, or nil when the name is not exactly 32 lowercase hex digits.
    package init?(fileName: String) {
        let utf8 = fileName.utf8
        guard utf8.count == 32 else { return nil }
        var halves: (UInt64, UInt64) = (0, 0)
        for (index, byte) in utf8.enumerated() {
            let nibble: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
            if index < 16 {
                halves.0 = halves.0 << 4 | nibble
            } else {
                halves.1 = halves.1 << 4 | nibble
            }
        }
        self.init(high: halves.0, low: halves.1)
    }

    /// The entry's file name: 32 lowercase hex digits.
    package var fileName: String {
        StableHash.hex(high) + StableHash.hex(low)
    }
}
