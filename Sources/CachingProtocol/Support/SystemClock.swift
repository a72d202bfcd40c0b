import Foundation

/// The wall clock, the one default of every clock in the package: `CachingConfiguration.now`
/// starts as this, and the stores use it until an installation hands them its own clock.
package let systemClock: @Sendable () -> Date = Date.init
