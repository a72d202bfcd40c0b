import Foundation

/// What `Demo` was asked to do, parsed from its arguments.
///
/// A subcommand is one case here, one `case` in ``parse(_:)`` and one `case` in `main.swift`.
/// A subcommand that lives in a target of its own (which DemoSupport cannot see) takes its raw
/// arguments, e.g. `case bench([String])` and `case "bench": return .bench(Array(rest))`, and
/// parses them in its own target.
public enum DemoCommand: Equatable, Sendable {
    /// The comparison; `json` prints it as JSON instead of the table; `network` is the network
    /// the embedded origin acts out; `concurrent` runs the clients at the same time (default);
    /// `svg`, when set, is where the picture of the same run goes (``ReportSVG``).
    case compare(json: Bool, network: NetworkProfile = .default, concurrent: Bool = true, svg: URL? = nil)
    /// `fetch URL [--times N] [--cache-dir DIR]`.
    case fetch(FetchOptions)
    /// `sessions`: an image session and an API session side by side (``SessionsScenario``).
    case sessions
    /// `inspect DIR [--json]`: what a cache directory holds (``InspectCommand``).
    case inspect(directory: URL, json: Bool)
    /// `bench …`: the benchmarks, which parse their own arguments (CacheBenchmarks).
    case bench([String])
    /// `--help`: print ``usage`` and exit 0.
    case help

    /// Exit status for bad arguments (`EX_USAGE` from sysexits.h).
    public static let usageExitCode: Int32 = 64

    public static let usage = """
        usage: Demo [--network 3g|4g|wifi|loopback] [--json] [--sequential] [--svg FILE]
               Demo sessions
               Demo fetch URL [--times N] [--cache-dir DIR]
               Demo inspect DIR [--json]
               Demo bench [--json] [--quick] [--only GROUP,…]   (build with -c release)
               Demo --help

        Demo              replays one app session (launch, a pull-to-refresh burst, returns after
                          an hour, two days and eight days, on a simulated clock, then once more
                          offline) against an embedded origin behind a simulated network, through
                          a plain URLSession, an AFNetworking-style URLCache, CachingURLProtocol with
                          header-only rules (the .rfc9111 preset) and with its heuristic rules, and
                          prints what each cost: origin requests, bytes on the wire, the time the
                          app waited, and how many requests offline still got an answer.
          --network NAME  the network the origin acts out (round trip, download bandwidth):
                          3g        300 ms, 1.6 Mbit/s  (WebPageTest "Mobile 3G"; about 18 s)
                          4g         70 ms,  12 Mbit/s  (WebPageTest "Mobile LTE"; the default)
                          wifi       28 ms,  30 Mbit/s  (DevTools "Wi-Fi", WebPageTest "Cable" RTT)
                          loopback   no added delay
          --json          the same comparison as JSON on standard output.
          --sequential    run the clients one after another instead of at the same time (slower;
                          each has the machine to itself).
          --svg FILE      also write the run as a picture to FILE (SVG): per client, the time the
                          app waited stacked by phase, origin requests and bytes on the wire.
        sessions          an image session and an API session side by side, each with its own cache,
                          policy and rules, over the same day: origin requests and bytes per session.
        fetch URL         fetches URL through CachingURLProtocol (default heuristic policy) N times
                          and prints what each fetch did: hit, revalidated or fetched, status,
                          bytes and milliseconds.
          --times N       how many fetches (default 2, at least 1).
          --cache-dir DIR keep the cache in DIR (default: a temporary directory, removed afterwards).
        inspect DIR       lists what the cache directory DIR holds, largest first: size, age, fresh or
                          stale, pinned, URL. Changes nothing in DIR (an app may be using it).
          --json          the same as JSON on standard output.
        bench             measures hits against a floor URLProtocol, misses, throughput, scaling,
                          memory and the storage API against Foundation's URLCache ('Demo bench --help').
        --help, -h        this text.

        Exit status: 0 on success, 1 when a fetch fails or DIR holds no cache, 64 for bad arguments.
        """

