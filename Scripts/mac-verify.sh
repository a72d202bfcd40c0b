#!/usr/bin/env bash
# Runs the Apple claim kit (Tests/CachingProtocolTests/AppleClaims) on a Mac and prints one row per
# claim of Docs/foundation-facts.md (A1-A22) and of Docs/platforms.md's "What only a Mac can still
# prove" (M1-M4): pass, FAIL, skipped, or not run. Written on Linux and never run: see
# Docs/platforms.md, "The Apple claim kit".
#
# Usage:
#   Scripts/mac-verify.sh                              macOS: swift test, the kit's classes only
#   Scripts/mac-verify.sh --ios-simulator DESTINATION  the iOS simulator, with xcodebuild, e.g.
#                                                      'platform=iOS Simulator,name=iPhone 16,OS=18.5'
#   Scripts/mac-verify.sh --tvos-simulator DESTINATION the tvOS simulator, likewise
#   Scripts/mac-verify.sh --parse LOG                  only the table, from the output of an earlier run
# Options: --log FILE keeps the test output there (default: a temporary file, printed at the end).
#
# The server-trust claims (A14/M1) need nginx, which serves HTTPS on loopback: `brew install nginx`.
# Without it they are skipped, unless CACHINGPROTOCOL_REQUIRE_NGINX=1 (then they fail). They run on
# macOS only: nginx is a child process, which the simulators cannot start.
#
# Exit status: 0 when no test of the kit failed and some ran, 1 otherwise, 2 for a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."

# Each claim: its id, the prefix of its tests' names (testA4_…), and what it says.
claims=(
    "A1|A1|URLCache's labelled initialiser is the overlay's convenience one and runs the cache's own; NSURLCache's initialisers do not re-enter the overrides"
    "A2|A2|client calls run on the thread that called startLoading, in its run loop's current mode; the system starts loads inside a running run loop"
    "A3|A3|the system asks canInit(with task:): download and upload tasks are left to it"
    "A4|A4|a redirect reported by the layer, from the origin or the cache, is followed by the system, which asks the delegate"
    "A5|A5|an authentication challenge reaches the app's delegate through the layer, and its answer goes upstream"
    "A6|A6|a protocol gets the request before the system adds cookies; copy() keeps an ephemeral configuration's jar"
    "A7|A7|every didLoad piece reaches completion handlers, async calls, bytes(for:) and delegates"
    "A8|A8|a background session never consults a protocol"
    "A9|A9|URLSession.shared, made before register(), consults the registered protocol"
    "A10|A10|NSURLConnection consults the registered protocol"
    "A11|A11|no lock is held across a client call: a client that re-enters the protocol does not trap"
    "A12|A12|no custom protocols on watchOS (no test: watchOS is not a platform of the package)"
    "A13|A13|an unreadable file is unavailable, not corrupt, and served once readable; files get the protection class asked for (device)"
    "A14|A14|a pinning delegate named to inject gets the cache's server-trust challenge and its answer decides the connection (macOS)"
    "A15|A15|a refused redirect ends with the 3xx and its body when the delegate was named, with an error when not"
    "A16|A16|fcntl(F_FULLFSYNC) is accepted where the cache writes"
    "A17|A17|the cache observes UIKit's own memory warning (iOS, tvOS)"
    "A18|A18|macOS: memory pressure turning critical moves memory to disk; the source goes with the cache"
    "A19|A19|each redirect hop is made anew: the jar's cookies for its URL, no Authorization to another origin; through the layer each origin receives the same fields"
    "A20|A20|User-Agent and Accept-Language are added after the protocols saw the request; through the layer the origin receives the same values"
    "A21|A21|a protocol gets an httpBody as a stream; no client call asks for a body stream or reports upload progress; an upload through the layer is sent and reported as without it"
    "A22|A22|URLSessionTask declares no public session (compile time); the task a protocol is asked about leads to no session delegate"
    "M1|A14|server trust through the layer (the A14 tests)"
    "M2|M2|responds(to:) finds Swift delegates' challenge and redirect methods, async forms included; a task's own delegate is set when the system asks about the task"
    "M3|M3|a followed redirect never ends with the 3xx, over 1,000 runs, while the delegate decides and without one"
    "M4|M4|default handling finds the app's stored credential, proposes it, and sends it only to its origin"
)

