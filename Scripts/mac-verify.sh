#!/usr/bin/env bash
# Runs the Apple claim kit (Tests/CachingProtocolTests/AppleClaims) on a Mac and prints one row per
# claim of Docs/foundation-facts.md (A1-A25) and of Docs/platforms.md's "What only a Mac can still
# prove" (M1-M4): pass, FAIL, skipped, or not run. Written on Linux and never run on a Mac: see
# Docs/platforms.md, "The Apple claim kit". Its reading of a log is tested on Linux by
# Scripts/mac-verify-selftest.sh.
#
# Usage:
#   Scripts/mac-verify.sh                              macOS: swift test, the kit's classes only
#   Scripts/mac-verify.sh --ios-simulator DESTINATION  the iOS simulator, with xcodebuild, e.g.
#                                                      'platform=iOS Simulator,name=iPhone 16,OS=18.5'
#   Scripts/mac-verify.sh --tvos-simulator DESTINATION the tvOS simulator, likewise
#   Scripts/mac-verify.sh --parse LOG [--as MODE]      only the table, from the log of an earlier run
#                                                      (MODE: macos, ios-simulator or tvos-simulator,
#                                                      when the log does not say)
# Options: --log FILE keeps the test output there (default: a temporary file, printed at the end).
# The log begins with "mac-verify-mode: MODE" and ends with "mac-verify-exit: STATUS", the test
# command's exit status, so a log read again later is judged as the run was.
#
# The server-trust claims (A14/M1) need nginx, which serves HTTPS on loopback: `brew install nginx`.
# Without it they are skipped, unless CACHINGPROTOCOL_REQUIRE_NGINX=1 (then they fail). They run on
# macOS only: nginx is a child process, which the simulators cannot start.
#
# Exit status: 0 when the test command succeeded, no test of the kit failed, none started without
# ending (a crash or a hang), the log shows no crash, and every claim meant for the platform ran
# (passed, or skipped with its reason); 1 otherwise; 2 for a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."

# Each claim: its id, the prefix of its tests' names (testA4_…), where its tests run (all: every
# platform; macos; uikit: the iOS and tvOS simulators; none: it has no test), and what it says.
claims=(
    "A1|A1|all|URLCache's labelled initialiser is the overlay's convenience one and runs the cache's own; NSURLCache's initialisers do not re-enter the overrides"
    "A2|A2|all|client calls run on the thread that called startLoading, in its run loop's current mode; the system starts loads inside a running run loop"
    "A3|A3|all|the system asks canInit(with task:): download and upload tasks are left to it"
    "A4|A4|all|a redirect reported by the layer, from the origin or the cache, is followed by the system, which asks the delegate"
    "A5|A5|all|an authentication challenge reaches the app's delegate through the layer, and its answer goes upstream"
    "A6|A6|all|a protocol gets the request before the system adds cookies; copy() keeps an ephemeral configuration's jar"
    "A7|A7|all|every didLoad piece reaches completion handlers, async calls, bytes(for:) and delegates"
    "A8|A8|all|a background session never consults a protocol"
    "A9|A9|all|URLSession.shared, made before register(), consults the registered protocol"
    "A10|A10|all|NSURLConnection consults the registered protocol"
    "A11|A11|all|no lock is held across a client call: a client that re-enters the protocol does not trap"
    "A12|A12|none|no custom protocols on watchOS (no test: watchOS is not a platform of the package)"
    "A13|A13|all|an unreadable file is unavailable, not corrupt, and served once readable; files get the protection class asked for (device)"
    "A14|A14|all|a pinning delegate named to inject gets the cache's server-trust challenge and its answer decides the connection (macOS)"
    "A15|A15|all|a refused redirect ends with the 3xx and its body when the delegate was named, with an error when not"
    "A16|A16|all|fcntl(F_FULLFSYNC) is accepted where the cache writes"
    "A17|A17|uikit|the cache observes UIKit's own memory warning (iOS, tvOS)"
    "A18|A18|macos|macOS: memory pressure turning critical moves memory to disk; the source goes with the cache"
    "A19|A19|all|each redirect hop is made anew: the jar's cookies for its URL, no Authorization to another origin; through the layer each origin receives the same fields"
    "A20|A20|all|User-Agent and Accept-Language are added after the protocols saw the request; through the layer the origin receives the same values"
    "A21|A21|all|a protocol gets an httpBody as a stream; no client call asks for a body stream or reports upload progress; an upload through the layer is sent and reported as without it"
    "A22|A22|all|URLSessionTask declares no public session (compile time); the task a protocol is asked about leads to no session delegate"
    "A23|A23|all|a session made from URLSessionConfiguration.default never consults a registered class; URLSession.shared does"
    "A24|A24|all|every load a URLSession starts has its task, so URLSession.shared shares what a session without a delegate stored"
    "A25|A25|all|a Cookie the app set on its request is sent instead of the jar's; the jar's replace one in the session's additional headers; the app's own goes on to a redirect hop; through the layer the same"
    "M1|A14|all|server trust through the layer (the A14 tests)"
    "M2|M2|all|responds(to:) finds Swift delegates' challenge and redirect methods, async forms included; a task's own delegate is set when the system asks about the task"
    "M3|M3|all|a followed redirect never ends with the 3xx, over 1,000 runs, while the delegate decides and without one"
    "M4|M4|all|default handling finds the app's stored credential, proposes it, and sends it only to its origin"
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
        --as)
            [ $# -ge 2 ] || { echo "mac-verify: --as needs a mode" >&2; exit 2; }
            case "$2" in macos|ios-simulator|tvos-simulator) mode="$2" ;; *) echo "mac-verify: unknown mode $2" >&2; exit 2 ;; esac
            shift ;;
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
    [ -f "$log" ] || { echo "mac-verify: no log at $log" >&2; exit 2; }
