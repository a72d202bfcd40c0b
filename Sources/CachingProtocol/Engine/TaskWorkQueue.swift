#if canImport(FoundationNetworking)
@_spi(Reflection) import Swift
import Foundation
import FoundationNetworking

/// The work queue of a task (Linux): corelibs' internal `URLSessionTask.workQueue` (a `let`), a
/// serial queue targeting its session's. Every session's queue targets one serial queue, on which
/// corelibs reads sockets, changes sessions' task registries and calls its own protocols' clients:
/// the protocol calls an app task's client there too (`TaskQueueExecutor`). The cache's upstream
/// sessions run their delegate callbacks on their own work queue, in order with the reads of a
/// transfer (`UpstreamClient`), which `markWorkQueue` marks. Nil when a corelibs release has no
/// such field.
enum TaskWorkQueue {
    /// The queue of `task`, while the task is alive (an app's task: call it from `startLoading`).
    static func of(_ task: URLSessionTask?) -> DispatchQueue? {
        guard let task, let offset = fieldOffset else { return nil }
        return withExtendedLifetime(task) {
            Unmanaged.passUnretained(task).toOpaque().load(fromByteOffset: offset, as: DispatchQueue.self)
        }
    }

    private static let fieldOffset = TaskFields.offset(of: "workQueue", type: DispatchQueue.self, in: URLSessionTask.self)

    /// Marks the work queue of `session` (an upstream session of the cache's, whose delegate
    /// callbacks run there: `UpstreamClient`): work that runs on it is on corelibs' one serial
    /// queue, so it may call a client of corelibs' directly (`isCurrentMarked`), and must not wait
    /// for another corelibs queue, which would deadlock. False when corelibs has no such field.
    @discardableResult
    static func markWorkQueue(of session: URLSession) -> Bool {
        guard let offset = sessionFieldOffset else { return false }
        let queue = withExtendedLifetime(session) {
            Unmanaged.passUnretained(session).toOpaque().load(fromByteOffset: offset, as: DispatchQueue.self)
        }
        queue.setSpecific(key: markKey, value: true)
        return true
    }

    /// Whether the current thread runs on a work queue `markWorkQueue` marked.
    static var isCurrentMarked: Bool {
        DispatchQueue.getSpecific(key: markKey) == true
    }

    private static let markKey = DispatchSpecificKey<Bool>()
    private static let sessionFieldOffset = TaskFields.offset(of: "workQueue", type: DispatchQueue.self, in: URLSession.self)
}

/// Where `URLSessionTask` (or `URLSession`) keeps an internal stored property, found once in the
/// class's field layout with the runtime's field reflection: reading it at that offset costs a
/// load, not a `Mirror`. Only for fields set when the object is made and never changed.
enum TaskFields {
    /// The offset of the field `name` of type `type` in `owner`, or nil when corelibs has no such field.
    static func offset(of name: String, type: Any.Type, in owner: AnyClass = URLSessionTask.self) -> Int? {
        var offset: Int?
        // `_EachFieldOptions.classType` (1 << 0), spelled by value: the stdlib declares it a
        // mutable static, which Swift 6 refuses to read.
        _ = _forEachField(of: owner, options: _EachFieldOptions(rawValue: 1 << 0)) { fieldName, fieldOffset, fieldType, _ in
            guard String(cString: fieldName) == name, fieldType == type else { return true }
            offset = fieldOffset
            return false
        }
        return offset
    }
}
#endif
