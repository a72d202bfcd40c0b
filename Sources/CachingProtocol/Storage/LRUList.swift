/// A least-recently-used ordering of keyed values, each charged a byte cost.
///
/// A value type: the nodes of the doubly-linked list live in one array and link to each other by
/// slot index, and a dictionary maps each key to its slot, so every operation is O(1) and no node
/// is a class instance. Freed slots are reused. The owner keeps the list inside its lock
/// (`Locked`); the list itself does no synchronisation.
///
/// The memory tier keys it by cache key (`String`) with records as values; the disk index keys it
/// by `EntryDigest` with file metadata as values.
package struct LRUList<Key: Hashable, Value> {
    /// One element as seen from outside: its key, value and cost.
    package struct Element {
        package var key: Key
        package var value: Value
        package var cost: Int
    }

    fileprivate struct Node {
        var key: Key
        var value: Value?  // nil only while the slot is free, so a freed slot holds no value alive
        var cost: Int
        var previous: Int  // towards least recent; `none` at the head
        var next: Int  // towards most recent; `none` at the tail
    }

    private static var none: Int { -1 }

    private var nodes: [Node] = []
    private var freeSlots: [Int] = []
    private var slots: [Key: Int] = [:]
    /// The least recently used slot.
    private var head = LRUList.none
    /// The most recently used slot.
    private var tail = LRUList.none

    /// The sum of the costs of all elements.
    private(set) var totalCost = 0

    init() {}

    var count: Int { slots.count }
    var isEmpty: Bool { slots.isEmpty }

    func contains(_ key: Key) -> Bool {
        slots[key] != nil
    }

    /// The value for `key` without changing the order.
    func peek(_ key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        return nodes[slot].value
    }

    /// The cost charged for `key`, or nil.
    func cost(of key: Key) -> Int? {
        guard let slot = slots[key] else { return nil }
        return nodes[slot].cost
    }

    /// The value for `key`, which becomes the most recently used. One dictionary lookup.
    mutating func touch(_ key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToTail(slot)
        return nodes[slot].value
    }

    /// Changes the value for `key` in place without changing the order; returns false when absent.
    @discardableResult
    mutating func modify(_ key: Key, _ body: (inout Value) -> Void) -> Bool {
        guard let slot = slots[key], var value = nodes[slot].value else { return false }
        nodes[slot].value = nil  // keep `value` uniquely referenced while `body` mutates it
        body(&value)
        nodes[slot].value = value
        return true
    }

    /// Inserts or replaces the value for `key` with `cost`; it becomes the most recently used.
    /// Returns the value it replaced.
    @discardableResult
    mutating func set(_ value: Value, forKey key: Key, cost: Int) -> Value? {
        if let slot = slots[key] {
            let old = nodes[slot].value
            totalCost += cost - nodes[slot].cost
            nodes[slot].value = value
            nodes[slot].cost = cost
            moveToTail(slot)
            return old
        }
        let slot = allocate(key: key, value: value, cost: cost)
        linkAtTail(slot)
        return nil
    }

    /// Inserts `value` for an absent `key` as the least recently used, the first to be evicted
    /// (for entries adopted from disk whose last use is unknown). Replaces the value in place,
    /// without reordering, when `key` is present.
    mutating func setLeastRecent(_ value: Value, forKey key: Key, cost: Int) {
        if let slot = slots[key] {
            totalCost += cost - nodes[slot].cost
            nodes[slot].value = value
            nodes[slot].cost = cost
            return
        }
        let slot = allocate(key: key, value: value, cost: cost)
        nodes[slot].next = head
        if head != Self.none { nodes[head].previous = slot } else { tail = slot }
        head = slot
    }

    /// Removes `key` and returns its value.
    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        return release(slot).value
    }

    /// The least recently used element, without removing it.
    var leastRecent: Element? {
        guard head != Self.none, let value = nodes[head].value else { return nil }
        return Element(key: nodes[head].key, value: value, cost: nodes[head].cost)
    }

    /// Removes and returns the least recently used element.
    mutating func popLeastRecent() -> Element? {
        guard head != Self.none else { return nil }
        let slot = head
        slots.removeValue(forKey: nodes[slot].key)
        let node = release(slot)
        guard let value = node.value else { return nil }
        return Element(key: node.key, value: value, cost: node.cost)
    }

    mutating func removeAll() {
        self = LRUList()
    }

    /// Reserves room for `count` elements.
    mutating func reserveCapacity(_ count: Int) {
        nodes.reserveCapacity(count)
        slots.reserveCapacity(count)
    }

    // MARK: - Slots

    private mutating func allocate(key: Key, value: Value, cost: Int) -> Int {
        let node = Node(key: key, value: value, cost: cost, previous: Self.none, next: Self.none)
        let slot: Int
        if let reused = freeSlots.popLast() {
            slot = reused
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        slots[key] = slot
        totalCost += cost
        return slot
    }

    /// Unlinks `slot`, frees it and returns what it held. The caller has removed its key from `slots`.
    private mutating func release(_ slot: Int) -> Node {
        unlink(slot)
        let node = nodes[slot]
        totalCost -= node.cost
        nodes[slot].value = nil
        freeSlots.append(slot)
        if slots.isEmpty {
            // Nothing left: drop the storage so a cleared cache gives its memory back.
            nodes.removeAll()
            freeSlots.removeAll()
        }
        return node
    }

    private mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous != Self.none { nodes[previous].next = next } else { head = next }
        if next != Self.none { nodes[next].previous = previous } else { tail = previous }
        nodes[slot].previous = Self.none
        nodes[slot].next = Self.none
    }

    private mutating func linkAtTail(_ slot: Int) {
        nodes[slot].previous = tail
        nodes[slot].next = Self.none
        if tail != Self.none { nodes[tail].next = slot } else { head = slot }
        tail = slot
    }

    private mutating func moveToTail(_ slot: Int) {
        guard slot != tail else { return }
        unlink(slot)
        linkAtTail(slot)
    }
}

extension LRUList: Sequence {
    /// Walks the elements from the least to the most recently used.
    package struct Iterator: IteratorProtocol {
        fileprivate let list: LRUList
        fileprivate var slot: Int

        package mutating func next() -> Element? {
            guard slot != LRUList.none else { return nil }
            let node = list.nodes[slot]
            slot = node.next
            guard let value = node.value else { return nil }
            return Element(key: node.key, value: value, cost: node.cost)
        }
    }

    package func makeIterator() -> Iterator {
        Iterator(list: self, slot: head)
    }

    package var underestimatedCount: Int { count }
}

extension LRUList: Sendable where Key: Sendable, Value: Sendable {}
extension LRUList.Element: Sendable where Key: Sendable, Value: Sendable {}
extension LRUList.Node: Sendable where Key: Sendable, Value: Sendable {}
