#!/usr/bin/env bash
# Builds the DocC documentation of the library without the swift-docc-plugin (the package
# depends on no other package): SwiftPM emits the symbol graph, and the toolchain's `docc`
# turns it and Sources/CachingProtocol/CachingProtocol.docc into an archive. A warning (a broken
# symbol link, an unknown article) fails the run.
#
# Usage: Scripts/docs.sh [output directory, default .build/docs/CachingProtocol.doccarchive]
set -euo pipefail
cd "$(dirname "$0")/.."

output="${1:-.build/docs/CachingProtocol.doccarchive}"
graphs=.build/docs/symbol-graphs
swift package dump-symbol-graph --minimum-access-level public >/dev/null
rm -rf "$graphs"
mkdir -p "$graphs"
# The library's graph, and those of its extensions to other modules (CachingProtocol@Foundation…).
shopt -s nullglob
for graph in "$(swift build --show-bin-path)"/../symbolgraph/CachingProtocol{,@*}.symbols.json; do
    cp "$graph" "$graphs"/
done
docc convert Sources/CachingProtocol/CachingProtocol.docc \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name CachingProtocol \
    --fallback-bundle-identifier org.cachingprotocol.CachingProtocol \
    --output-path "$output" \
    --warnings-as-errors
echo "documentation: $output"
