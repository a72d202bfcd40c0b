// swift-tools-version: 6.0
import PackageDescription

/// The platforms that can start processes (Foundation's `Process`, signals, nginx).
let desktop: [Platform] = [.macOS, .linux]

let package = Package(
    name: "CachingProtocol",
    // No watchOS: Apple's URLProtocol reference says custom protocols cannot be defined there
    // (watchOS 2 and later), so the package would promise what cannot work.
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16)],
    products: [
        .library(name: "CachingProtocol", targets: ["CachingProtocol"]),
        .executable(name: "Demo", targets: ["Demo"]),
    ],
    targets: [
        // The library: Foundation (and FoundationNetworking on Linux) only. Its privacy manifest
        // (Docs/platforms.md, "Privacy manifest") goes into its resource bundle, where Xcode reads
        // it for the app's privacy report.
        .target(name: "CachingProtocol", resources: [.process("PrivacyInfo.xcprivacy")]),
        // An in-process HTTP/1.1 origin on a random loopback port, shared by the Demo and the tests.
        .target(name: "LoopbackOrigin"),
        // The Demo's comparison (scenario, clients, runner, report) and its commands, testable in-process.
        .target(name: "DemoSupport", dependencies: ["CachingProtocol", "LoopbackOrigin"]),
        // `Demo bench`: the cache measured against a floor protocol, origins and Foundation's URLCache.
        .target(name: "CacheBenchmarks", dependencies: ["CachingProtocol", "LoopbackOrigin"]),
        // The executables are command-line tools, built on macOS and Linux (Xcode has no
        // command-line-tool product for iOS or tvOS).
        .executableTarget(name: "Demo", dependencies: ["DemoSupport", "CacheBenchmarks"]),
        // A helper process for tests that need their own process (URLSession.shared, shared
        // directories, the stress run with its own origin).
        .executableTarget(name: "CacheTestTool", dependencies: ["CachingProtocol", "LoopbackOrigin"]),
        // Fuzz targets over the header parsers and the entry and index decoders: a libFuzzer
        // binary when built by Scripts/fuzz.sh, a corpus replay tool otherwise.
        .executableTarget(name: "Fuzz", dependencies: ["CachingProtocol"]),
        // Processes exist only on macOS and Linux: the helper executables, and CacheBenchmarks (it
        // starts nginx and child processes), are test dependencies there only; the tests that use
        // them are under `#if os(macOS) || os(Linux)` and skip with a message elsewhere.
        .testTarget(name: "CachingProtocolTests", dependencies: [
            "CachingProtocol", "LoopbackOrigin",
            .target(name: "CacheTestTool", condition: .when(platforms: desktop)),
            .target(name: "Fuzz", condition: .when(platforms: desktop)),
        ]),
        .testTarget(name: "LoopbackOriginTests", dependencies: ["LoopbackOrigin"]),
        .testTarget(name: "DemoTests", dependencies: [
            "DemoSupport", "CachingProtocol", "LoopbackOrigin",
            .target(name: "CacheBenchmarks", condition: .when(platforms: desktop)),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