mode=macos
destination=
parse_only=
log=
while [ $# -gt 0 ]; do
    case "$1" in
        --ios-simulator|--tvos-simulator)
            [ $# -ge 2 ] || { echo "mac-verify: $1 needs a destination" >&2; exit 2; }
            mode="${1#--}"; destination="$2"; shift ;;
        --parse) [ $# -ge 2 ] || { echo "mac-verify: --parse needs a log file" >&2; exit 2; }; parse_only="$2"; shift ;;
        --log) [ $# -ge 2 ] || { echo "mac-verify: --log needs a file" >&2; exit 2; }; log="$2"; shift ;;
        *) echo "mac-verify: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
    esac
    shift
done

# The kit's test classes: one per file of the folder.
classes=()
for file in Tests/CachingProtocolTests/AppleClaims/*ClaimTests.swift; do
    classes+=("$(basename "$file" .swift)")
done

if [ -n "$parse_only" ]; then
    log="$parse_only"
else
    [ "$(uname -s)" = Darwin ] || { echo "mac-verify: runs on a Mac (this is $(uname -s)); --parse reads a log anywhere" >&2; exit 2; }
    [ -n "$log" ] || log="$(mktemp -t mac-verify.XXXXXX)"
    case "$mode" in
        macos)
            filter="CachingProtocolTests\\.($(IFS='|'; echo "${classes[*]}"))/"
            echo "mac-verify: swift test --filter '$filter' (output: $log)"
            swift test --filter "$filter" 2>&1 | tee "$log"
            ;;
        ios-simulator|tvos-simulator)
            # Xcode reads a package's shared schemes from .swiftpm (not tracked): Scripts/xcode/README.md.
            mkdir -p .swiftpm/xcode/xcshareddata/xcschemes
            cp Scripts/xcode/CachingProtocol-iOS.xcscheme .swiftpm/xcode/xcshareddata/xcschemes/
            only=()
            for class in "${classes[@]}"; do only+=("-only-testing:CachingProtocolTests/$class"); done
            echo "mac-verify: xcodebuild test -scheme CachingProtocol-iOS -destination '$destination' (output: $log)"
            # -parallel-testing-enabled NO: one simulator, tests in order, one line per test.
            xcodebuild test -scheme CachingProtocol-iOS -destination "$destination" -parallel-testing-enabled NO \
                "${only[@]}" 2>&1 | tee "$log"
            ;;
    esac
fi
[ -f "$log" ] || { echo "mac-verify: no log at $log" >&2; exit 2; }

# One line per test that ended: "<claim prefix> <test> <passed|failed|skipped>". XCTest prints
# "Test Case '-[Module.Class testA4_name]' passed (0.1 seconds)."; Xcode 16 may print
# "Test case 'Class.testA4_name()' passed on 'Clone 1 of …' (0.1 seconds)".
results="$(sed -nE "s/.*[ .](test(([AM][0-9]+)_[A-Za-z0-9_]+))(\]|\(\))' (passed|failed|skipped).*/\3 \1 \5/p" "$log" | sort -u)"

printf '\n%-8s %-8s %-22s %s\n' claim result "tests pass/fail/skip" "what it shows"
status=0
ran=0
for entry in "${claims[@]}"; do
    IFS='|' read -r id prefix text <<< "$entry"
    passed=$(grep -c "^$prefix test.* passed$" <<< "$results")
    failed=$(grep -c "^$prefix test.* failed$" <<< "$results")
    skipped=$(grep -c "^$prefix test.* skipped$" <<< "$results")
    if [ "$failed" -gt 0 ]; then verdict=FAIL; status=1
    elif [ "$passed" -gt 0 ]; then verdict=pass
    elif [ "$skipped" -gt 0 ]; then verdict=skipped
    else verdict="not run"
    fi
    ran=$((ran + passed + failed))
    printf '%-8s %-8s %-22s %s\n' "$id" "$verdict" "$passed/$failed/$skipped" "$text"
done
grep "^.* failed$" <<< "$results" | sed 's/^/failed: /'
[ "$ran" -gt 0 ] || { echo "mac-verify: no test of the kit ran (see $log)"; status=1; }
echo "mac-verify: $mode, log $log"
exit "$status"
