#if canImport(FoundationNetworking)
import Foundation

/// Where one upstream task's, or one load's, calls that wait for corelibs' one serial queue run
/// on Linux: making, resuming and cancelling an upstream task (a `sync` on its work queue, for a
/// task identifier and a start), handing an answer to an app task's client (`TaskQueueExecutor`).
///
/// That queue is busy while a transfer runs (Docs/foundation-facts.md, L25), and a thread that
/// waits for it is lost meanwhile. The callers are the engine's threads, which are the global
/// pool's: libdispatch runs only as many of its threads at once as there are processors, and the
/// app's delegate and operation queues and completion handlers run there too (L34). So at most
/// `poolWaiters` callers wait on their own thread, which takes no thread hand-off (a hand-off
/// costs every miss, `Docs/benchmarks.md`); the calls past that wait on a few serial
/// queues of the layer's own, which libdispatch runs on threads outside that limit. A lane runs
/// its calls in the order they came: once one waits on a queue, the next ones go there too.
///
/// Threading: `run` may be called from any thread but corelibs' queue (where the wait would
/// deadlock); `runLater` from any thread.
final class CorelibsCallLane: Sendable {
    /// How many callers may wait on their own thread at once: half of the pool, at least one.
    static let poolWaiters = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
    /// The serial queues the other calls wait on, shared by every lane in turn.
    private static let queues = (0..<4).map { DispatchQueue(label: "CachingProtocol.CorelibsCallLane.\($0)") }
    private static let nextQueue = Locked(0)
    private static let waitingOnCallers = Locked(0)

    /// How many callers wait on their own thread now.
    static var callersWaiting: Int { waitingOnCallers.withLock { $0 } }

    /// Returns once every call queued on a lane until now has run: a call to corelibs made after
    /// it comes after theirs (for tests: every upstream task cancelled by then was cancelled
    /// before a task made afterwards).
    static func waitForQueuedCalls() {
        for queue in queues { queue.sync {} }
    }

    private let queue: DispatchQueue
    /// Calls handed to `queue` that have not run yet.
    private let queued = Locked(0)

    init() {
        queue = Self.queues[Self.nextQueue.withLock { next in
            defer { next = (next + 1) % Self.queues.count }
            return next
        }]
    }

    /// Runs `work` on the calling thread when the lane has nothing queued and fewer than
    /// `poolWaiters` callers wait there already, else after the lane's queued calls, on its queue.
    func run(_ work: @escaping @Sendable () -> Void) {
        let here = queued.withLock { queued -> Bool in
            let here = queued == 0 && Self.waitingOnCallers.withLock { waiting in
                guard waiting < Self.poolWaiters else { return false }
                waiting += 1
                return true
            }
            if !here { queued += 1 }
            return here
        }
        guard here else { return enqueue(work) }
        work()
        Self.waitingOnCallers.withLock { $0 -= 1 }
    }

    /// Runs `work` on the lane's queue, after its queued calls: for a caller that may be on
    /// corelibs' queue itself (a load's `stopLoading` cancelling its upstream task).
    func runLater(_ work: @escaping @Sendable () -> Void) {
        queued.withLock { $0 += 1 }
        enqueue(work)
    }

    /// Runs `work` on the lane's queue; `queued` counts it already.
    private func enqueue(_ work: @escaping @Sendable () -> Void) {
        queue.async { [queued] in
            work()
            queued.withLock { $0 -= 1 }
        }
    }
}
#endif
