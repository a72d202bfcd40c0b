#if canImport(FoundationNetworking)
@_spi(Reflection) import Swift
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a load's redirects are decided, from the app's task behind the protocol instance.
enum AppTaskRedirects {
    /// For a client that cannot take redirect reports (Linux; on Apple they are reported, and the
    /// app's session asks its delegate and starts the next load): the protocol asks the app's
    /// delegate itself, as corelibs' own HTTP protocol does (`HTTPURLProtocol.redirectFor`): on the session's delegate queue, when the task has a
    /// delegate (`task.delegate`: its own, or the session's); without one nothing in the app can
    /// object, and the redirect is followed. `session`: the task's (`owningSession(of:)`).
    static func handling(for task: URLSessionTask?, in session: URLSession?) -> RedirectHandling {
        #if canImport(FoundationNetworking)
        guard let task, let delegate = task.delegate else { return .follow }
        guard let session else {
            // The task's session could not be found (see `owningSession`): follow, as before.
            return .follow
        }
        return .ask { response, request, decide in
            session.delegateQueue.addOperation {
                delegate.urlSession(session, task: task, willPerformHTTPRedirection: response,
                                    newRequest: request) { decided in decide(decided) }
            }
        }
        #else
        return .report
        #endif
    }

    #if canImport(FoundationNetworking)
    /// The session that owns `task`. swift-corelibs-foundation keeps it in an internal stored
    /// property (`URLSessionTask.session`, a `URLSessionProtocol!` set when the task is made) and
    /// offers no public accessor; a delegate must get the real session (its default
    /// implementations forward to `session.delegate`), so the property is read at its offset in
    /// the class's layout — one load, as every load through the layer that reads a file or misses
    /// asks, where a `Mirror` of the task allocates for each of its fields — or by a `Mirror`
    /// when the layout has no such field. Nil when a corelibs release renames it: redirects are
    /// then followed without asking, as before this layer asked.
    static func owningSession(of task: URLSessionTask) -> URLSession? {
        if let offset = sessionFieldOffset {
            // A class-bound existential: its first word is the object, zero for nil.
            let object = withExtendedLifetime(task) {
                Unmanaged.passUnretained(task).toOpaque().load(fromByteOffset: offset, as: UnsafeRawPointer?.self)
            }
            return object.flatMap { Unmanaged<AnyObject>.fromOpaque($0).takeUnretainedValue() as? URLSession }
        }
        var mirror: Mirror? = Mirror(reflecting: task)
        while let current = mirror {
            for child in current.children where child.label == "session" {
                if let session = child.value as? URLSession { return session }
            }
            mirror = current.superclassMirror
        }
        return nil
    }

    /// Where `URLSessionTask` keeps `session`, when it is the optional class-bound existential
    /// of corelibs 6.x (two words, the object first); nil otherwise.
    static let sessionFieldOffset = TaskFields.offset(of: "session") { type in
        _typeName(type) == "Swift.Optional<FoundationNetworking.URLSessionProtocol>"
    }
    #endif
}

#if canImport(FoundationNetworking)
/// The delegate an app passed to an `async` call (`data(for:delegate:)`, `data(from:delegate:)`)
/// on Linux. corelibs' client hands a custom protocol's body only to a session delegate, so that
/// delegate's `urlSession(_:dataTask:didReceive:)` would never run; corelibs' own HTTP protocol
/// calls it, on the session's delegate queue. The protocol finds it and does the same.
///
/// corelibs keeps that delegate only in its task registry, and marks the task of an `async` call
/// with `_callCompletionHandlerInline`; both are internal and read by reflection. When a release
/// renames them, no delegate is found and the body is not relayed (the behaviour without it).
struct AsyncTaskDelegate: Sendable {
    let delegate: any URLSessionDataDelegate
    let session: URLSession
    let task: URLSessionDataTask

    /// The data delegate of the `async` call that made `task`, if any. Call it from
    /// `startLoading`: corelibs calls that on the task's work queue, which targets the session's
    /// work queue, the only place its task registry may be read. A task of a completion handler
    /// or a delegate session (the common case) costs one load of its flag, about a nanosecond;
    /// an `async` call's task a few microseconds of reflection on the registry.
    static func find(for task: URLSessionTask?) -> AsyncTaskDelegate? {
        guard let task = task as? URLSessionDataTask, let flagOffset = asyncCallFlagOffset,
              withExtendedLifetime(task, { Unmanaged.passUnretained(task).toOpaque().load(fromByteOffset: flagOffset, as: Bool.self) }),
              let session = AppTaskRedirects.owningSession(of: task),
              let behaviour = AppTaskBehaviour.registered(for: task, in: session),
              let withDelegate = Mirror(reflecting: behaviour).children.first,
              withDelegate.label == "dataCompletionHandlerWithTaskDelegate",
              let delegate = Mirror(reflecting: withDelegate.value).children.dropFirst().first?.value as? any URLSessionDataDelegate
        else { return nil }
        return AsyncTaskDelegate(delegate: delegate, session: session, task: task)
    }

