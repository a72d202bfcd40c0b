import Foundation

/// One byte range a request asks for (`Range: bytes=…`, RFC 9110 §14.1.2), the form the cache
/// answers from a complete stored response (RFC 9111 §3.4). Several ranges, other units and
/// anything malformed are not this type: such requests go to the origin as they are.
package struct ByteRange: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// `first-last`, or `first-` when `last` is nil.
        case from(first: Int, last: Int?)
        /// `-length`: the last `length` bytes.
        case suffix(length: Int)
    }

    package let kind: Kind

    /// The range a `Range` field value asks for, or nil when it is not a single byte range.
    /// Reads the value's bytes directly (no Foundation trimming: this runs in `canInit`).
    package init?(_ value: String) {
        let text = value[...].trimmingOWS
        guard let equals = text.utf8.firstIndex(of: UInt8(ascii: "=")) else { return nil }
        let unit = text[..<equals].trimmingOWS.utf8
        guard unit.count == 5, zip(unit, "bytes".utf8).allSatisfy({ asciiLowercased($0) == $1 }) else { return nil }
        let spec = text[text.utf8.index(after: equals)...].trimmingOWS
        guard !spec.utf8.contains(UInt8(ascii: ",")), let dash = spec.utf8.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let first = spec[..<dash].trimmingOWS
        let last = spec[spec.utf8.index(after: dash)...].trimmingOWS
        func number(_ digits: Substring) -> Int? {
            guard !digits.isEmpty, digits.utf8.count <= 18 else { return nil }
            var result = 0
            for digit in digits.utf8 {
                guard (0x30...0x39).contains(digit) else { return nil }
                result = result * 10 + Int(digit - 0x30)
            }
            return result
        }
        if first.isEmpty {
            guard let length = number(last), length > 0 else { return nil }
            kind = .suffix(length: length)
        } else {
            guard let start = number(first) else { return nil }
            if last.isEmpty {
                kind = .from(first: start, last: nil)
            } else {
                guard let end = number(last), end >= start else { return nil }
                kind = .from(first: start, last: end)
            }
        }
    }

    /// The bytes `first...last` this range selects from a representation of `length` bytes, or
    /// nil when it selects none (unsatisfiable: the origin answers 416 for it).
    func bounds(in length: Int) -> ClosedRange<Int>? {
        guard length > 0 else { return nil }
        switch kind {
        case .from(let first, let last):
            guard first < length else { return nil }
            return first...min(last ?? length - 1, length - 1)
        case .suffix(let suffix):
            return max(0, length - suffix)...(length - 1)
        }
    }
}

/// The part of a representation a `206` response carries (`Content-Range: bytes first-last/length`,
/// RFC 9110 §14.4). Only a satisfied range with a known complete length is this type; `*` for the
/// length, other units and anything malformed are not.
package struct ContentRange: Sendable, Equatable {
    package let first: Int
    package let last: Int
    /// The length of the whole representation.
    package let completeLength: Int

    package init?(_ value: String) {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes " else { return nil }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard let dash = spec.firstIndex(of: "-"), let slash = spec.firstIndex(of: "/"), dash < slash else { return nil }
        func number(_ text: Substring) -> Int? {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return Int(text)
        }
        guard let first = number(spec[..<dash]), let last = number(spec[spec.index(after: dash)..<slash]),
              let length = number(spec[spec.index(after: slash)...]), first <= last, last < length else { return nil }
        self.init(first: first, last: last, completeLength: length)
    }

    package init(first: Int, last: Int, completeLength: Int) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    /// The field value, `bytes first-last/length`.
    package var fieldValue: String { "bytes \(first)-\(last)/\(completeLength)" }

    /// The bytes it covers.
    var bounds: ClosedRange<Int> { first...last }
}
