import Foundation

extension CachingURLCache {
    /// The Data Protection class of every file and directory the cache creates in ``directory``:
    /// when the system lets them be read (see ``CachingFileProtection``).
    ///
    /// Default: ``CachingFileProtection/completeUntilFirstUserAuthentication``, the class Apple
    /// gives app files by default (readable in the background once the device was unlocked after
    /// a restart). Setting it also gives the files and directories the cache already created the
    /// new class; that runs on the cache's disk worker, after the disk writes handed in before,
    /// and ``waitUntilSettled()`` waits for it. On Linux and other platforms without Data
    /// Protection it has no effect.
    ///
    /// Threading: may be read and set from any thread.
    public var fileProtection: CachingFileProtection {
        get { store.disk.fileProtection }
        set { store.disk.fileProtection = newValue }
    }
}
