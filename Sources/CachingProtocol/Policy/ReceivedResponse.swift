import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The origin's response head, with how it was reached: all the policy needs to judge a
/// response before its body is in.
struct ReceivedHead: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is immutable after creation but not declared Sendable everywhere.
    let response: HTTPURLResponse
    let route: ResponseRoute
    /// When the request was sent and the response arrived (RFC 9111 `request_time`, `response_time`).
    let requestDate: Date
    let responseDate: Date
    /// The response's fields, read once: every reader shares them (reading Foundation's header
    /// dictionary bridges every field).
    let headers: HTTPHeaders

    init(response: HTTPURLResponse, route: ResponseRoute, requestDate: Date, responseDate: Date) {
        self.response = response
        self.route = route
        self.requestDate = requestDate
        self.responseDate = responseDate
        headers = HTTPHeaders(response.allHeaderFields)
    }

    var status: Int { response.statusCode }
}

/// A response from the origin whose transfer ended without an error.
struct ReceivedResponse: Sendable {
    let head: ReceivedHead
    /// The body as the upstream kept it: every byte that arrived, unless `isBodyKept` is false
    /// or the body is kept in a file instead (`keptWhole()`).
    let body: Data
    /// How many body bytes arrived, kept or not.
    let bodyLength: Int
    /// False when the upstream stopped keeping the body once it could not be stored (it was
    /// too large, or its head ruled storing out) and only handed it on as it arrived
    /// (`UpstreamListener.upstreamDidReceiveHead`). True with a `body` shorter than
    /// `bodyLength` when the body is kept whole in a file (`keptWhole()`).
    let isBodyKept: Bool
    /// Wall-clock seconds the transfer took, for the bandwidth estimate.
    let transferSeconds: TimeInterval

    init(head: ReceivedHead, body: Data, transferSeconds: TimeInterval, bodyLength: Int? = nil, isBodyKept: Bool = true) {
        self.head = head
        self.body = body
        self.bodyLength = bodyLength ?? body.count
        self.isBodyKept = isBodyKept
        self.transferSeconds = transferSeconds
    }

    /// This response with its body kept whole, though `body` may not hold it: the engine wrote
    /// every byte to a file as it arrived, which is stored with the entry made from it.
    func keptWhole() -> ReceivedResponse {
        ReceivedResponse(head: head, body: body, transferSeconds: transferSeconds, bodyLength: bodyLength, isBodyKept: true)
    }
}

/// How a response was reached, where that decides whether it may be stored.
package struct ResponseRoute: Sendable, Equatable {
    /// A credential of the app's went with the request on the way — the app answered a challenge
    /// with one, or the upstream session took one from the app's credential storage — so the
    /// response belongs to that credential, which the request's fingerprint does not show.
    package var answeredWithCredential: Bool

    package init(answeredWithCredential: Bool = false) {
        self.answeredWithCredential = answeredWithCredential
    }

    /// Reached directly, with nothing of the above.
    package static let direct = ResponseRoute()
}
