import Foundation

/// The Data Protection class of the files and directories the cache creates: when the system
/// lets them be read.
///
/// On iOS, iPadOS, tvOS, watchOS and visionOS every file has a class. A file of class
/// ``complete`` cannot be read while the device is locked; one of class
/// ``completeUntilFirstUserAuthentication`` cannot be read after a restart until the user
/// unlocks the device once. Apps are launched in the background in both states (a push, a
/// background fetch, a location update), and a read then fails with a permission error although
/// the data is intact. The cache treats such a read as *unavailable*: a miss, counted in its
/// statistics (`unavailableDiskReads`), with nothing deleted or rebuilt; the entry is served again
/// once its file can be read.
///
/// The default, ``completeUntilFirstUserAuthentication``, is the class Apple gives app files by
/// default: they stay readable in the background after the first unlock. Choose ``complete``
/// for responses that must not be readable while the device is locked, knowing that a
/// background launch then finds nothing cached on disk.
///
/// On Apple platforms the class is set with `FileManager`'s `.protectionKey` attribute on every
/// file and directory the cache creates. On a volume without Data Protection (most Macs) setting
/// it fails, and the file is as protected as its volume: nothing else fails. On Linux and other
/// platforms without Data Protection it has no effect.
public struct CachingFileProtection: Sendable, Hashable, CustomStringConvertible {
    private enum Level: Sendable, Hashable {
        case none, complete, completeUnlessOpen, completeUntilFirstUserAuthentication
    }

    private let level: Level

    private init(level: Level) {
        self.level = level
    }

    /// Readable at any time, also while the device is locked and before its first unlock.
    public static let none = CachingFileProtection(level: .none)
    /// Readable only while the device is unlocked.
    public static let complete = CachingFileProtection(level: .complete)
    /// Files open when the device locks stay readable; new files can be created while locked,
    /// but not opened again until the next unlock.
    public static let completeUnlessOpen = CachingFileProtection(level: .completeUnlessOpen)
    /// Readable from the first unlock after a restart on: the class Apple gives app files by
    /// default, and the cache's default.
    public static let completeUntilFirstUserAuthentication = CachingFileProtection(level: .completeUntilFirstUserAuthentication)

    public var description: String {
        switch level {
        case .none: "none"
        case .complete: "complete"
        case .completeUnlessOpen: "completeUnlessOpen"
        case .completeUntilFirstUserAuthentication: "completeUntilFirstUserAuthentication"
        }
    }

    /// Whether this platform has Data Protection, so that the class changes anything.
    static var isSupported: Bool {
        #if canImport(Darwin)
        true
        #else
        false
        #endif
    }

    #if canImport(Darwin)
    /// Foundation's name for the same class.
    public var fileProtectionType: FileProtectionType {
        switch level {
        case .none: .none
        case .complete: .complete
        case .completeUnlessOpen: .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        }
    }

    /// The class Foundation's `type` names; nil for a class this type does not know.
    public init?(_ type: FileProtectionType) {
        switch type {
        case .none: self = .none
        case .complete: self = .complete
        case .completeUnlessOpen: self = .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: self = .completeUntilFirstUserAuthentication
        default: return nil
        }
    }
    #endif

    /// Gives the file or directory at `path` this class: the package's one Apple-only file call.
    /// Failure is ignored: a volume without Data Protection refuses the attribute, and the file
    /// is then as protected as the volume allows. Elsewhere: nothing.
    func apply(toItemAt path: String) {
        #if canImport(Darwin)
        try? FileManager.default.setAttributes([.protectionKey: fileProtectionType], ofItemAtPath: path)
        #endif
    }
}
