import Foundation

extension DiskState {
    /// The records stored before `cutoff` (their newest response is older), except pinned ones,
    /// are removed as the app's removals are (`forget`). Returns the digests whose files must be
    /// deleted. Nothing while the index is incomplete: a later sweep sees every file.
    mutating func expire(storedBefore cutoff: Date) -> [EntryDigest] {
        guard isIndexReady else { return [] }
        var doomed: [EntryDigest] = []
        for element in index.entries where element.value.latestResponseDate < cutoff && !pins.contains(element.key) {
            doomed.append(element.key)
        }
        return doomed.isEmpty ? [] : forget(doomed)
    }
}
