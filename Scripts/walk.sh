#!/usr/bin/env bash
# What a reader must hold to follow one request, counted as Docs/architecture.md counts it: the
# library files with a line of code that ran, the functions that ran (closures read with their
# function, compiler-made code left out) and the types whose members ran (Scripts/walk/count.py). Builds the tests with LLVM coverage, copies
# Scripts/walk/WalkProbe.swift into the test target for the run (it needs the coverage runtime,
# so it is never part of `swift test`), resets the counters just before each request and writes
# them just after:
#   hit          a fresh hit from memory
#   reval        a stale entry revalidated with HEAD -> 304
#   writebehind  the disk write the 304's update leaves behind (from `waitUntilSettled`)
# Usage: Scripts/walk.sh   (from anywhere; about two minutes for the coverage build)
set -euo pipefail
cd "$(dirname "$0")/.."
probe=Tests/CachingProtocolTests/WalkProbe.swift
cp Scripts/walk/WalkProbe.swift "$probe"
trap 'rm -f "$probe"' EXIT
swift build --build-tests --enable-code-coverage 2>&1 | grep -E "error" | head -3 || true
rm -f /tmp/walk-*.prof*
swift test --skip-build --enable-code-coverage --filter WalkProbe 2>&1 | grep -E "error:" | head || true
tools="$(dirname "$(readlink -f "$(command -v swift)")")"
binary=$(find .build/debug/ -maxdepth 1 -name "CachingProtocolPackageTests.xctest" | head -1)
for walk in hit reval writebehind; do
    "$tools/llvm-profdata" merge -sparse /tmp/walk-$walk.profraw -o /tmp/walk-$walk.profdata
    echo "== $walk"
    "$tools/llvm-cov" export "$binary" -instr-profile=/tmp/walk-$walk.profdata 2>/dev/null \
        | Scripts/walk/count.py "$tools/swift-demangle"
done
