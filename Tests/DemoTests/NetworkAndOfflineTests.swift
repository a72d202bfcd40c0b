import CachingProtocol
@testable import DemoSupport
import Foundation
import LoopbackOrigin
import XCTest

/// What the user feels: the simulated network (`--network`), the time the app waited and the
/// bytes it moved, and the offline phase, in the table and the JSON.
final class NetworkAndOfflineTests: LoaderRulesTestCase {
    // MARK: Profiles

    func testNetworkProfilesAreChosenByName() throws {
        XCTAssertEqual(try DemoCommand.parse([]), .compare(json: false, network: .fourG, concurrent: true))
        XCTAssertEqual(NetworkProfile.default, .fourG, "a mobile network unless told otherwise")
        XCTAssertEqual(try DemoCommand.parse(["--network", "3g"]), .compare(json: false, network: .threeG))
        XCTAssertEqual(try DemoCommand.parse(["--network=wifi", "--json"]), .compare(json: true, network: .wifi))
        XCTAssertEqual(try DemoCommand.parse(["compare", "--network", "LOOPBACK"]), .compare(json: false, network: .loopback))
        XCTAssertEqual(try DemoCommand.parse(["--json", "--network", "4g", "--sequential"]),
                       .compare(json: true, network: .fourG, concurrent: false))
        XCTAssertEqual(NetworkProfile.all.map(\.name), ["3g", "4g", "wifi", "loopback"])
    }

    func testAnUnknownOrMissingProfileIsOneErrorListingTheValidOnes() {
        let cases: [([String], String)] = [
            (["--network", "5g"], "unknown network profile '5g' (valid: 3g, 4g, wifi, loopback)"),
            (["--network=edge"], "unknown network profile 'edge' (valid: 3g, 4g, wifi, loopback)"),
            (["--network"], "--network needs a profile (valid: 3g, 4g, wifi, loopback)"),
            (["--network", "--json"], "--network needs a profile (valid: 3g, 4g, wifi, loopback)"),
        ]
        for (arguments, message) in cases {
            XCTAssertThrowsError(try DemoCommand.parse(arguments), "\(arguments)") { error in
                XCTAssertEqual((error as? UsageError)?.message, message)
            }
        }
        XCTAssertTrue(DemoCommand.usage.contains("--network NAME"))
    }

    func testProfilesBecomeTheOriginsNetwork() throws {
        let fourG = try XCTUnwrap(NetworkProfile.fourG.simulated)
        XCTAssertEqual(fourG.roundTrip, 0.070)
        XCTAssertEqual(fourG.bytesPerSecond, 1_500_000, "12 Mbit/s")
        XCTAssertEqual(NetworkProfile.threeG.simulated?.bytesPerSecond, 200_000, "1.6 Mbit/s")
        XCTAssertEqual(NetworkProfile.wifi.simulated?.roundTrip, 0.028)
        XCTAssertNil(NetworkProfile.loopback.simulated, "loopback adds nothing")
        XCTAssertEqual(NetworkProfile.fourG.summary, "70 ms round trip, 12 Mbit/s down")
        XCTAssertEqual(NetworkProfile.threeG.summary, "300 ms round trip, 1.6 Mbit/s down")
        for profile in NetworkProfile.all {
            XCTAssertFalse(profile.source.isEmpty, profile.name)
        }
    }

    // MARK: The network on the wire

    func testEveryRequestThatReachesTheOriginWaitsItsRoundTripAndHitsDoNot() async throws {
        // Given a small session on a network with a 20 ms round trip
        let network = NetworkProfile(name: "test", roundTrip: 0.020, bitsPerSecond: 8_000_000, source: "test")
        let comparison = Comparison(scenario: Self.small, clients: [.noCache, .cachingProtocolHead], network: network)
        // When it runs
        let report = try await comparison.run()
        XCTAssertEqual(report.network, network)
        let simulated = try XCTUnwrap(network.simulated)
        for client in report.clients {
            XCTAssertEqual(client.anomalies, [], client.name)
            for record in client.records where !record.hops.isEmpty {
                // Then each answer that needed the origin took at least its round trips and its
                // bytes' transmission time (lower bounds: the origin waits at least that long)
                let floor = Double(record.hops.count) * simulated.roundTrip + simulated.transmissionTime(bytes: record.originBytes)
                XCTAssertGreaterThanOrEqual(record.milliseconds / 1000, floor, "\(client.name) \(record.path) at \(record.phase)")
            }
            XCTAssertGreaterThanOrEqual(client.waitedSeconds,
                                        Double(client.records.flatMap(\.hops).count) * simulated.roundTrip)
        }
        // and the cache's answers never touched the network
        let ours = try XCTUnwrap(report.client(.cachingProtocolHead))
        XCTAssertGreaterThan(ours.fromCache, 0)
        XCTAssertTrue(ours.records.filter { $0.answer == .fromCache }.allSatisfy(\.hops.isEmpty))
        XCTAssertLessThan(ours.originRequestTotal, try XCTUnwrap(report.client(.noCache)).originRequestTotal)
    }

