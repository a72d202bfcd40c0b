#!/usr/bin/env bash
# Type-checks every target of this package that builds for an Apple platform against each Apple SDK
# subset beside the workplace's type-check script (../shared/apple): iOS 16.4, iOS 18.6, iOS 26.2,
# macOS 15.5 and tvOS 18.0, each at the package's deployment target (iOS 16, macOS 13, tvOS 16), in
# Swift 6 mode. Nothing is linked or run. See Docs/platforms.md.
#
# Per SDK, in dependency order:
# - the libraries CachingProtocol (with the `Bundle.module` accessor SwiftPM generates for its
#   resources), LoopbackOrigin and DemoSupport, and on macOS CacheBenchmarks;
# - on macOS the executables Demo, CacheTestTool and Fuzz (Package.swift builds them, and
#   CacheBenchmarks, on macOS and Linux only: Xcode has no command-line-tool product for iOS or
#   tvOS);
# - the three test targets LoopbackOriginTests, CachingProtocolTests and DemoTests, against
#   Scripts/XCTestStandIn: XCTest is in no SDK (Xcode ships it with the platform), so a stand-in
#   that declares Apple's XCTest signatures is emitted for them (used here only).
# Each module is checked with SIL diagnostics (`APPLE_TC_MODE=sil`: it type-checks first, then
# checks definite initialisation, region-based isolation and `sending`); a type-check alone
# reported nothing more on any module (2026-11-26), so it is not run separately. The check of
# each library a later module imports also emits its interface for that SDK, with testing enabled
# (the tests use `@testable import`).
#
# Usage: Scripts/apple-typecheck.sh [--strict] [--sdk NAME]...
#   --strict     a warning fails the run too (`.ci/run` passes it)
#   --sdk NAME   check only this SDK (repeatable); NAME as the type-check script spells it
#                (iOS16.4, iOS18.6, iOS26.2, macOS15.5, tvOS18.0, or a short form such as macOS)
# Environment: APPLE_TC_SDK, one SDK to check (as --sdk, for callers of the one-SDK version of
# this script); APPLE_TYPECHECK, the type-check script (default ../shared/apple/typecheck.sh,
# else /work/shared/apple/typecheck.sh); APPLE_TC_HOME, its work directory (default
# .build/apple-typecheck in this checkout).
#
# Last lines: one per SDK, `apple-typecheck <SDK>: N checks, E errors, W warnings`, then the total.
# Exit status: 0 when every check passed (with --strict: and nothing warned), 1 otherwise, 2 when
# the type-check script is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

# Every SDK subset the package is checked against. All five are read by the Linux compiler
# (Swift 6.3.1) without a setup error; an SDK that could not be would be listed in
# Docs/platforms.md and left out here, rather than weakening the check of the others.
all_sdks=(iOS16.4 iOS18.6 iOS26.2 macOS15.5 tvOS18.0)

# A work directory of this checkout's own: the type-check script writes each compiler run's
# output to one log file in its work directory and counts the errors there, so two checkouts
# type-checking at once in a shared directory (its default, /tmp/apple-typecheck) count each
# other's diagnostics. The first run with an SDK in a checkout builds that SDK's modules
# (40-70 s more each).
export APPLE_TC_HOME="${APPLE_TC_HOME:-$PWD/.build/apple-typecheck}"

# The workplace's type-check script, beside the repository (../shared) or at its usual place.
checker="${APPLE_TYPECHECK:-}"
if [ -z "$checker" ]; then
    for candidate in ../shared/apple/typecheck.sh /work/shared/apple/typecheck.sh; do
        if [ -x "$candidate" ]; then checker="$candidate"; break; fi
    done
fi
strict=0
sdks=()
while [ $# -gt 0 ]; do
    case "$1" in
        --strict) strict=1 ;;
        --sdk) [ $# -ge 2 ] || { echo "apple-typecheck: --sdk needs a NAME" >&2; exit 2; }; sdks+=("$2"); shift ;;
        --sdk=*) sdks+=("${1#--sdk=}") ;;
        *) echo "apple-typecheck: unknown argument $1 (usage: $0 [--strict] [--sdk NAME]...)" >&2; exit 2 ;;
    esac
    shift
done
if [ ${#sdks[@]} -eq 0 ]; then
    if [ -n "${APPLE_TC_SDK:-}" ]; then sdks=("$APPLE_TC_SDK"); else sdks=("${all_sdks[@]}"); fi
fi
unset APPLE_TC_SDK   # each check names its SDK
[ -n "$checker" ] && [ -x "$checker" ] || { echo "apple-typecheck: no type-check script at $checker (set APPLE_TYPECHECK)" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
summary=()
total_checks=0
total_errors=0
total_warnings=0

# One module against the current SDK ($sdk, $modules): directory, module, mode, extra flags...
# The compiler's lines go to stderr, each prefixed with the SDK's name.
check() {
    local directory="$1" name="$2" mode="$3"; shift 3
    local last counts
    last="$(APPLE_TC_MODE="$mode" "$checker" --sdk "$sdk" "$directory" "$name" -- \
        -package-name cachingprotocol -I "$modules" "$@" 2>&1 | sed "s|^|[$sdk] |" | tee /dev/stderr | tail -n 1)"
    last="${last#"[$sdk] "}"
    echo "== $sdk $name ($mode): ${last#apple-typecheck }"
    sdk_checks=$((sdk_checks + 1))
    case "$last" in
        *" errors, "*" warnings")
            counts="${last##*: }"
            sdk_errors=$((sdk_errors + ${counts%% errors*}))
            counts="${counts#*errors, }"
            sdk_warnings=$((sdk_warnings + ${counts%% warnings}))
            ;;
        *) sdk_errors=$((sdk_errors + 1)) ;;  # setup failure: counted as an error
    esac
    case "$last" in
        *" 0 errors, 0 warnings") ;;
        *" 0 errors, "*) [ "$strict" -eq 1 ] && status=1 ;;
        *) status=1 ;;
    esac
}

