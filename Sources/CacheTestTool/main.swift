// A helper process for tests that need a process of their own: registration against
// URLSession.shared (which exists once per process), and later several processes sharing one
// cache directory. Not a user-facing tool.
import CachingProtocol
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("CacheTestTool: \(message)\n".utf8))
    exit(2)
}

/// GETs `url` through URLSession.shared and prints the status and the Cache-Status header.
func fetchThroughSharedSession(_ url: URL) {
    let done = DispatchSemaphore(value: 0)
    URLSession.shared.dataTask(with: url) { data, response, error in
        if let http = response as? HTTPURLResponse {
            print("status=\(http.statusCode) bytes=\(data?.count ?? 0) cache-status=\(http.value(forHTTPHeaderField: "Cache-Status") ?? "none")")
        } else {
            print("error=\(String(describing: error))")
        }
        done.signal()
    }.resume()
    done.wait()
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "register":
    // register <early|shared-first|late> <cache-directory> <url>
    guard arguments.count == 4, let url = URL(string: arguments[3]) else { fail("usage: register early|shared-first|late DIR URL") }
    switch arguments[1] {
    case "shared-first":
        // The shared session is the first session of the process and exists before registration.
        _ = URLSession.shared.delegateQueue
    case "late":
        // Another session, then the shared session, both before registration.
        _ = URLSession(configuration: .default)
        _ = URLSession.shared.delegateQueue
    default:
        break
    }
    let cache = CachingURLCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: URL(fileURLWithPath: arguments[2]))
    let status = CachingURLProtocol.register(CachingConfiguration(cache: cache))
    print("registration=\(status)")
    fetchThroughSharedSession(url)
    fetchThroughSharedSession(url)
default:
    fail("unknown command \(arguments.first ?? "(none)")")
}