    /// Hands a piece of the body to the delegate, on the session's delegate queue.
    func relay(_ body: Data) {
        session.delegateQueue.addOperation { [self] in
            delegate.urlSession(session, dataTask: task, didReceive: body)
        }
    }

    /// Where `URLSessionTask` keeps `_callCompletionHandlerInline` (a `Bool` set before the task
    /// resumes and never changed); nil when a corelibs release has no such field, and then
    /// nothing is relayed.
    private static let asyncCallFlagOffset = TaskFields.offset(of: "_callCompletionHandlerInline", type: Bool.self)
}

/// Where `URLSessionTask` keeps an internal stored property, found once in the class's field
/// layout with the runtime's field reflection: reading it at that offset costs a load, not a
/// `Mirror`. Only for fields set when the task is made and never changed.
enum TaskFields {
    /// The offset of the field `name` of type `type`, or nil when corelibs has no such field.
    static func offset(of name: String, type: Any.Type) -> Int? {
        offset(of: name) { $0 == type }
    }

    /// The offset of the field `name` whose type passes `isExpected` (for a type internal to
    /// corelibs, which cannot be named here), or nil when corelibs has no such field.
    static func offset(of name: String, where isExpected: (Any.Type) -> Bool) -> Int? {
        var offset: Int?
        // `_EachFieldOptions.classType` (1 << 0), spelled by value: the stdlib declares it a
        // mutable static, which Swift 6 refuses to read.
        _ = _forEachField(of: URLSessionTask.self, options: _EachFieldOptions(rawValue: 1 << 0)) { fieldName, fieldOffset, fieldType, _ in
            guard String(cString: fieldName) == name, isExpected(fieldType) else { return true }
            offset = fieldOffset
            return false
        }
        return offset
    }
}
#endif

#if canImport(FoundationNetworking)
/// The work queue of an app's task: corelibs' internal `URLSessionTask.workQueue` (a `let`), a
/// serial queue targeting its session's, where corelibs changes the session's task registry and
/// calls its own protocols' clients (see `TaskQueueExecutor`); nil when a corelibs release has
/// no such field.
enum TaskWorkQueue {
    /// The queue of `task`; call it from `startLoading`, while the task is alive.
    static func of(_ task: URLSessionTask?) -> DispatchQueue? {
        guard let task, let offset = fieldOffset else { return nil }
        return withExtendedLifetime(task) {
            Unmanaged.passUnretained(task).toOpaque().load(fromByteOffset: offset, as: DispatchQueue.self)
        }
    }

    private static let fieldOffset = TaskFields.offset(of: "workQueue", type: DispatchQueue.self)
}
#endif

#if canImport(FoundationNetworking)
/// What corelibs' task registry says of an app's task (Linux): the behaviour its session recorded
/// when the task was made — a delegate of its own, a completion handler, or an `async` call's.
/// Internal to corelibs and read by reflection; when a release renames it, nothing can be told
/// and the layer behaves as for a completion handler (whole bodies).
enum AppTaskBehaviour {
    /// Whether `task` reports to a delegate (`callDelegate`), which corelibs hands every
    /// `didLoad` as it comes. Free for a task without any delegate (no reflection). Call it from
    /// `startLoading` (see `AsyncTaskDelegate.find(for:)`).
    static func hasDelegateOfItsOwn(_ task: URLSessionTask?) -> Bool {
        guard let task, task.delegate != nil, let session = AppTaskRedirects.owningSession(of: task),
              let behaviour = registered(for: task, in: session) else { return false }
        return String(describing: behaviour) == "callDelegate"
    }

    /// The behaviour `session`'s task registry keeps for `task` (`_TaskRegistry._Behaviour`:
    /// `callDelegate`, `dataCompletionHandler(…)`, `dataCompletionHandlerWithTaskDelegate(…)` …).
    static func registered(for task: URLSessionTask, in session: URLSession) -> Any? {
        guard let registry = Mirror(reflecting: session).children.first(where: { $0.label == "taskRegistry" })?.value,
              let behaviours = Mirror(reflecting: registry).children.first(where: { $0.label == "behaviours" })?.value as? [Int: Any]
        else { return nil }
        return behaviours[task.taskIdentifier]
    }
}
#endif