else
    [ "$(uname -s)" = Darwin ] || { echo "mac-verify: runs on a Mac (this is $(uname -s)); --parse reads a log anywhere" >&2; exit 2; }
    [ -n "$log" ] || log="$(mktemp -t mac-verify.XXXXXX)"
    echo "mac-verify-mode: $mode" > "$log"
    case "$mode" in
        macos)
            filter="CachingProtocolTests\\.($(IFS='|'; echo "${classes[*]}"))/"
            echo "mac-verify: swift test --filter '$filter' (output: $log)"
            swift test --filter "$filter" 2>&1 | tee -a "$log"
            test_status=${PIPESTATUS[0]}
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
                "${only[@]}" 2>&1 | tee -a "$log"
            test_status=${PIPESTATUS[0]}
            ;;
    esac
    echo "mac-verify-exit: $test_status" >> "$log"
fi

# What the log says of the run: its mode, and the test command's exit status (none: a log written
# by hand or cut short, judged by its test lines alone).
logged_mode="$(sed -nE 's/^mac-verify-mode: ([a-z-]+)$/\1/p' "$log" | tail -1)"
[ -n "$logged_mode" ] && mode="$logged_mode"
exit_status="$(sed -nE 's/^mac-verify-exit: ([0-9]+)$/\1/p' "$log" | tail -1)"

# One line per test that ended: "<claim prefix> <test> <passed|failed|skipped>". XCTest prints
# "Test Case '-[Module.Class testA4_name]' passed (0.1 seconds)."; Xcode 16 may print
# "Test case 'Class.testA4_name()' passed on 'Clone 1 of …' (0.1 seconds)".
results="$(sed -nE "s/.*[ .](test(([AM][0-9]+)_[A-Za-z0-9_]+))(\]|\(\))' (passed|failed|skipped).*/\3 \1 \5/p" "$log" | sort -u)"
# Every test that started, by name: one that started and never ended crashed the run or hung it.
started="$(sed -nE "s/.*[ .](test[A-Za-z0-9_]+)(\]|\(\))' started.*/\1/p" "$log" | sort -u)"
ended="$(sed -nE "s/.*[ .](test[A-Za-z0-9_]+)(\]|\(\))' (passed|failed|skipped).*/\1/p" "$log" | sort -u)"
unfinished="$(comm -23 <(printf '%s\n' "$started" | sed '/^$/d') <(printf '%s\n' "$ended" | sed '/^$/d'))"
# What swift test, XCTest and xcodebuild print when the test process dies.
crash="$(grep -E "Exited with (unexpected )?signal code|Restarting after unexpected exit|crashed with signal|Fatal error:|error: Exited with" "$log" | head -3)"

applies() {   # whether a claim's tests run in this mode
    case "$1" in
        all) true ;;
        macos) [ "$mode" = macos ] ;;
        uikit) [ "$mode" != macos ] ;;
        *) false ;;
    esac
}

printf '\n%-8s %-8s %-22s %s\n' claim result "tests pass/fail/skip" "what it shows"
status=0
ran=0
for entry in "${claims[@]}"; do
    IFS='|' read -r id prefix where text <<< "$entry"
    passed=$(grep -c "^$prefix test.* passed$" <<< "$results")
    failed=$(grep -c "^$prefix test.* failed$" <<< "$results")
    skipped=$(grep -c "^$prefix test.* skipped$" <<< "$results")
    if [ "$failed" -gt 0 ]; then verdict=FAIL; status=1
    elif [ "$passed" -gt 0 ]; then verdict=pass
    elif [ "$skipped" -gt 0 ]; then verdict=skipped
    elif applies "$where"; then verdict="NOT RUN"; status=1
    else verdict="n/a"
    fi
    ran=$((ran + passed + failed))
    printf '%-8s %-8s %-22s %s\n' "$id" "$verdict" "$passed/$failed/$skipped" "$text"
done
grep "^.* failed$" <<< "$results" | sed 's/^/failed: /'
if [ -n "$unfinished" ]; then
    sed 's/^/started and never ended (a crash or a hang): /' <<< "$unfinished"
    status=1
fi
if [ -n "$crash" ]; then
    sed 's/^/the test process died: /' <<< "$crash"
    status=1
fi
if [ -n "$exit_status" ] && [ "$exit_status" != 0 ]; then
    echo "mac-verify: the test command exited with status $exit_status"
    status=1
fi
[ "$ran" -gt 0 ] || { echo "mac-verify: no test of the kit ran (see $log)"; status=1; }
echo "mac-verify: $mode, log $log, $([ "$status" = 0 ] && echo passed || echo FAILED)"
exit "$status"
