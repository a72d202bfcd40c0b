import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The answer to one load: a response with its whole body, or an error.
enum Answer: @unchecked Sendable {
    // @unchecked: HTTPURLResponse is immutable after creation but not declared Sendable everywhere.
    case response(HTTPURLResponse, Data)
    case failure(Error)
}

/// Receives the one answer to a load, from any thread, at most once.
protocol AnswerReceiver: Sendable {
    func receive(_ answer: Answer, outcome: CacheEvent.Outcome)
}
