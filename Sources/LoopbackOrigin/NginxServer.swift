// nginx runs as a child process, which only desktop systems allow: on iOS, tvOS and watchOS
// (where `Process` does not exist) the in-process `LoopbackOrigin` is the only origin.
#if os(Linux) || os(macOS)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// One line of an ``NginxServer``'s access log. A value type, safe to share between threads.
///
/// nginx writes a line after it has sent the response, so a client may see the response a
/// moment before the line exists: read the log with ``NginxServer/accessLog(waitingFor:timeout:)``.
public struct NginxLogLine: Sendable, Equatable {
    /// The request method, e.g. `"GET"`.
    public var method: String
    /// The request-target as sent, query included, e.g. `"/feed.json?page=2"`.
    public var uri: String
    /// The response status, e.g. 304.
    public var status: Int
    /// Body bytes nginx sent (0 for a 304 or a HEAD).
    public var bodyBytes: Int
    /// The request's `If-None-Match` value, nil when it had none.
    public var ifNoneMatch: String?
    /// The request's `If-Modified-Since` value, nil when it had none.
    public var ifModifiedSince: String?
    /// nginx's serial number of the TCP connection: equal numbers mean a reused connection.
    public var connection: Int
    /// Which request this was on its connection: 1 for the first.
    public var connectionRequest: Int

    /// Creates a line; the parser uses it, and tests may to build expected values.
    public init(
        method: String, uri: String, status: Int, bodyBytes: Int, ifNoneMatch: String? = nil,
        ifModifiedSince: String? = nil, connection: Int = 0, connectionRequest: Int = 0
    ) {
        self.method = method
        self.uri = uri
        self.status = status
        self.bodyBytes = bodyBytes
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
        self.connection = connection
        self.connectionRequest = connectionRequest
    }

    /// ``uri`` without its query.
    public var path: String {
        uri.firstIndex(of: "?").map { String(uri[..<$0]) } ?? uri
    }

    /// The `log_format` that ``init(parsing:)`` reads: tab-separated (nginx escapes any tab or
    /// quote inside a value as `\xHH`, so a tab always separates fields).
    static let logFormat =
        "'$request_method\\t$request_uri\\t$status\\t$body_bytes_sent\\t$http_if_none_match\\t"
        + "$http_if_modified_since\\t$connection\\t$connection_requests'"