    /// Parses the arguments after the program name; throws a ``UsageError``. (Untyped `throws`:
    /// `throws(UsageError)` crashes the Swift 6.3.1 compiler's SIL generation when this module
    /// is compiled for iOS, as `Scripts/apple-typecheck.sh` does.)
    public static func parse(_ arguments: [String]) throws -> DemoCommand {
        if arguments.first == "bench" { return .bench(Array(arguments.dropFirst())) }
        if arguments.contains("--help") || arguments.contains("-h") { return .help }
        guard let first = arguments.first else { return .compare(json: false) }
        let rest = arguments.dropFirst()
        switch first {
        case "fetch":
            return .fetch(try FetchOptions.parse(Array(rest)))
        case "help":
            return .help
        case "sessions":
            guard rest.isEmpty else { throw UsageError("sessions takes no arguments") }
            return .sessions
        case "compare":
            return try parseCompare(Array(rest))
        case "inspect":
            let json = rest.contains("--json")
            let others = rest.filter { $0 != "--json" }
            if let option = others.first(where: { $0.hasPrefix("-") }) { throw UsageError("unknown option '\(option)' for inspect") }
            guard others.count == 1, let path = others.first else {
                throw UsageError(others.isEmpty ? "inspect needs a cache directory" : "inspect takes one directory")
            }
            return .inspect(directory: URL(fileURLWithPath: path, isDirectory: true), json: json)
        default:
            if first.hasPrefix("-") { return try parseCompare(arguments) }
            throw UsageError("unknown command '\(first)'")
        }
    }

    private static func parseCompare(_ arguments: [String]) throws -> DemoCommand {
        var json = false
        var network = NetworkProfile.default
        var concurrent = true
        var svg: URL?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--json":
                json = true
            case "--sequential":
                concurrent = false
            case "--network":
                index += 1
                guard index < arguments.count, !arguments[index].hasPrefix("-") else {
                    throw UsageError("--network needs a profile (valid: \(NetworkProfile.all.map(\.name).joined(separator: ", ")))")
                }
                network = try NetworkProfile.named(arguments[index])
            case "--svg":
                index += 1
                guard index < arguments.count, !arguments[index].hasPrefix("-") else {
                    throw UsageError("--svg needs a file to write")
                }
                svg = URL(fileURLWithPath: arguments[index])
            default:
                if argument.hasPrefix("--network=") {
                    network = try NetworkProfile.named(String(argument.dropFirst("--network=".count)))
                } else if argument.hasPrefix("--svg=") {
                    let path = String(argument.dropFirst("--svg=".count))
                    guard !path.isEmpty else { throw UsageError("--svg needs a file to write") }
                    svg = URL(fileURLWithPath: path)
                } else {
                    throw UsageError(argument.hasPrefix("-") ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
                }
            }
            index += 1
        }
        return .compare(json: json, network: network, concurrent: concurrent, svg: svg)
    }
}

/// Options of `Demo fetch`.
public struct FetchOptions: Equatable, Sendable {
    public var url: URL
    public var times: Int
    public var cacheDirectory: URL?

    public init(url: URL, times: Int = 2, cacheDirectory: URL? = nil) {
        self.url = url
        self.times = times
        self.cacheDirectory = cacheDirectory
    }

    static func parse(_ arguments: [String]) throws -> FetchOptions {
        var url: URL?
        var times = 2
        var cacheDirectory: URL?
        var index = 0
        func value(of option: String) throws -> String {
            index += 1
            guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                throw UsageError("\(option) needs a value")
            }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--times":
                let text = try value(of: "--times")
                guard let number = Int(text), number >= 1 else {
                    throw UsageError("--times needs a whole number of at least 1, not '\(text)'")
                }
                times = number
            case "--cache-dir":
                cacheDirectory = URL(fileURLWithPath: try value(of: "--cache-dir"), isDirectory: true)
            default:
                if argument.hasPrefix("-") { throw UsageError("unknown option '\(argument)' for fetch") }
                guard url == nil else { throw UsageError("fetch takes one URL, got a second: '\(argument)'") }
                guard let parsed = URL(string: argument), let scheme = parsed.scheme?.lowercased(),
                      scheme == "http" || scheme == "https", parsed.host != nil
                else {
                    throw UsageError("'\(argument)' is not an http or https URL")
                }
                url = parsed
            }
            index += 1
        }
        guard let url else { throw UsageError("fetch needs a URL") }
        return FetchOptions(url: url, times: times, cacheDirectory: cacheDirectory)
    }
}

/// Bad arguments: one line for the user, then a hint to `--help`.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
