/// Whom a stored answer may be served to: the user it was fetched for and who judged the server's
/// certificate for it. An answer is served only to a request of the same partition, so one user's
/// answer never reaches another (nor an anonymous request), and an answer fetched over a
/// connection one trust judge saw never reaches a session another judge serves.
///
/// Both halves are digests (`StableHash`), the same in every launch: no credential, cookie or
/// user name is ever kept, in memory or in a file.
package struct Partition: Hashable, Sendable {
    /// The user the request was for, as the installation's `CachingUserIdentity` tells it; nil
    /// for a request for nobody in particular (no credentials, and no identity named one).
    package var user: UInt64?
    /// The delegate that judges server trust for the session (`DelegateTraits.trustJudge`); nil
    /// when the system's evaluation does.
    package var judge: UInt64?

    package init(user: UInt64? = nil, judge: UInt64? = nil) {
        self.user = user
        self.judge = judge
    }

    /// No user, the system's trust evaluation: what an anonymous request of `URLSession.shared` gets.
    package static let anonymous = Partition()
}
