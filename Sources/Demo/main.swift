import CacheBenchmarks
import Foundation

// Placeholder entry point until the Demo lands; `bench` already works.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "bench" {
    exit(BenchmarkCommand.run(Array(arguments.dropFirst())))
}
print("Demo")
