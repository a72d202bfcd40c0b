import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's own `URLSession` a load comes from, when the protocol can tell: its loads' upstream
/// requests go through connections of its own (`URLSessionUpstream`), as its tasks would without
/// the layer. swift-corelibs-foundation keeps it in the app's task (`AppTaskRedirects.owningSession`);
/// Apple's tasks do not say (Docs/foundation-facts.md, A22), and loads there have none.
///
/// Held weakly: the layer never keeps an app's session alive, and what it made for one is
/// released once the app let go of it (`isGone`).
struct AppSession: Sendable {
    /// The session's identity. An identifier may come back for a session made after this one
    /// was freed: compare only while `isGone` is false.
    let id: ObjectIdentifier
    private weak var session: URLSession?

    init(_ session: URLSession) {
        id = ObjectIdentifier(session)
        self.session = session
    }

    /// Whether the app's session was freed.
    var isGone: Bool { session == nil }
}
