#!/usr/bin/env bash
# Builds the fuzz targets (Sources/Fuzz) with libFuzzer and AddressSanitizer and runs each
# group of targets for a bounded time. A finding (a crash, a broken invariant, a leak, a
# timeout) makes the script exit non-zero; the input that caused it is kept in
# .build-fuzz/artifacts/<group>/ (reproduce with: FUZZ_GROUP=<group> <binary> <that file>).
#
# Usage: Scripts/fuzz.sh [seconds per group, default $FUZZ_SECONDS or 60] [group ...]
# Groups: http (Cache-Control, HTTP dates, header fields and the policy, URLs and cache keys)
#         storage (entry files and the disk index: raw and with valid framing)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-${FUZZ_SECONDS:-60}}"
if [ "$#" -gt 0 ]; then shift; fi
groups=("$@")
if [ "${#groups[@]}" -eq 0 ]; then groups=(http storage); fi

scratch=.build-fuzz
flags=(-c release --scratch-path "$scratch" -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING)
swift build "${flags[@]}" --product Fuzz
binary="$(swift build "${flags[@]}" --show-bin-path)/Fuzz"

status=0
for group in "${groups[@]}"; do
    # New inputs go to the first directory (outside git); the committed seeds are only read.
    work="$scratch/corpus/$group"
    artifacts="$scratch/artifacts/$group"
    mkdir -p "$work" "$artifacts"
    log="$scratch/fuzz-$group.log"
    echo "== fuzzing $group for ${seconds}s (libFuzzer's output: $log)"
    # SWIFT_BACKTRACE off: Swift's crash handler reads the stack in ways ASan reports as
    # errors of their own. Leak detection off: Foundation's property-list parser leaks a
    # CFError for every invalid plist, which is not ours to fix. libFuzzer's progress lines
    # (thousands per group) go to the log; the summary and any finding are printed here.
    if SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 FUZZ_GROUP="$group" "$binary" "$work" "Fuzz/corpus/$group" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -detect_leaks=0 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
        echo "== $group: no finding"
    else
        tail -n 60 "$log" >&2
        echo "== $group: finding (libFuzzer exited non-zero), see $artifacts and $log" >&2
        status=1
    fi
done
exit "$status"
