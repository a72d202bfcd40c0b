/// A random number generator that repeats its sequence for a seed (SplitMix64), so a stress run's
/// script — which loads, which faults, which cancellations — can be replayed from its seed.
/// A value: each thread draws from a generator of its own.
struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    /// A generator for one part of a run (a worker, the origin's script), independent of the
    /// others drawn from the same seed.
    init(seed: UInt64, stream: UInt64) {
        state = SeededGenerator.mix(seed ^ (stream &* 0x9E37_79B9_7F4A_7C15))
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// SplitMix64's finaliser: a well-spread 64-bit value for any input, also on its own as a
    /// stable hash of a number.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Whether an event of `percent` per cent happens.
    mutating func chance(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &self) < percent
    }
}
