import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a load's redirects are decided, from the app's task behind the protocol instance.
enum AppTaskRedirects {
    /// Apple: reported to the client, whose session asks the app's delegate and starts the next
    /// load. Linux: the protocol asks the app's delegate itself, as corelibs' own HTTP protocol
    /// does (`HTTPURLProtocol.redirectFor`): on the session's delegate queue, when the task has a
    /// delegate (`task.delegate`: its own, or the session's); without one nothing in the app can
    /// object, and the redirect is followed.
    static func handling(for task: URLSessionTask?, rules: ClientDelivery.Rules) -> RedirectHandling {
        if rules.reportsRedirects { return .report }
        #if canImport(FoundationNetworking)
        guard let task, let delegate = task.delegate else { return .follow }
        guard let session = owningSession(of: task) else {
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
    /// property (`URLSessionTask.session`) and offers no public accessor; a delegate must get the
    /// real session (its default implementations forward to `session.delegate`), so the
    /// property is read by reflection. Nil when a corelibs release renames it: redirects are
    /// then followed without asking, as before this layer asked.
    static func owningSession(of task: URLSessionTask) -> URLSession? {
        var mirror: Mirror? = Mirror(reflecting: task)
        while let current = mirror {
            for child in current.children where child.label == "session" {
                if let session = child.value as? URLSession { return session }
            }
            mirror = current.superclassMirror
        }
        return nil
    }
    #endif
}
