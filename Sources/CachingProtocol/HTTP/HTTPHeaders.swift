import Foundation

/// An ordered list of HTTP header fields with case-insensitive lookup.
///
/// Foundation hands headers around as `[AnyHashable: Any]` dictionaries; this type keeps them as
/// name/value pairs, which is what the entry format stores and what 304 merging needs.
package struct HTTPHeaders: Sendable, Equatable {
    package struct Field: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    package private(set) var fields: [Field]

    package init(_ fields: [Field] = []) {
        self.fields = fields
    }

    /// The fields of a Foundation header dictionary, sorted by name so that equal dictionaries
    /// give equal values.
    init(_ dictionary: [AnyHashable: Any]) {
        var fields: [Field] = []
        fields.reserveCapacity(dictionary.count)
        for (name, value) in dictionary {
            guard let name = name as? String else { continue }
            fields.append(Field(name: name, value: (value as? String) ?? String(describing: value)))
        }
        fields.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        self.fields = fields
    }

    init(_ dictionary: [String: String]) {
        self.init(dictionary as [AnyHashable: Any])
    }

    var isEmpty: Bool { fields.isEmpty }

    /// The value of the field called `name`; repeated fields are joined with ", " as RFC 9110
    /// §5.3 allows for list-valued fields.
    package subscript(name: String) -> String? {
        var result: String?
        for field in fields where field.name.isEqualIgnoringASCIICase(name) {
            if let existing = result {
                result = existing + ", " + field.value
            } else {
                result = field.value
            }
        }
        return result
    }

    package func contains(_ name: String) -> Bool {
        fields.contains { $0.name.isEqualIgnoringASCIICase(name) }
    }

    /// Replaces every field called `name` with one field at the position of the first, or removes
    /// them all when `value` is nil.
    package mutating func set(_ name: String, _ value: String?) {
        let position = fields.firstIndex { $0.name.isEqualIgnoringASCIICase(name) } ?? fields.count
        fields.removeAll { $0.name.isEqualIgnoringASCIICase(name) }
        guard let value else { return }
        // Every removed field sat at or after `position`, so it still points where the first one was.
        fields.insert(Field(name: name, value: value), at: min(position, fields.count))
    }

    package mutating func remove(_ name: String) {
        set(name, nil)
    }

    /// The fields as a Foundation header dictionary (repeated fields joined with ", ").
    var dictionary: [String: String] {
        var result: [String: String] = [:]
        result.reserveCapacity(fields.count)
        for field in fields {
            if let existing = result[field.name] {
                result[field.name] = existing + ", " + field.value
            } else {
                result[field.name] = field.value
            }
        }
        return result
    }

    /// Bytes the fields occupy, as counted against a tier's capacity.
    var byteCount: Int {
        fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }
}

extension HTTPHeaders {
    /// The members of a list-valued field (`Vary`, `Connection`, `Accept-Language`, … RFC 9110
    /// §5.6.1), split at `separator` and trimmed of spaces and tabs; empty members are left out
    /// unless `omittingEmpty` is false. Splits on the separator's byte: read as `Character`s, a
    /// comma after a prepending mark (U+070F) or before a combining one is part of a larger
    /// character and would not separate two members (the fuzzer found it in `Cache-Control`).
    package static func listMembers(_ value: Substring, separator: UInt8 = UInt8(ascii: ","),
                                    omittingEmpty: Bool = true) -> [Substring] {
        let bytes = value.utf8
        var members: [Substring] = []
        var start = bytes.startIndex
        func add(upTo end: String.Index) {
            let member = value[start..<end].trimmingOWS
            if !member.isEmpty || !omittingEmpty { members.append(member) }
        }
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == separator {
                add(upTo: index)
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        add(upTo: bytes.endIndex)
        return members
    }
}

extension Substring {
    /// Without the spaces and tabs at either end (RFC 9110's optional whitespace, OWS), cut on
    /// bytes: both are ASCII, so the cuts fall on scalar boundaries whatever the text holds.
    package var trimmingOWS: Substring {
        let bytes = utf8
        var first = bytes.startIndex, last = bytes.endIndex
        while first < last, isOWS(bytes[first]) { first = bytes.index(after: first) }
        while first < last, isOWS(bytes[bytes.index(before: last)]) { last = bytes.index(before: last) }
        return self[first..<last]
    }
}

extension String {
    /// ASCII case-insensitive equality: HTTP field names, methods and schemes are ASCII tokens,
    /// so this avoids the Unicode case mapping `lowercased()` does (and its allocation). Strings
    /// of different lengths, the common case, are decided by their lengths; equal ones by one
    /// comparison.
    package func isEqualIgnoringASCIICase(_ other: String) -> Bool {
        // Lengths first: most comparisons are of different names, and a length is at hand.
        guard utf8.count == other.utf8.count else { return false }
        if self == other { return true }
        var lhs = self, rhs = other
        return lhs.withUTF8 { left in
            rhs.withUTF8 { right in
                for index in left.indices where asciiLowercased(left[index]) != asciiLowercased(right[index]) {
                    return false
                }
                return true
            }
        }
    }
}

/// Whether `byte` is RFC 9110's optional whitespace: a space or a tab.
@inline(__always)
func isOWS(_ byte: UInt8) -> Bool {
    byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
}

@inline(__always)
func asciiLowercased(_ byte: UInt8) -> UInt8 {
    (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
}
