import Foundation
import LoopbackOrigin

/// A network the Demo's embedded origin acts out (`Demo --network NAME`): a round trip and a
/// download bandwidth, each taken from a published throttling preset.
///
/// The origin waits the round trip before every response (two on a new connection) and sends
/// it no faster than the bandwidth (``LoopbackOrigin/SimulatedNetwork``), so each client pays
/// the same network and an answer from the cache pays none. A plain value type.
public struct NetworkProfile: Sendable, Equatable {
    /// What `--network` takes, e.g. `"4g"`.
    public var name: String
    /// Seconds from a request leaving the app to the first byte of its answer.
    public var roundTrip: TimeInterval
    /// Download bandwidth in bits per second; nil for none (loopback as it is).
    public var bitsPerSecond: Double?
    /// Where the numbers come from.
    public var source: String

    public init(name: String, roundTrip: TimeInterval, bitsPerSecond: Double?, source: String) {
        self.name = name
        self.roundTrip = roundTrip
        self.bitsPerSecond = bitsPerSecond
        self.source = source
    }

    /// WebPageTest's "Mobile 3G" connectivity profile: 1.6 Mbit/s down, 300 ms round trip.
    public static let threeG = NetworkProfile(
        name: "3g", roundTrip: 0.300, bitsPerSecond: 1_600_000,
        source: "WebPageTest's \"Mobile 3G\" profile (1.6 Mbps/768 Kbps 300ms RTT)")
    /// WebPageTest's "Mobile LTE" connectivity profile: 12 Mbit/s down, 70 ms round trip.
    public static let fourG = NetworkProfile(
        name: "4g", roundTrip: 0.070, bitsPerSecond: 12_000_000,
        source: "WebPageTest's \"Mobile LTE\" profile (12 Mbps/12 Mbps 70ms RTT)")
    /// Home Wi-Fi: the 30 Mbit/s of the Wi-Fi preset in Firefox's and Chrome's developer tools,
    /// with the 28 ms round trip of WebPageTest's "Cable" profile (the line behind the Wi-Fi;
    /// the developer tools' 2 ms counts the radio hop alone).
    public static let wifi = NetworkProfile(
        name: "wifi", roundTrip: 0.028, bitsPerSecond: 30_000_000,
        source: "Firefox/Chrome DevTools' \"Wi-Fi\" preset (30 Mbps down) with WebPageTest's \"Cable\" round trip (28ms RTT)")
    /// No added delay and no bandwidth limit: the origin answers as fast as loopback allows.
    public static let loopback = NetworkProfile(
        name: "loopback", roundTrip: 0, bitsPerSecond: nil, source: "no simulated network")

    /// Every profile, in the order the usage lists them.
    public static let all: [NetworkProfile] = [threeG, fourG, wifi, loopback]

    /// The Demo's default: a mobile network that a plain run fits in a few seconds.
    public static let `default` = fourG

    /// The profile called `name` (case-insensitive); throws a ``UsageError`` listing the valid
    /// names otherwise.
    public static func named(_ name: String) throws -> NetworkProfile {
        if let profile = all.first(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }) {
            return profile
        }
        throw UsageError("unknown network profile '\(name)' (valid: \(all.map(\.name).joined(separator: ", ")))")
    }

    /// What the origin acts out; nil for ``loopback``.
    public var simulated: SimulatedNetwork? {
        guard roundTrip > 0 || bitsPerSecond != nil else { return nil }
        return SimulatedNetwork(roundTrip: roundTrip, bytesPerSecond: bitsPerSecond.map { $0 / 8 })
    }

    /// "70 ms round trip, 12 Mbit/s down", or "no added delay, no bandwidth limit".
    public var summary: String {
        guard simulated != nil else { return "no added delay, no bandwidth limit" }
        let milliseconds = Int((roundTrip * 1000).rounded())
        let rate = bitsPerSecond.map { bits -> String in
            let megabits = bits / 1e6
            let text = megabits == megabits.rounded() ? String(Int(megabits)) : String(format: "%.1f", megabits)
            return "\(text) Mbit/s down"
        } ?? "no bandwidth limit"
        return "\(milliseconds) ms round trip, \(rate)"
    }
}
