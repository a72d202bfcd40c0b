// Fuzz targets over the package's parsers and decoders (see Scripts/fuzz.sh and
// Docs/reliability.md).
//
// Built by Scripts/fuzz.sh with `-sanitize=fuzzer,address -DFUZZING`, this is a libFuzzer
// binary: `main` hands over to libFuzzer's driver, which calls `LLVMFuzzerTestOneInput`. The
// group of targets comes from the environment variable FUZZ_GROUP (`http` or `storage`).
//
// In an ordinary build it is a replay tool: `Fuzz <file or directory>...` runs every input
// through its target (the group is the name of the directory holding the file), which is how
// the test suite replays the committed corpus; `Fuzz seeds <directory>` writes the seed corpus.
import CachingProtocol
import Foundation

/// Runs one input of `group`.
func runInput(group: String, _ bytes: UnsafeRawBufferPointer) {
    FuzzEntryPoints.run(group: group, input: bytes)
}

#if FUZZING
private let fuzzGroup: String = {
    let group = ProcessInfo.processInfo.environment["FUZZ_GROUP"] ?? ""
    guard FuzzEntryPoints.groups[group] != nil else {
        FileHandle.standardError.write(Data("FUZZ_GROUP must be one of \(FuzzEntryPoints.groups.keys.sorted())\n".utf8))
        exit(2)
    }
    return group
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    runInput(group: fuzzGroup, UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// libFuzzer's entry for programs with a `main` of their own (SwiftPM names the executable's
/// entry point itself, so libFuzzer's `main` cannot be used).
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

@main
enum FuzzDriver {
    static func main() {
        _ = fuzzGroup
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv, fuzzOneInput))
    }
}
#else
@main
enum Replay {
    static func main() throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "seeds", arguments.count == 2 {
            try writeSeeds(to: URL(fileURLWithPath: arguments[1]))
            return
        }
        guard !arguments.isEmpty else {
            FileHandle.standardError.write(Data("usage: Fuzz <file or directory>... | Fuzz seeds <directory>\n".utf8))
            exit(2)
        }
        var count = 0
        for argument in arguments {
            for file in inputs(at: URL(fileURLWithPath: argument)) {
                let group = file.deletingLastPathComponent().lastPathComponent
                guard FuzzEntryPoints.groups[group] != nil else { continue }
                let data = try Data(contentsOf: file)
                data.withUnsafeBytes { runInput(group: group, $0) }
                count += 1
            }
        }
        print("replayed \(count) inputs")
    }

    /// The regular files at `url` (itself, or everything below it), sorted.
    static func inputs(at url: URL) -> [URL] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [url] }
        let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: nil)
        var files: [URL] = []
        while let next = enumerator?.nextObject() as? URL {
            var nested: ObjCBool = false
            if FileManager.default.fileExists(atPath: next.path, isDirectory: &nested), !nested.boolValue, !next.lastPathComponent.hasPrefix(".") {
                files.append(next)
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    static func writeSeeds(to directory: URL) throws {
        for seed in FuzzEntryPoints.seeds() {
            let folder = directory.appendingPathComponent(seed.group, isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(seed.bytes).write(to: folder.appendingPathComponent("seed-" + seed.name))
        }
        print("wrote \(FuzzEntryPoints.seeds().count) seeds to \(directory.path)")
    }
}
#endif
