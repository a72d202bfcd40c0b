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
        .executableTarget(name: "Demo", dependencies: ["DemoSupport"]),
        // A helper process for tests that need their own process (URLSession.shared, shared directories).
        .executableTarget(name: "CacheTestTool", dependencies: ["CachingProtocol"]),
        .testTarget(name: "CachingProtocolTests", dependencies: ["CachingProtocol", "LoopbackOrigin", "CacheTestTool"]),
        .testTarget(name: "LoopbackOriginTests", dependencies: ["LoopbackOrigin"]),
        .testTarget(name: "DemoTests", dependencies: ["DemoSupport", "CachingProtocol", "LoopbackOrigin"]),
    ],
    swiftLanguageModes: [.v6]
)
