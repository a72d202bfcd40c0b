#!/usr/bin/env bash
# Type-checks, for iOS (arm64-apple-ios16.0, against a real iOS 16.4 SDK), every module of this
# package that is meant to run on Apple platforms: CachingProtocol, LoopbackOrigin and
# DemoSupport. Each is checked twice: type-checking alone, and with SIL diagnostics (definite
# initialisation, isolation). The modules a later one imports are emitted for iOS on the way.
# Nothing is linked or run; macOS is not covered (no macOS SDK here). See Docs/platforms.md.
#
# Usage: Scripts/apple-typecheck.sh [--strict]    (--strict: a warning fails too)
# Environment: APPLE_TYPECHECK, the type-check script (default ../shared/apple/typecheck.sh, else
# /work/shared/apple/typecheck.sh).
set -uo pipefail
cd "$(dirname "$0")/.."

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

check() {   # module, mode, extra flags...
    local module="$1" mode="$2"; shift 2
    local last
    last="$(APPLE_TC_MODE="$mode" "$checker" "Sources/$module" "$module" -- "${common[@]}" "$@" 2>&1 | tee /dev/stderr | tail -n 1)"
    echo "== $module ($mode): ${last#apple-typecheck }"
    case "$last" in
        *" 0 errors, 0 warnings") ;;
        *" 0 errors, "*) [ "$strict" -eq 1 ] && status=1 ;;
        *) status=1 ;;
    esac
}

for module in CachingProtocol LoopbackOrigin DemoSupport; do
    check "$module" typecheck
    check "$module" sil -emit-module -emit-module-path "$modules/$module.swiftmodule"
done 2> >(grep -E ': (error|warning): ' >&2)
exit "$status"
