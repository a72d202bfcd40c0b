import Foundation

/// Wall-clock samples of one benchmark, in nanoseconds.
struct Samples {
    private(set) var nanoseconds: [UInt64] = []

    init(capacity: Int = 0) {
        nanoseconds.reserveCapacity(capacity)
    }

    mutating func append(_ value: UInt64) {
        nanoseconds.append(value)
    }

    /// Times `body` once and records it.
    mutating func time(_ body: () throws -> Void) rethrows {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        append(DispatchTime.now().uptimeNanoseconds - start)
    }

    var medianMicroseconds: Double { percentile(0.5) / 1000 }
    var p99Microseconds: Double { percentile(0.99) / 1000 }

    private func percentile(_ fraction: Double) -> Double {
        guard !nanoseconds.isEmpty else { return .nan }
        let sorted = nanoseconds.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))
        return Double(sorted[index])
    }
}

/// One line of the report.
struct BenchmarkResult: Codable {
    var name: String
    var medianMicroseconds: Double
    var p99Microseconds: Double
    /// This result over its reference (the floor, a miss, Foundation…), where it has one.
    var ratio: Double?
    /// The target the ratio (or value) is held to, in words, e.g. "≤ 1.10".
    var target: String?
    /// Whether the target is met; nil where there is no target.
    var met: Bool?
    /// Extra figures: throughput, sizes, counts.
    var note: String?

    enum CodingKeys: String, CodingKey {
        case name
        case medianMicroseconds = "median_us"
        case p99Microseconds = "p99_us"
        case ratio, target, met, note
    }

    init(name: String, samples: Samples, ratio: Double? = nil, target: String? = nil, met: Bool? = nil, note: String? = nil) {
        self.name = name
        medianMicroseconds = samples.medianMicroseconds
        p99Microseconds = samples.p99Microseconds
        self.ratio = ratio
        self.target = target
        self.met = met
        self.note = note
    }

    init(name: String, medianMicroseconds: Double, p99Microseconds: Double, ratio: Double? = nil,
         target: String? = nil, met: Bool? = nil, note: String? = nil) {
        self.name = name
        self.medianMicroseconds = medianMicroseconds
        self.p99Microseconds = p99Microseconds
        self.ratio = ratio
        self.target = target
        self.met = met
        self.note = note
    }
}

/// Peak resident memory of this process since the last reset, from /proc (Linux); nil elsewhere.
enum ResidentMemory {
    /// Resets the peak (`VmHWM`) to the current resident size.
    static func resetPeak() {
        #if os(Linux)
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .ascii)
        #endif
    }

    static var peakBytes: Int? { field("VmHWM:") }
    static var currentBytes: Int? { field("VmRSS:") }

    private static func field(_ name: String) -> Int? {
        #if os(Linux)
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
        return kilobytes * 1024
        #else
        return nil
        #endif
    }
}
