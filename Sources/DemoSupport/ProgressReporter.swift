import Foundation
import CachingProtocol

/// Progress on standard error for work that runs longer than a second: silent until then, so a
/// fast run prints nothing extra; after that, the current stage (and on a terminal, the current
/// step, rewritten in place). Standard output stays clean for the table or the JSON.
///
/// Threading: every method may be called from any thread.
public final class ProgressReporter: Sendable {
    private struct State {
        var stage: String?
        var detail: String?
        var visible = false
        var finished = false
        var lastLine = ""
    }

    private let state = Locked(State())
    private let started = DispatchTime.now()
    private let isTerminal: Bool
    private let write: @Sendable (String) -> Void

    /// - Parameters:
    ///   - delay: how long the work must run before anything is shown. Default one second.
    ///   - isTerminal: whether lines may be rewritten in place; default: standard error is a terminal.
    ///   - write: where the text goes; default standard error.
    public init(
        delay: TimeInterval = 1,
        isTerminal: Bool = isatty(STDERR_FILENO) == 1,
        write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }
    ) {
        self.isTerminal = isTerminal
        self.write = write
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            let show = state.withLock { state -> Bool in
                guard !state.finished else { return false }
                state.visible = true
                return true
            }
            if show { emit() }
        }
    }

    /// A new stage, e.g. "[2/4] URLCache (AFNetworking-style)".
    public func stage(_ text: String) {
        let show = state.withLock { state -> Bool in
            state.stage = text
            state.detail = nil
            return state.visible && !state.finished
        }
        if show { emit() }
    }

    /// A step within the stage, e.g. "return +2 d"; shown only on a terminal.
    public func detail(_ text: String) {
        let show = state.withLock { state -> Bool in
            state.detail = text
            return state.visible && !state.finished && isTerminal
        }
        if show { emit() }
    }

    /// Stops showing progress; on a terminal the progress line is erased.
    public func finish() {
        let erase = state.withLock { state -> Bool in
            defer { state.finished = true }
            return state.visible && !state.finished && isTerminal
        }
        if erase { write("\r\u{1B}[K") }
    }

    private func emit() {
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        let output = state.withLock { state -> String? in
            guard let stage = state.stage else { return nil }
            let line = state.detail.map { "\(stage): \($0)" } ?? stage
            if !isTerminal && line == state.lastLine { return nil }
            state.lastLine = line
            let text = String(format: "[%.1f s] ", elapsed) + line
            return isTerminal ? "\r\u{1B}[K" + text : text + "\n"
        }
        if let output { write(output) }
    }
}
