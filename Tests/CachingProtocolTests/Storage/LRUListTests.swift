import XCTest
@testable import CachingProtocol

final class LRUListTests: LoaderRulesTestCase {
    private func keys(_ list: LRUList<String, Int>) -> [String] {
        list.map(\.key)
    }

    func testInsertOrdersFromLeastToMostRecentAndSumsCosts() {
        // Given an empty list
        var list = LRUList<String, Int>()
        // When three keys are inserted
        list.set(1, forKey: "a", cost: 10)
        list.set(2, forKey: "b", cost: 20)
        list.set(3, forKey: "c", cost: 30)
        // Then they iterate oldest first and the costs add up
        XCTAssertEqual(keys(list), ["a", "b", "c"])
        XCTAssertEqual(list.count, 3)
        XCTAssertEqual(list.totalCost, 60)
        XCTAssertEqual(list.leastRecent?.key, "a")
    }

    func testTouchMovesToMostRecent() {
        var list = LRUList<String, Int>()
        for (index, key) in ["a", "b", "c"].enumerated() { list.set(index, forKey: key, cost: 1) }
        // When the oldest is touched
        XCTAssertEqual(list.touch("a"), 0)
        // Then it is the newest
        XCTAssertEqual(keys(list), ["b", "c", "a"])
        // And touching the newest or a missing key changes nothing
        XCTAssertEqual(list.touch("a"), 0)
        XCTAssertNil(list.touch("zzz"))
        XCTAssertEqual(keys(list), ["b", "c", "a"])
    }

    func testPeekDoesNotReorder() {
        var list = LRUList<String, Int>()
        list.set(1, forKey: "a", cost: 1)
        list.set(2, forKey: "b", cost: 1)
        XCTAssertEqual(list.peek("a"), 1)
        XCTAssertEqual(keys(list), ["a", "b"])
    }

    func testUpdateReplacesValueAndCostAndMovesToMostRecent() {
        var list = LRUList<String, Int>()
        list.set(1, forKey: "a", cost: 10)
        list.set(2, forKey: "b", cost: 10)
        // When "a" is set again with a new cost
        let old = list.set(9, forKey: "a", cost: 50)
        // Then the old value is returned, the cost is replaced and "a" is newest
        XCTAssertEqual(old, 1)
        XCTAssertEqual(list.peek("a"), 9)
        XCTAssertEqual(list.totalCost, 60)
        XCTAssertEqual(keys(list), ["b", "a"])
        XCTAssertEqual(list.count, 2)
    }

    func testRemoveAndPopLeastRecent() {
        var list = LRUList<String, Int>()
        for (index, key) in ["a", "b", "c", "d"].enumerated() { list.set(index, forKey: key, cost: index + 1) }
        // When a middle element is removed and the oldest popped
        XCTAssertEqual(list.removeValue(forKey: "c"), 2)
        XCTAssertNil(list.removeValue(forKey: "c"))
        let popped = list.popLeastRecent()
        // Then the links and cost stay consistent
        XCTAssertEqual(popped?.key, "a")
        XCTAssertEqual(popped?.cost, 1)
        XCTAssertEqual(keys(list), ["b", "d"])
        XCTAssertEqual(list.totalCost, 2 + 4)
        XCTAssertEqual(list.popLeastRecent()?.key, "b")
        XCTAssertEqual(list.popLeastRecent()?.key, "d")
        XCTAssertNil(list.popLeastRecent())
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.totalCost, 0)
    }

    func testFreedSlotsAreReused() {
        var list = LRUList<String, Int>()
        for round in 0..<1000 {
            list.set(round, forKey: "k\(round % 10)", cost: 1)
            if round % 3 == 0 { list.removeValue(forKey: "k\((round + 5) % 10)") }
        }
        XCTAssertLessThanOrEqual(list.count, 10)
        XCTAssertEqual(list.totalCost, list.count)
        XCTAssertEqual(Set(keys(list)).count, list.count)
    }

    func testSetLeastRecentInsertsAtTheFront() {
        var list = LRUList<String, Int>()
        list.set(1, forKey: "a", cost: 1)
        list.setLeastRecent(0, forKey: "z", cost: 5)
        XCTAssertEqual(keys(list), ["z", "a"])
        XCTAssertEqual(list.totalCost, 6)
        // On an existing key it replaces in place
        list.setLeastRecent(7, forKey: "a", cost: 2)
        XCTAssertEqual(keys(list), ["z", "a"])
        XCTAssertEqual(list.peek("a"), 7)
        XCTAssertEqual(list.totalCost, 7)
    }

    func testModifyChangesValueInPlace() {
        var list = LRUList<String, [Int]>()
        list.set([1], forKey: "a", cost: 1)
        list.set([2], forKey: "b", cost: 1)
        XCTAssertTrue(list.modify("a") { $0.append(5) })
        XCTAssertFalse(list.modify("x") { $0.append(5) })
        XCTAssertEqual(list.peek("a"), [1, 5])
        XCTAssertEqual(list.map(\.key), ["a", "b"])
    }

    func testIsAValueType() {
        // Given a list and a copy
        var original = LRUList<String, Int>()
        original.set(1, forKey: "a", cost: 1)
        original.set(2, forKey: "b", cost: 1)
        var copy = original
        // When the copy changes
        _ = copy.touch("a")
        copy.removeValue(forKey: "b")
        copy.set(3, forKey: "c", cost: 1)
        // Then the original does not
        XCTAssertEqual(keys(original), ["a", "b"])
        XCTAssertEqual(copy.map(\.key), ["a", "c"])
    }

    func testMatchesAReferenceModelUnderRandomOperations() {
        // A naive array model checked against the list after every step.
        var list = LRUList<Int, Int>()
        var model: [(key: Int, value: Int, cost: Int)] = []
        var generator = SystemRandomNumberGenerator()
        for step in 0..<5000 {
            let key = Int.random(in: 0..<40, using: &generator)
            switch Int.random(in: 0..<5, using: &generator) {
            case 0, 1:
                let cost = Int.random(in: 0..<100, using: &generator)
                list.set(step, forKey: key, cost: cost)
                model.removeAll { $0.key == key }
                model.append((key, step, cost))
            case 2:
                let value = list.touch(key)
                if let index = model.firstIndex(where: { $0.key == key }) {
                    XCTAssertEqual(value, model[index].value)
                    model.append(model.remove(at: index))
                } else {
                    XCTAssertNil(value)
                }
            case 3:
                let value = list.removeValue(forKey: key)
                let index = model.firstIndex { $0.key == key }
                XCTAssertEqual(value, index.map { model[$0].value })
                if let index { model.remove(at: index) }
            default:
                let popped = list.popLeastRecent()
                XCTAssertEqual(popped?.key, model.first?.key)
                if !model.isEmpty { model.removeFirst() }
            }
            XCTAssertEqual(list.map(\.key), model.map(\.key))
            XCTAssertEqual(list.totalCost, model.reduce(0) { $0 + $1.cost })
        }
    }
}
