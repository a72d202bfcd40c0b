import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What file system a directory is on, in words, for the bench's notes: the layer creates a file
/// per stored entry, and what that costs depends on the file system. On Linux an ext4 without a
/// journal skips every inode freed in the last minutes when it allocates one (`fs/ext4/ialloc.c`,
/// `recently_deleted`), so there a run right after many deletions pays for them
/// (`Docs/benchmarks.md`, the mixed load).
enum FileSystemKind {
    /// "ext4 without a journal", "tmpfs", "apfs"…; "unknown" when the system does not say.
    static func describe(_ directory: URL) -> String {
        var existing = directory
        while !FileManager.default.fileExists(atPath: existing.path), existing.pathComponents.count > 1 {
            existing.deleteLastPathComponent()
        }
        #if os(Linux)
        guard let mount = mount(holding: existing.resolvingSymlinksInPath().path) else { return "unknown" }
        guard mount.type == "ext4" || mount.type == "ext3" else { return mount.type }
        // jbd2 lists each journal it runs as `<device>-<inode>`.
        let device = (mount.source as NSString).lastPathComponent
        guard let journals = try? FileManager.default.contentsOfDirectory(atPath: "/proc/fs/jbd2") else {
            return mount.type + " (journal unknown)"
        }
        return mount.type + (journals.contains { $0.hasPrefix(device + "-") } ? " with a journal" : " without a journal")
        #elseif canImport(Darwin)
        var info = statfs()
        guard statfs(existing.path, &info) == 0 else { return "unknown" }
        return withUnsafeBytes(of: info.f_fstypename) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #else
        return "unknown"
        #endif
    }

    #if os(Linux)
    /// The mount `/proc/self/mountinfo` lists with the longest mount point that holds `path`:
    /// its file system type and source (`/dev/vda`, `tmpfs`…).
    private static func mount(holding path: String) -> (type: String, source: String)? {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        var best: (point: String, type: String, source: String)?
        for line in table.split(separator: "\n") {
            // "<id> <parent> <major:minor> <root> <mount point> <options> [optional fields] - <type> <source> <options>"
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count > 4, let separator = fields.firstIndex(of: "-"), separator + 2 < fields.count else { continue }
            let point = unescaped(fields[4])
            let holds = point == "/" || path == point || path.hasPrefix(point + "/")
            if holds, point.count >= (best?.point.count ?? 0) {
                best = (point, fields[separator + 1], unescaped(fields[separator + 2]))
            }
        }
        return best.map { ($0.type, $0.source) }
    }
    #endif

    /// A mountinfo field with its octal escapes (`\040` for a space) decoded.
    static func unescaped(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var bytes: [UInt8] = []
        var characters = Array(field.utf8)[...]
        while let byte = characters.popFirst() {
            if byte == UInt8(ascii: "\\"), characters.count >= 3,
               let value = UInt8(String(decoding: characters.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                characters = characters.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
