#!/usr/bin/env bash
# Tests how Scripts/mac-verify.sh judges a run, from logs made here (it runs the kit on a Mac only,
# but reads a log anywhere: `--parse`). Each case writes a log as swift test or xcodebuild prints
# it, and checks the exit status and the line that says why.
#
# Usage: Scripts/mac-verify-selftest.sh   (exit status 0 when every case is judged as expected)
# Environment: MAC_VERIFY, the script judged (default Scripts/mac-verify.sh; its claim list is read
# from Scripts/mac-verify.sh either way).
set -uo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

# The claim ids mac-verify.sh knows, with where their tests run.
claims="$(sed -nE 's/^    "([AM][0-9]+)\|([AM][0-9]+)\|([a-z]+)\|.*/\2 \3/p' Scripts/mac-verify.sh | sort -u)"

# A test's lines as XCTest prints them on macOS (`swift test`).
test_lines() {   # prefix result
    echo "Test Case '-[CachingProtocolTests.SomeClaimTests test$1_something]' started."
    echo "Test Case '-[CachingProtocolTests.SomeClaimTests test$1_something]' $2 (0.012 seconds)."
}

# A log in which every claim meant for `mode` passed (A14 skipped, as without nginx), except the
# prefixes in `$leave_out`.
passing_log() {   # mode
    echo "mac-verify-mode: $1"
    while read -r prefix where; do
        case " ${leave_out:-} " in *" $prefix "*) continue ;; esac
        case "$where" in
            all) ;;
            macos) [ "$1" = macos ] || continue ;;
            uikit) [ "$1" != macos ] || continue ;;
            *) continue ;;
        esac
        if [ "$prefix" = A14 ]; then test_lines "$prefix" skipped; else test_lines "$prefix" passed; fi
    done <<< "$claims"
}

# Runs the parser on `log` and checks its status and that its output has `expected` (a grep -E
# pattern).
check() {   # name log status expected
    local output status
    output="$("${MAC_VERIFY:-Scripts/mac-verify.sh}" --parse "$2" 2>&1)"
    status=$?
    if [ "$status" != "$3" ] || ! grep -qE "$4" <<< "$output"; then
        echo "FAIL $1: status $status (expected $3), output lacks /$4/:"
        sed 's/^/    /' <<< "$output"
        failures=$((failures + 1))
    else
        echo "ok   $1"
    fi
}

{ passing_log macos; echo "mac-verify-exit: 0"; } > "$work/green.log"
check "every claim ran and passed" "$work/green.log" 0 "mac-verify: macos, .* passed"

{ passing_log macos; echo "mac-verify-exit: 1"; } > "$work/status.log"
check "the test command failed although every test line passed" "$work/status.log" 1 "exited with status 1"

{
    passing_log macos
    echo "Test Case '-[CachingProtocolTests.StreamingClaimTests testA7_bytesArriveWhileTheOriginSends]' started."
    echo "error: Exited with unexpected signal code 11"
    echo "mac-verify-exit: 1"
} > "$work/crash.log"
check "a test crashed the run" "$work/crash.log" 1 "started and never ended \(a crash or a hang\): testA7_bytesArriveWhileTheOriginSends"
check "the crash is named" "$work/crash.log" 1 "the test process died: error: Exited with unexpected signal code 11"

{
    passing_log macos
    echo "Test Case '-[CachingProtocolTests.StreamingClaimTests testA7_bytesArriveWhileTheOriginSends]' started."
} > "$work/cut.log"
check "a log that ends inside a test (no exit status)" "$work/cut.log" 1 "started and never ended"

(leave_out="A7 M3"; passing_log macos; echo "mac-verify-exit: 0") > "$work/missing.log"
check "a claim that did not run" "$work/missing.log" 1 "A7 +NOT RUN"
check "every claim that did not run is named" "$work/missing.log" 1 "M3 +NOT RUN"

{ passing_log macos; test_lines A5 failed; echo "mac-verify-exit: 1"; } > "$work/failed.log"
check "a failed test" "$work/failed.log" 1 "A5 +FAIL"

{ passing_log ios-simulator; echo "mac-verify-exit: 0"; } > "$work/ios.log"
check "the iOS simulator: A18 is macOS's, A17 ran" "$work/ios.log" 0 "A18 +n/a"

(leave_out="A17"; passing_log ios-simulator; echo "mac-verify-exit: 0") > "$work/ios-missing.log"
check "the iOS simulator without A17" "$work/ios-missing.log" 1 "A17 +NOT RUN"

{ echo "mac-verify-mode: macos"; echo "error: could not build"; echo "mac-verify-exit: 1"; } > "$work/nothing.log"
check "nothing ran" "$work/nothing.log" 1 "no test of the kit ran"

if [ "$failures" -gt 0 ]; then
    echo "mac-verify-selftest: $failures case(s) judged wrongly"
    exit 1
fi
echo "mac-verify-selftest: every case judged as expected"
