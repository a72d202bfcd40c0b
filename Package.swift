// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "CachingProtocol",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "CachingProtocol", targets: ["CachingProtocol"]),
        .executable(name: "Demo", targets: ["Demo"]),
    ],
    targets: [
        // The library: Foundation (and FoundationNetworking on Linux) only.
        .target(name: "CachingProtocol"),
        // An in-process HTTP/1.1 origin on a random loopback port, shared by the Demo and the tests.
        .target(name: "LoopbackOrigin"),
        // The Demo's comparison (scenario, clients, runner, report) and its commands, testable in-process.
        .target(name: "DemoSupport", dependencies: ["CachingProtocol", "LoopbackOrigin"]),
        // `Demo bench`: the cache measured against a floor protocol, origins and Foundation's URLCache.
        .target(name: "CacheBenchmarks", dependencies: ["CachingProtocol", "LoopbackOrigin"]),
        .executableTarget(name: "Demo", dependencies: ["DemoSupport", "CacheBenchmarks"]),
        // A helper process for tests that need their own process (URLSession.shared, shared directories).
        .executableTarget(name: "CacheTestTool", dependencies: ["CachingProtocol"]),
        // Fuzz targets over the header parsers and the entry and index decoders: a libFuzzer
        // binary when built by Scripts/fuzz.sh, a corpus replay tool otherwise.
        .executableTarget(name: "Fuzz", dependencies: ["CachingProtocol"]),
        .testTarget(name: "CachingProtocolTests", dependencies: ["CachingProtocol", "LoopbackOrigin", "CacheTestTool", "Fuzz"]),
        .testTarget(name: "LoopbackOriginTests", dependencies: ["LoopbackOrigin"]),
        .testTarget(name: "DemoTests", dependencies: ["DemoSupport", "CacheBenchmarks", "CachingProtocol", "LoopbackOrigin"]),
    ],
    swiftLanguageModes: [.v6]
)
