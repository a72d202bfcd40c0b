// `swift run Demo`: the comparison on an embedded loopback origin. This file only parses the
// arguments and dispatches; everything else lives in DemoSupport (and is tested there).
import CacheBenchmarks
import DemoSupport
import Foundation

func writeError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

let command: DemoCommand
do {
    command = try DemoCommand.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    writeError("Demo: \((error as? UsageError)?.message ?? "\(error)")")
    writeError("Try 'Demo --help' for usage.")
    exit(DemoCommand.usageExitCode)
}

switch command {
case .help:
    print(DemoCommand.usage)
case .compare(let json, let network, let concurrent, let svg):
    let progress = ProgressReporter()
    do {
        let report = try await Comparison(network: network, concurrent: concurrent).run(progress: progress)
        progress.finish()
        if json {
            FileHandle.standardOutput.write(try ReportJSON.data(report) + Data("\n".utf8))
        } else {
            print(ReportText.render(report), terminator: "")
        }
        if let svg {
            // How to make the same picture again, printed in it.
            let command = (["swift run Demo"] + CommandLine.arguments.dropFirst()).joined(separator: " ")
            do {
                try ReportSVG.write(report, command: command, to: svg)
            } catch {
                writeError("Demo: cannot write the picture to \(svg.path): \(error)")
                exit(1)
            }
        }
    } catch {
        progress.finish()
        writeError("Demo: the comparison could not run: \(error)")
        exit(1)
    }
case .sessions:
    do {
        print(SessionsScenario.render(try await SessionsScenario().run()), terminator: "")
    } catch {
        writeError("Demo: the sessions scenario could not run: \(error)")
        exit(1)
    }
case .inspect(let directory, let json):
    exit(InspectCommand.run(directory: directory, json: json))
case .bench(let arguments):
    exit(BenchmarkCommand.run(arguments))
case .fetch(let options):
    let progress = ProgressReporter()
    let status = await FetchCommand.run(options, progress: progress)
    progress.finish()
    exit(status)
}
