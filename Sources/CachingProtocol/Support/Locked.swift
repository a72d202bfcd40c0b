#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The package's one lock helper: a value guarded by a mutex.
///
/// Every piece of shared mutable state in the library lives inside a `Locked`; it has `package`
/// access so the Demo, the benchmarks and the test tool use the same helper. The lock is never
/// held across I/O or across a call into code the library does not own, except where a comment at
/// the call site says why.
///
/// It is built on the platform's own primitive (`os_unfair_lock` on Apple platforms, a
/// `pthread_mutex_t` elsewhere) rather than `NSLock`: a `Locked` is created for every request a
/// `URLProtocol` serves, and `NSLock` costs an extra object and a dynamic call per operation.
package final class Locked<State>: @unchecked Sendable {
    // @unchecked: `state` is only read or written inside `withLock`, while `mutex` is held.
    #if canImport(Darwin)
    private let mutex: UnsafeMutablePointer<os_unfair_lock>
    #else
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    #endif
    private var state: State

    package init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        #if canImport(Darwin)
        mutex.initialize(to: os_unfair_lock())
        #else
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        #endif
    }

    deinit {
        #if !canImport(Darwin)
        pthread_mutex_destroy(mutex)
        #endif
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    @inline(__always)
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        #if canImport(Darwin)
        os_unfair_lock_lock(mutex)
        defer { os_unfair_lock_unlock(mutex) }
        #else
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        #endif
        return try body(&state)
    }
}
