#!/usr/bin/env bash
# Type-checks, for iOS (arm64-apple-ios16.0, against a real iOS 16.4 SDK), every target of this
# package that builds for iOS: the library (CachingProtocol), LoopbackOrigin and DemoSupport, then
# the three test targets (LoopbackOriginTests, CachingProtocolTests, DemoTests). The executables
# (Demo, CacheTestTool, Fuzz) and CacheBenchmarks are limited to macOS and Linux in Package.swift
# (they start processes), so they are not checked here; nor is the test code that needs them,
# which sits under `#if os(macOS) || os(Linux)`.
#
# Each module is checked twice: type-checking alone, and with SIL diagnostics (definite
# initialisation, isolation). Modules are checked in dependency order; the SIL pass of each one
# that a later one imports emits its interface for iOS, with testing enabled (the test targets
# use `@testable import`). The test targets import XCTest, which no SDK contains: they are
# checked against Scripts/XCTestStandIn, a stand-in that declares Apple's XCTest signatures
# (used here only). Nothing is linked or run; macOS is not covered (no macOS SDK here). See
# Docs/platforms.md.
#
# Usage: Scripts/apple-typecheck.sh [--strict]    (--strict: a warning fails too)
# Environment: APPLE_TYPECHECK, the type-check script (default ../shared/apple/typecheck.sh, else
# /work/shared/apple/typecheck.sh); APPLE_TC_HOME, its work directory (default
# .build/apple-typecheck in this checkout).
set -uo pipefail
cd "$(dirname "$0")/.."

# A work directory of this checkout's own: the type-check script writes each compiler run's
# output to one log file in its work directory and counts the errors there, so two checkouts
# type-checking at once in a shared directory (its default, /tmp/apple-typecheck) count each
# other's diagnostics. The first run in a checkout builds the SDK's modules (about 40 s more).
export APPLE_TC_HOME="${APPLE_TC_HOME:-$PWD/.build/apple-typecheck}"

# The workplace's type-check script, beside the repository (../shared) or at its usual place.
checker="${APPLE_TYPECHECK:-}"
if [ -z "$checker" ]; then
    for candidate in ../shared/apple/typecheck.sh /work/shared/apple/typecheck.sh; do
        if [ -x "$candidate" ]; then checker="$candidate"; break; fi
    done
fi
strict=0
[ "${1:-}" = "--strict" ] && strict=1
[ -n "$checker" ] && [ -x "$checker" ] || { echo "apple-typecheck: no type-check script at $checker (set APPLE_TYPECHECK)" >&2; exit 2; }

modules="$(mktemp -d)"
trap 'rm -rf "$modules"' EXIT
# `package` declarations need the package's name, as SwiftPM passes it.
common=(-package-name cachingprotocol -I "$modules")
status=0
errors=0
warnings=0
checked=0

check() {   # directory, module, mode, extra flags...
    local directory="$1" module="$2" mode="$3"; shift 3
    local last counts
    last="$(APPLE_TC_MODE="$mode" "$checker" "$directory" "$module" -- "${common[@]}" "$@" 2>&1 | tee /dev/stderr | tail -n 1)"
    echo "== $module ($mode): ${last#apple-typecheck }"
    checked=$((checked + 1))
    case "$last" in
        *" errors, "*" warnings")
            counts="${last##*: }"
            errors=$((errors + ${counts%% errors*}))
            counts="${counts#*errors, }"
            warnings=$((warnings + ${counts%% warnings}))
            ;;
        *) errors=$((errors + 1)) ;;  # setup failure: counted as an error
    esac
    case "$last" in
        *" 0 errors, 0 warnings") ;;
        *" 0 errors, "*) [ "$strict" -eq 1 ] && status=1 ;;
        *) status=1 ;;
    esac
}

# Emits a module for the next ones: its interface, with testing enabled for `@testable import`.
emit() { echo -enable-testing -emit-module -emit-module-path "$modules/$1.swiftmodule"; }

{
    for module in CachingProtocol LoopbackOrigin DemoSupport; do
        check "Sources/$module" "$module" typecheck
        # shellcheck disable=SC2046
        check "Sources/$module" "$module" sil $(emit "$module")
    done
    # Apple's XCTest API, declared for the test targets (not part of the package).
    check Scripts/XCTestStandIn XCTest sil -emit-module -emit-module-path "$modules/XCTest.swiftmodule"
    for module in LoopbackOriginTests CachingProtocolTests DemoTests; do
        check "Tests/$module" "$module" typecheck
        check "Tests/$module" "$module" sil
    done
    echo "apple-typecheck: $checked checks, $errors errors, $warnings warnings"
} 2> >(grep -E '(^|: )(error|warning): |^apple-typecheck: ' >&2)
exit "$status"
