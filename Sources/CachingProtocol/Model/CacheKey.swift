import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Cache keys: the method and the full URL, query included, fragment removed, scheme and host
/// lowercased. Never host and path alone (that served `?page=2` for `?page=1` in an older cache).
package enum CacheKey {
    /// The GET key of `request`'s URL, or nil without a URL.
    static func make(for request: URLRequest) -> String? {
        request.url.map { make(method: "GET", url: $0) }
    }

    package static func make(method: String, url: URL) -> String {
        var text = url.absoluteString
        // One pass over the bytes: where the fragment starts, where the authority ends, and
        // whether the scheme or authority has capitals (paths and queries are case-sensitive).
        var fragmentStart: Int?
        var authorityEnd: Int?
        var authorityHasCapitals = false
        text.withUTF8 { bytes in
            var slashes = 0
            for index in bytes.indices {
                let byte = bytes[index]
                if byte == UInt8(ascii: "#") {
                    fragmentStart = index
                    break
                }
                guard authorityEnd == nil else { continue }
                if byte == UInt8(ascii: "/") {
                    slashes += 1
                    if slashes == 3 { authorityEnd = index }
                } else if byte == UInt8(ascii: "?"), slashes >= 2 {
                    authorityEnd = index
                } else if byte >= 0x41, byte <= 0x5A {
                    authorityHasCapitals = true
                }
            }
        }
        if let fragmentStart {
            text = String(decoding: text.utf8.prefix(fragmentStart), as: UTF8.self)
        }
        if authorityHasCapitals {
            let end = text.utf8.index(text.utf8.startIndex, offsetBy: min(authorityEnd ?? text.utf8.count, text.utf8.count))
            text = text[..<end].lowercased() + text[end...]
        }
        return method + " " + text
    }
}