    /// Parses one line written with ``logFormat``; nil for anything else.
    init?(parsing line: String) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map { Self.unescape(String($0)) }
        guard fields.count == 8, let status = Int(fields[2]), let bodyBytes = Int(fields[3]) else { return nil }
        self.init(
            method: fields[0], uri: fields[1], status: status, bodyBytes: bodyBytes,
            ifNoneMatch: fields[4] == "-" ? nil : fields[4],
            ifModifiedSince: fields[5] == "-" ? nil : fields[5],
            connection: Int(fields[6]) ?? 0, connectionRequest: Int(fields[7]) ?? 0)
    }

    /// Undoes nginx's default log escaping: `\xHH` for `"`, `\`, controls and non-ASCII bytes.
    static func unescape(_ text: String) -> String {
        guard text.contains("\\x") else { return text }
        var bytes: [UInt8] = []
        let utf8 = Array(text.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count, utf8[index + 1] == UInt8(ascii: "x"),
               let value = UInt8(String(decoding: utf8[(index + 2)...(index + 3)], as: UTF8.self), radix: 16) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A real nginx serving static files from a temporary directory on 127.0.0.1, for integration
/// tests that need genuine `ETag` and `Last-Modified` handling.
///
/// `init` writes an `nginx.conf` (single process, `daemon off`, `etag on`, keep-alive, a
/// minimal `types {}` block, pid file, logs and temp paths all inside the temporary
/// directory), starts nginx with Foundation's `Process` and waits until it accepts
/// connections. It works as root and as an ordinary user. ``stop()`` (also run by `deinit`
/// and, for servers still running, at process exit) terminates nginx and deletes the
/// directory; a later `init` also cleans up after a test process that was killed outright.
///
/// Thread-safe: every member may be called from any thread.
public final class NginxServer: Sendable {
    private struct State {
        var process: Process?
    }

    /// The nginx executable that ``init()`` will run: the path in the environment variable
    /// `LOOPBACK_NGINX` if set (and only that), else the first `nginx` on `PATH`, else the
    /// usual install locations (`/usr/sbin/nginx` for Debian's package); nil when none exists.
    public static var executableURL: URL? {
        let environment = ProcessInfo.processInfo.environment
        if let override = environment["LOOPBACK_NGINX"], !override.isEmpty {
            return FileManager.default.isExecutableFile(atPath: override) ? URL(fileURLWithPath: override) : nil
        }
        var candidates: [String] = []
        if let path = environment["PATH"] {
            candidates += path.split(separator: ":").map { "\($0)/nginx" }
        }
        candidates += ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx", "/opt/homebrew/bin/nginx"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map { URL(fileURLWithPath: $0) }
    }

    /// Whether an nginx executable can be found (see ``executableURL``).
    public static var isInstalled: Bool { executableURL != nil }

    /// A certificate and its private key, PEM files, for nginx to serve HTTPS with.
    public struct TLSFiles: Sendable, Equatable {
        /// The server's certificate (a self-signed one does for tests whose delegate pins it).
        public var certificate: URL
        /// The certificate's private key, unencrypted.
        public var privateKey: URL

        public init(certificate: URL, privateKey: URL) {
            self.certificate = certificate
            self.privateKey = privateKey
        }

        /// A new self-signed certificate for `127.0.0.1` (RSA 2048, SHA-256, valid for two days)
        /// and its key, written to `directory` as `certificate.pem` and `key.pem` by the
        /// `openssl` command-line tool (`/usr/bin/openssl` on macOS and Linux, else the first on
        /// `PATH`). Made at run time, so no key is kept in the repository and none expires there.
        /// - Throws: ``LoopbackServerError`` when `openssl` is missing or fails.
        public static func selfSigned(in directory: URL) throws -> TLSFiles {
            let files = TLSFiles(certificate: directory.appendingPathComponent("certificate.pem"),
                                 privateKey: directory.appendingPathComponent("key.pem"))
            let candidates = ["/usr/bin/openssl"]
                + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/openssl" }
            guard let openssl = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
                throw LoopbackServerError("make a test certificate", detail: "no openssl executable (/usr/bin, PATH)")
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: openssl)
            process.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
                                 "-subj", "/CN=127.0.0.1", "-keyout", files.privateKey.path, "-out", files.certificate.path]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try process.run()
            } catch {
                throw LoopbackServerError("run \(openssl) req -x509", detail: "\(error)")
            }
            process.waitUntilExit()
            guard process.terminationStatus == 0, (try? files.certificateDER()) != nil else {
                throw LoopbackServerError("run \(openssl) req -x509", detail: "exit status \(process.terminationStatus)")
            }
            return files
        }

        /// The certificate's DER bytes (what a delegate that pins it compares with the server's).
        public func certificateDER() throws -> Data {
            let pem = try String(contentsOf: certificate, encoding: .utf8)
            let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            guard pem.contains("-----BEGIN CERTIFICATE-----"), let der = Data(base64Encoded: body) else {
                throw LoopbackServerError("read \(certificate.path)", detail: "not a PEM certificate")
            }
            return der
        }
    }

    /// The TCP port nginx listens on (127.0.0.1 only).
    public let port: Int
    /// `http://127.0.0.1:<port>`, or `https://127.0.0.1:<port>` when nginx serves TLS.
    public let baseURL: URL
    /// The directory served at `/`; put files there with ``write(_:to:modified:)``.
    public let documentRoot: URL
    /// The temporary directory holding the configuration, logs and ``documentRoot``.
    public let directory: URL

    private let state: LockedBox<State>

    private static let directoryPrefix = "loopback-nginx-"

    /// Starts nginx on a free port and waits (at most 5 seconds) until it accepts connections.
    /// - Parameter tls: when given, nginx serves HTTPS with this certificate and key instead of
    ///   plain HTTP (default nil).
    /// - Throws: ``LoopbackServerError`` if nginx is not installed, exits during start-up (the
    ///   error includes its error log), or does not answer in time.
    public init(tls: TLSFiles? = nil) throws {
        guard let executable = Self.executableURL else {
            throw LoopbackServerError(
                "start nginx", detail: "no nginx executable ($LOOPBACK_NGINX, PATH, /usr/sbin); install nginx-light")
        }
        Self.removeStaleServers()
        let fileManager = FileManager.default
        directory = fileManager.temporaryDirectory
            .appendingPathComponent(Self.directoryPrefix + UUID().uuidString, isDirectory: true)
        documentRoot = directory.appendingPathComponent("root", isDirectory: true)
        do {
            for sub in ["root", "logs", "temp"] {
                try fileManager.createDirectory(
                    at: directory.appendingPathComponent(sub, isDirectory: true), withIntermediateDirectories: true)
            }
            try Data("\(getpid())".utf8).write(to: directory.appendingPathComponent("owner.pid"))
        } catch {
            try? fileManager.removeItem(at: directory)
            throw LoopbackServerError("create nginx directory \(directory.path)", detail: "\(error)")
        }

        var lastError: LoopbackServerError?
        for _ in 0..<5 {
            let port: Int
            do {
                port = try Self.freePort()
            } catch {
                lastError = error as? LoopbackServerError
                continue
            }
            do {
                let process = try Self.launch(executable: executable, directory: directory, documentRoot: documentRoot,
                                              port: port, tls: tls)
                self.port = port
                baseURL = URL(string: "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)")!
                state = LockedBox(State(process: process))
                return
            } catch let error as LoopbackServerError {
                lastError = error
                if !error.detail.contains("Address already in use") { break }  // else: lost a port race; try another
            }
        }
        try? fileManager.removeItem(at: directory)
        throw lastError ?? LoopbackServerError("start nginx")
    }

    deinit {
        stop()
    }

    /// The URL for a path and optional query: `url("/a.json?x=1")`. A missing leading `/` is added.
    public func url(_ pathAndQuery: String) -> URL {
        let suffix = pathAndQuery.hasPrefix("/") ? pathAndQuery : "/" + pathAndQuery
        return URL(string: baseURL.absoluteString + suffix)!
    }

    /// Whether the nginx process is still running.
    public var isRunning: Bool {
        state.withLock { $0.process?.isRunning ?? false }
    }

    /// The nginx process ID; nil after ``stop()``.
    public var processIdentifier: Int32? {
        state.withLock { $0.process?.processIdentifier }
    }

    /// Writes a static file at `relativePath` under ``documentRoot`` (creating directories),
    /// replacing any earlier file. `modified` sets the file's modification time, which nginx
    /// sends as `Last-Modified` (to the second) and uses with the size for its `ETag`;
    /// default nil leaves it at the time of writing.
    public func write(_ data: Data, to relativePath: String, modified: Date? = nil) throws {
        let file = try fileURL(relativePath)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file, options: .atomic)
        if let modified {
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: file.path)
        }
    }

    /// Deletes the file at `relativePath`; nginx answers 404 for it from then on.
    public func remove(_ relativePath: String) throws {
        try FileManager.default.removeItem(at: try fileURL(relativePath))
    }

    private func fileURL(_ relativePath: String) throws -> URL {
        let trimmed = relativePath.drop { $0 == "/" }
        guard !trimmed.isEmpty, !trimmed.split(separator: "/").contains("..") else {
            throw LoopbackServerError("write \(relativePath)", detail: "the path must stay inside the document root")
        }
        return documentRoot.appendingPathComponent(String(trimmed))
    }

    /// The access log so far, parsed, oldest first. nginx logs a request just after sending its
    /// response, so the newest request may not be there yet; see ``accessLog(waitingFor:timeout:)``.
    public func accessLog() -> [NginxLogLine] {
        let file = directory.appendingPathComponent("logs/access.log")
        guard let data = try? Data(contentsOf: file) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { NginxLogLine(parsing: String($0)) }
    }

    /// The access log once it has at least `count` lines, or as it is after `timeout` seconds
    /// (default 5). Polls the file on the calling thread.
    public func accessLog(waitingFor count: Int, timeout: TimeInterval = 5) -> [NginxLogLine] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let lines = accessLog()
            if lines.count >= count || Date() >= deadline { return lines }
            usleep(2_000)
        }
    }

    /// nginx's error log so far, for diagnosing a failing test.
    public func errorLog() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("logs/error.log"), encoding: .utf8)) ?? ""
    }

    /// Terminates nginx (SIGTERM, then SIGKILL if it has not exited within 5 seconds), waits
    /// for it, and deletes ``directory``. Idempotent; later requests are refused.
    public func stop() {
        guard let process = state.withLock({ s -> Process? in
            defer { s.process = nil }
            return s.process
        }) else { return }
        Self.terminate(process)
        Self.registry.withLock { _ = $0.removeValue(forKey: process.processIdentifier) }
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: - Starting

    private static func freePort() throws -> Int {
        let (fd, port) = try POSIXSocket.listen(port: 0)
        close(fd)
        return port
    }

    private static func configuration(directory: URL, documentRoot: URL, port: Int, tls: TLSFiles?) -> String {
        let path = directory.path
        var userLine = ""
        if geteuid() == 0, let user = getpwuid(geteuid()), let group = getgrgid(getegid()) {
            // Only meaningful with a master process; stated so that a root run never falls
            // back to "nobody", who could not read this private directory.
            userLine = "user \(String(cString: user.pointee.pw_name)) \(String(cString: group.pointee.gr_name));\n"
        }
        let tlsLines = tls.map { "\n        ssl_certificate \($0.certificate.path);\n        ssl_certificate_key \($0.privateKey.path);" } ?? ""
        return """
            # Written by LoopbackOrigin.NginxServer for one test run.
            \(userLine)daemon off;
            master_process off;
            worker_processes 1;
            pid \(path)/nginx.pid;
            error_log \(path)/logs/error.log info;

            events {
                worker_connections 256;
            }

            http {
                types {
                    text/html html htm;
                    text/plain txt;
                    text/css css;
                    application/javascript js;
                    application/json json;
                    application/xml xml;
                    image/png png;
                    image/jpeg jpg jpeg;
                    image/gif gif;
                    image/svg+xml svg;
                }
                default_type application/octet-stream;

                log_format loopback \(NginxLogLine.logFormat);
                access_log \(path)/logs/access.log loopback;

                client_body_temp_path \(path)/temp/client_body;
                proxy_temp_path \(path)/temp/proxy;
                fastcgi_temp_path \(path)/temp/fastcgi;
                uwsgi_temp_path \(path)/temp/uwsgi;
                scgi_temp_path \(path)/temp/scgi;

                sendfile off;
                etag on;
                if_modified_since exact;
                keepalive_timeout 60s;
                keepalive_requests 10000;
                server_tokens off;

                server {
                    listen 127.0.0.1:\(port)\(tls == nil ? "" : " ssl");
                    server_name localhost;\(tlsLines)
                    root \(documentRoot.path);
                    location / {
                    }
                }
            }

            """
    }

    private static func launch(executable: URL, directory: URL, documentRoot: URL, port: Int, tls: TLSFiles?) throws -> Process {
        let path = directory.path
        let configFile = directory.appendingPathComponent("nginx.conf")
        let outputFile = directory.appendingPathComponent("logs/nginx.out")
        do {
            try Data(configuration(directory: directory, documentRoot: documentRoot, port: port, tls: tls).utf8)
                .write(to: configFile)
            try Data().write(to: outputFile)
            // A failed earlier attempt's logs would confuse the error message.
            try? Data().write(to: directory.appendingPathComponent("logs/error.log"))
        } catch {
            throw LoopbackServerError("write nginx.conf", detail: "\(error)")
        }
        let output = try FileHandle(forWritingTo: outputFile)
        defer { try? output.close() }

        let process = Process()
        process.executableURL = executable
        process.arguments = ["-p", path + "/", "-c", configFile.path, "-e", path + "/logs/error.log"]
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        do {
            try runWithSignalsUnblocked(process)
        } catch {
            throw LoopbackServerError("run \(executable.path)", detail: "\(error)")
        }
        registerForExitCleanup(pid: process.processIdentifier, directory: path)

        // Wait until nginx has written its pid file (it listens a moment before) and accepts
        // connections, or exits, or 5 seconds pass.
        let pidFile = directory.appendingPathComponent("nginx.pid")
        let deadline = Date().addingTimeInterval(5)
        while true {
            if let pidText = try? String(contentsOf: pidFile, encoding: .utf8),
               Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)) == process.processIdentifier,
               let fd = POSIXSocket.connect(port: port) {
                close(fd)
                return process
            }
            if !process.isRunning || Date() >= deadline {
                let exited = !process.isRunning
                terminate(process)
                registry.withLock { _ = $0.removeValue(forKey: process.processIdentifier) }
                let log = (try? String(contentsOf: directory.appendingPathComponent("logs/error.log"), encoding: .utf8)) ?? ""
                let out = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
                let detail = (exited ? "nginx exited during start-up" : "nginx did not accept connections within 5 s")
                    + " on port \(port). Output: \(out.suffix(1_000)) Error log: \(log.suffix(2_000))"
                throw LoopbackServerError("start nginx", detail: detail)
            }
            usleep(5_000)
        }
    }

    /// Runs `process` from a fresh thread that does not block nginx's signals.
    ///
    /// A child inherits the signal mask of the thread that spawns it, and `Process` does not
    /// reset it. Swift concurrency and Dispatch worker threads block nearly every signal, and a
    /// single-process nginx never unblocks them, so one started from an `async` test would
    /// ignore SIGTERM.
    private static func runWithSignalsUnblocked(_ process: Process) throws {
        let failure = LockedBox<(any Error)?>(nil)
        let launched = DispatchSemaphore(value: 0)
        let box = LockedBox(process)
        let thread = Thread {
            var signals = sigset_t()
            sigemptyset(&signals)
            for signal in [SIGTERM, SIGQUIT, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD, SIGALRM, SIGIO, SIGPIPE] {
                sigaddset(&signals, signal)
            }
            pthread_sigmask(SIG_UNBLOCK, &signals, nil)
            do {
                try box.withLock { try $0.run() }
            } catch {
                failure.withLock { $0 = error }
            }
            launched.signal()
        }
        thread.name = "NginxServer launcher"
        thread.start()
        launched.wait()
        if let error = failure.withLock({ $0 }) { throw error }
    }

    // MARK: - Stopping and cleaning up

    private static func terminate(_ process: Process) {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
        }
        if !waitForExit(process, timeout: 5) {
            kill(process.processIdentifier, SIGKILL)
            _ = waitForExit(process, timeout: 5)
        }
    }

    private static func waitForExit(_ process: Process, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    /// Running servers by nginx pid, with their directories, for the exit handler.
    private static let registry = LockedBox<[Int32: String]>([:])

    private static let installExitHandler: Void = {
        atexit {
            let servers = NginxServer.registry.withLock { s -> [Int32: String] in
                defer { s.removeAll() }
                return s
            }
            for (pid, directory) in servers {
                kill(pid, SIGKILL)
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
    }()

    private static func registerForExitCleanup(pid: Int32, directory: String) {
        _ = installExitHandler
        registry.withLock { $0[pid] = directory }
    }

    /// Kills the nginx of any earlier test process that died without stopping its servers
    /// (its owner pid no longer exists), identified by the pid file in its directory and
    /// checked against that process's command line, and deletes those directories.
    private static func removeStaleServers() {
        let fileManager = FileManager.default
        let parent = fileManager.temporaryDirectory
        guard let names = try? fileManager.contentsOfDirectory(atPath: parent.path) else { return }
        for name in names where name.hasPrefix(directoryPrefix) {
            let directory = parent.appendingPathComponent(name)
            guard let ownerText = try? String(contentsOf: directory.appendingPathComponent("owner.pid"), encoding: .utf8),
                  let owner = Int32(ownerText.trimmingCharacters(in: .whitespacesAndNewlines))
            else { continue }
            if kill(owner, 0) == 0 || errno == EPERM { continue }  // its test process is alive
            if let pidText = try? String(contentsOf: directory.appendingPathComponent("nginx.pid"), encoding: .utf8),
               let pid = Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)),
               isNginx(pid: pid, using: directory.path) {
                kill(pid, SIGKILL)
            }
            try? fileManager.removeItem(at: directory)
        }
    }

    private static func isNginx(pid: Int32, using directory: String) -> Bool {
        #if os(Linux)
        guard let commandLine = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")) else { return false }
        let text = String(decoding: commandLine.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
        return text.contains("nginx") && text.contains(directory)
        #else
        return false
        #endif
    }
}
#endif
