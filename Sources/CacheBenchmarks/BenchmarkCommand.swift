import Foundation

/// `Demo bench [--json] [--quick] [--only group,group]`: runs the benchmarks and prints a table
/// (or JSON with a `results` array). Never fails because a target is missed: it is a measurement,
/// not a test.
public enum BenchmarkCommand {
    public static let usage = """
        usage: Demo bench [--json] [--quick] [--only GROUP[,GROUP…]] [--sizes N[,N…]] [--open N]
          groups: latency, miss, throughput, scaling, memory, storage, users (default: all)
          --quick  tiny iteration counts (a smoke run; numbers are meaningless)
          --sizes  entry counts for the scaling group (default 100,10000,100000)
          --open   entries in the disk cache the scaling group opens (default 100000; 0 skips it)
          --json   machine-readable output: {"results": [{"name", "median_us", "p99_us", "ratio", "target", …}]}
          Build with -c release for real numbers: swift run -c release Demo bench
        """

    /// Runs with `arguments` (after `bench`); returns the process exit status.
    public static func run(_ arguments: [String]) -> Int32 {
        var json = false
        var quick = false
        var only: Set<String> = []
        var sizes: [Int]?
        var openSize: Int?
        var remaining = arguments[...]
        if remaining.first == "--huge-side" {
            // A child of the miss group: `--huge-side SIDE --bytes N` (see `measureHugeGet`).
            let side = remaining.dropFirst().first ?? ""
            guard ["direct", "layered"].contains(side), remaining.dropFirst(2).first == "--bytes",
                  let bytes = remaining.dropFirst(3).first.flatMap({ Int($0) }), bytes > 0 else {
                return fail("--huge-side needs direct or layered and --bytes N")
            }
            do {
                print(try BenchmarkSuite.measureHugeGet(side: side, bytes: bytes))
                return 0
            } catch {
                return fail("\(error)")
            }
        }
        if remaining.first == "--fresh-side" {
            // A child of the miss group: `--fresh-side SIDE --bytes N` (see `measureFreshMiss`).
            let side = remaining.dropFirst().first ?? ""
            guard ["direct", "layered"].contains(side), remaining.dropFirst(2).first == "--bytes",
                  let bytes = remaining.dropFirst(3).first.flatMap({ Int($0) }), bytes > 0 else {
                return fail("--fresh-side needs direct or layered and --bytes N")
            }
            do {
                print(try BenchmarkSuite.measureFreshMiss(side: side, bytes: bytes))
                return 0
            } catch {
                return fail("\(error)")
            }
        }
        if remaining.first == "--launch-side" {
            // A child of the scaling group: `--launch-side SIDE --directory D --probe URL` (see `launch`).
            let values = Array(remaining)
            guard values.count == 6, ["foundation", "layered", "layered-empty"].contains(values[1]),
                  values[2] == "--directory", values[4] == "--probe" else {
                return fail("--launch-side needs foundation, layered or layered-empty, --directory D and --probe URL")
            }
            do {
                print(try BenchmarkSuite.measureLaunch(side: values[1], directory: values[3], probe: values[5]))
                return 0
            } catch {
                return fail("\(error)")
            }
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--json": json = true
            case "--quick": quick = true
            case "--only":
                guard let groups = remaining.popFirst() else { return fail("--only needs a list of groups") }
                only.formUnion(groups.split(separator: ",").map(String.init))
            case "--sizes":
                guard let list = remaining.popFirst(), case let parsed = list.split(separator: ",").compactMap({ Int($0) }),
                      !parsed.isEmpty, parsed.allSatisfy({ $0 > 0 }) else { return fail("--sizes needs positive counts, e.g. 100,100000") }
                sizes = parsed
            case "--open":
                guard let value = remaining.popFirst().flatMap({ Int($0) }), value >= 0 else { return fail("--open needs a count") }
                openSize = value
            case "--help", "-h":
                print(usage)
                return 0
            default:
                return fail("unknown bench option \(argument)")
            }
        }
        let known: Set = ["latency", "miss", "throughput", "scaling", "memory", "storage", "users"]
        if let unknown = only.subtracting(known).first { return fail("unknown group \(unknown)") }

        var scale = quick ? BenchmarkSuite.Scale.quick : .full
        if let sizes { scale.scalingSizes = sizes }
        if let openSize { scale.openSize = openSize }
        let suite = BenchmarkSuite(scale: scale) { message in
            FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
        }
        do {
            let results = try suite.run(only: only)
            print(json ? jsonReport(results) : table(results))
            return 0
        } catch {
            return fail("\(error)")
        }
    }

    private static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("Demo bench: \(message)\n".utf8))
        return 64
    }

    static func jsonReport(_ results: [BenchmarkResult]) -> String {
        struct Report: Encodable {
            let date: String
            let build: String
            let results: [BenchmarkResult]
        }
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let report = Report(date: ISO8601DateFormatter().string(from: Date()), build: build, results: results)
        return (try? String(decoding: encoder.encode(report), as: UTF8.self)) ?? "{}"
    }

    static func table(_ results: [BenchmarkResult]) -> String {
        func number(_ value: Double?) -> String {
            guard let value, value.isFinite else { return "–" }
            return value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
        }
        let header = ["benchmark", "median µs", "p99 µs", "ratio", "target", "met"]
        var rows = results.map { result in
            [result.name, number(result.medianMicroseconds), number(result.p99Microseconds), number(result.ratio),
             result.target ?? "", result.met.map { $0 ? "yes" : "NO" } ?? ""]
        }
        rows.insert(header, at: 0)
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        var lines = rows.map { row in
            row.indices.map { column in
                column == 0 ? row[column].padding(toLength: widths[column], withPad: " ", startingAt: 0)
                            : String(repeating: " ", count: widths[column] - row[column].count) + row[column]
            }.joined(separator: "  ")
        }
        lines.insert(String(repeating: "-", count: lines[0].count), at: 1)
        let notes = results.compactMap { result in result.note.map { "  \(result.name): \($0)" } }
        if !notes.isEmpty {
            lines.append("")
            lines.append("notes:")
            lines.append(contentsOf: notes)
        }
        return lines.joined(separator: "\n")
    }
}