    // MARK: Offline

    func testOfflineTheProtocolAnswersWhatItStoredAndNoCacheNothing() async throws {
        // Given a session that stores a few resources, then loses the network
        let report = try await Comparison(scenario: Self.small, clients: [.noCache, .cachingProtocolHead]).run()
        let plain = try XCTUnwrap(report.client(.noCache))
        let ours = try XCTUnwrap(report.client(.cachingProtocolHead))
        let offline = try XCTUnwrap(Self.small.offline)

        // Then the plain client answers nothing
        let plainOffline = try XCTUnwrap(plain.offline)
        XCTAssertEqual(plainOffline.requests, offline.actions.count)
        XCTAssertEqual(plainOffline.answered, 0)
        XCTAssertEqual(plainOffline.failed, offline.actions.count)
        XCTAssertNil(plain.offlineSwitched, "only protocol clients have an offline switch")

        // and the protocol answers at least every request whose response it stored
        let stored = Set(ours.records.filter { $0.cacheStatus?.contains("stored") == true }.map(\.path))
        XCTAssertEqual(stored, [DemoSite.configPath, DemoSite.catalogPath, DemoSite.avatarPath])
        let ourOffline = try XCTUnwrap(ours.offline)
        let answered = Set(ourOffline.records.filter(\.isAnswered).map(\.path))
        XCTAssertTrue(stored.isSubset(of: answered), "stored \(stored), answered \(answered)")
        XCTAssertEqual(ourOffline.answered, stored.count)
        XCTAssertEqual(ourOffline.wrongAnswers, 0)
        // (the catalog's max-age ran out an hour ago: served stale because the origin is unreachable)
        XCTAssertEqual(ourOffline.staleAnswers, 1)
        XCTAssertEqual(ourOffline.records.first { $0.path == DemoSite.catalogPath }?.cacheOutcome, "staleAfterError")
        XCTAssertEqual(Set(ourOffline.unanswered), ["GET /api/feed.json: cannot connect", "POST /api/like: cannot connect"])
        // and told it is offline, the same, without trying the network first
        let switched = try XCTUnwrap(ours.offlineSwitched)
        XCTAssertEqual(Set(switched.records.filter(\.isAnswered).map(\.path)), answered)
        XCTAssertEqual(ours.anomalies, [], "offline failures are expected, not anomalies")
    }

    func testANoCacheResponseIsNotServedAfterAnErrorButIsInOfflineMode() async throws {
        // The standard session's scores carry `Cache-Control: no-cache`: RFC 9111 §4.2.4 forbids
        // serving them stale, so with the origin unreachable the cache answers 504; offline mode
        // serves whatever is stored. The README's Offline numbers depend on this.
        let report = try await Comparison(clients: [.cachingProtocolHead]).run()
        let ours = try XCTUnwrap(report.client(.cachingProtocolHead))
        let offline = try XCTUnwrap(ours.offline)
        let scores = try XCTUnwrap(offline.records.first { $0.path == DemoSite.scoresPath })
        XCTAssertEqual(scores.status, 504)
        XCTAssertFalse(scores.isAnswered)
        XCTAssertEqual(scores.failure, "504 from the cache")
        let switched = try XCTUnwrap(ours.offlineSwitched)
        XCTAssertTrue(try XCTUnwrap(switched.records.first { $0.path == DemoSite.scoresPath }).isAnswered)
        XCTAssertEqual(switched.answered, offline.answered + 1)
    }

    // MARK: The report