# Emits a module for the next ones: its interface, with testing enabled for `@testable import`.
emit() { echo -enable-testing -emit-module -emit-module-path "$modules/$1.swiftmodule"; }

# What SwiftPM adds to a target with resources (CachingProtocol: its privacy manifest): the
# `Bundle.module` accessor it generates on macOS, word for word but for the build path, and the
# flag it defines; checked with the module, so the accessor compiles against the SDK in Swift 6
# mode beside the library's code. Not with the iOS 16.4 SDK: its Xcode (14.3, Swift 5.8) cannot
# build a package of tools version 6.0, and its `Bundle` is not `Sendable` (NSBundle became
# NS_SWIFT_SENDABLE in the SDKs of Xcode 16, which every Swift 6 toolchain ships with), so the
# generated `static let module: Bundle` never meets it. (Xcode generates an accessor of its own
# and bundles the resource: only Xcode shows those.)
resource_bundle() {
    local accessor="$work/$1-resource_bundle_accessor.swift"
    cat > "$accessor" <<ACCESSOR
import Foundation

extension Foundation.Bundle {
    static let module: Bundle = {
        let mainPath = Bundle.main.bundleURL.appendingPathComponent("CachingProtocol_$1.bundle").path
        let buildPath = "/build/arm64-apple-macosx/debug/CachingProtocol_$1.bundle"

        let preferredBundle = Bundle(path: mainPath)

        guard let bundle = preferredBundle ?? Bundle(path: buildPath) else {
            // Users can write a function called fatalError themselves, we should be resilient against that.
            Swift.fatalError("could not load resource bundle: from \\(mainPath) or \\(buildPath)")
        }

        return bundle
    }()
}
ACCESSOR
    echo -D SWIFT_MODULE_RESOURCE_BUNDLE_AVAILABLE "$accessor"
}

# Every target of the current SDK, in dependency order; counts into sdk_checks, sdk_errors,
# sdk_warnings.
check_sdk() {
    modules="$work/$sdk"
    mkdir -p "$modules"
    sdk_checks=0 sdk_errors=0 sdk_warnings=0
    local desktop=0 module libraries=(CachingProtocol LoopbackOrigin DemoSupport)
    case "$sdk" in [mM][aA][cC]*) desktop=1; libraries+=(CacheBenchmarks) ;; esac
    # SIL mode only: it type-checks first and reports everything a type-check reports (the two
    # modes gave the same counts on all 73 checks of 2026-11-26), then the SIL diagnostics.
    for module in "${libraries[@]}"; do
        local resources=""
        case "$module/$sdk" in CachingProtocol/iOS16*) ;; CachingProtocol/*) resources="$(resource_bundle "$module")" ;; esac
        # shellcheck disable=SC2046,SC2086
        check "Sources/$module" "$module" sil $(emit "$module") $resources
    done
    if [ "$desktop" -eq 1 ]; then
        for module in Demo Fuzz; do
            check "Sources/$module" "$module" sil
        done
        # The tests import CacheTestTool's app-protocol fakes (`@testable import`) on macOS.
        # shellcheck disable=SC2046
        check Sources/CacheTestTool CacheTestTool sil $(emit CacheTestTool)
    fi
    # Apple's XCTest API, declared for the test targets (not part of the package).
    check Scripts/XCTestStandIn XCTest sil -emit-module -emit-module-path "$modules/XCTest.swiftmodule"
    for module in LoopbackOriginTests CachingProtocolTests DemoTests; do
        check "Tests/$module" "$module" sil
    done
}

{
    for sdk in "${sdks[@]}"; do
        started=$SECONDS
        check_sdk
        summary+=("apple-typecheck $sdk: $sdk_checks checks, $sdk_errors errors, $sdk_warnings warnings ($((SECONDS - started)) s)")
        total_checks=$((total_checks + sdk_checks))
        total_errors=$((total_errors + sdk_errors))
        total_warnings=$((total_warnings + sdk_warnings))
    done
    printf '%s\n' "${summary[@]}"
    echo "apple-typecheck: ${#sdks[@]} SDKs, $total_checks checks, $total_errors errors, $total_warnings warnings"
} 2> >(grep -E '(^|: )(error|warning): |^(\[[^]]*\] )?apple-typecheck: ' >&2)
exit "$status"