    func testTheReportCarriesWaitedTimeBytesAndOfflineAnswers() async throws {
        let report = try await Comparison().run()
        let offlineCount = try XCTUnwrap(Scenario.standard.offline).actions.count
        for client in report.clients {
            XCTAssertGreaterThan(client.waitedSeconds, 0, client.name)
            XCTAssertGreaterThan(client.originBytesReceived, 0, client.name)
            XCTAssertEqual(client.bytesMoved, client.originBytes + client.originBytesReceived)
            XCTAssertGreaterThanOrEqual(client.originConnections, 1)
            XCTAssertEqual(client.offline?.requests, offlineCount, client.name)
            XCTAssertEqual(client.offlineSwitched != nil, client.kind.usesProtocol, client.name)
        }
        let plain = try XCTUnwrap(report.client(.noCache))
        XCTAssertEqual(plain.offline?.answered, 0)
        for kind in [ClientKind.cachingProtocolHead, .cachingProtocolConditionalGet] {
            let ours = try XCTUnwrap(report.client(kind))
            XCTAssertLessThan(ours.bytesMoved, plain.bytesMoved)
            XCTAssertGreaterThan(try XCTUnwrap(ours.offline).answered, 0)
        }

        let text = ReportText.render(report)
        XCTAssertTrue(text.contains("network: loopback"), text)
        XCTAssertTrue(text.contains("app waited"))
        XCTAssertTrue(text.contains("less waiting"))
        XCTAssertTrue(text.contains("Offline (offline +8 d 1 h)"))
        for client in report.clients {
            let offline = try XCTUnwrap(client.offline)
            let row = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("  " + client.name) && $0.contains(" of ") })
            XCTAssertTrue(row.contains("\(offline.answered) of \(offline.requests)"), String(row))
        }
        XCTAssertTrue(text.contains("told isOffline = true"))
    }

    func testTheJSONCarriesTheSameAndReadsBack() async throws {
        let report = try await Comparison(network: Self.fast).run()
        let data = try ReportJSON.data(report)
        let document = try ReportJSON.decode(data)

        // It round-trips, and says what the table says
        XCTAssertEqual(document, ReportJSON.document(report))
        XCTAssertEqual(try ReportJSON.data(report), data, "stable output")
        XCTAssertEqual(document.network.name, "fast")
        XCTAssertEqual(document.network.roundTripMilliseconds, 1)
        XCTAssertEqual(document.network.downloadBitsPerSecond, 800_000_000)
        XCTAssertTrue(document.concurrent)
        XCTAssertEqual(document.scenario.offlinePhase?.name, Scenario.standard.offline?.name)
        XCTAssertEqual(document.clients.map(\.id), report.clients.map(\.kind.rawValue))
        for (json, client) in zip(document.clients, report.clients) {
            XCTAssertEqual(json.originBytes, client.originBytes)
            XCTAssertEqual(json.originBytesReceived, client.originBytesReceived)
            XCTAssertEqual(json.bytesMoved, client.bytesMoved)
            XCTAssertEqual(json.waitedSeconds, client.waitedSeconds, accuracy: 0.001)
            XCTAssertEqual(json.offline?.answered, client.offline?.answered)
            XCTAssertEqual(json.offline?.failed, client.offline?.failed)
            XCTAssertEqual(json.offline?.unanswered, client.offline?.unanswered)
            XCTAssertEqual(json.offlineSwitched?.answered, client.offlineSwitched?.answered)
            XCTAssertNotNil(json.medianMilliseconds["fetched"])
        }
        // The raw keys scripts read
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let client = try XCTUnwrap((object["clients"] as? [[String: Any]])?.first)
        for key in ["waitedSeconds", "bytesMoved", "originBytesReceived", "offline"] {
            XCTAssertNotNil(client[key], key)
        }
    }

    func testClientsRunningAtOnceCountTheSameAsOneAfterAnother() async throws {
        let together = try await Comparison(scenario: Self.small).run()
        let apart = try await Comparison(scenario: Self.small, concurrent: false).run()
        XCTAssertFalse(apart.concurrent)
        for (a, b) in zip(together.clients, apart.clients) {
            XCTAssertEqual(a.originRequests, b.originRequests, a.name)
            XCTAssertEqual(a.originBytes, b.originBytes, a.name)
            XCTAssertEqual(a.records.map(\.answer), b.records.map(\.answer), a.name)
            XCTAssertEqual(a.offline?.answered, b.offline?.answered, a.name)
            XCTAssertEqual(a.anomalies, [], a.name)
        }
    }

    // MARK: Fixtures

    /// Launch (config, catalog, avatar, feed), a refresh ten seconds later, then two hours on,
    /// offline: the same four GETs and a like.
    static let small = Scenario(
        phases: [
            Scenario.Phase(name: "launch", offset: 0, actions: [
                .get(DemoSite.configPath), .get(DemoSite.catalogPath), .get(DemoSite.avatarPath), .get(DemoSite.feedPath),
            ]),
            Scenario.Phase(name: "refresh +10 s", offset: 10, actions: [
                .get(DemoSite.catalogPath), .get(DemoSite.avatarPath), .get(DemoSite.feedPath),
            ]),
        ],
        offline: Scenario.Phase(name: "offline +2 h", offset: 7_200, actions: [
            .get(DemoSite.configPath), .get(DemoSite.catalogPath), .get(DemoSite.avatarPath), .get(DemoSite.feedPath),
            .post(DemoSite.likePath, body: "{\"post\":1}"),
        ]))

    /// A network that adds next to nothing, for tests that only need one set.
    static let fast = NetworkProfile(name: "fast", roundTrip: 0.001, bitsPerSecond: 800_000_000, source: "test")
}
