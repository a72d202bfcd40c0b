#!/usr/bin/env python3
"""What a reader must hold to follow one walk: the library files, functions and types that ran.

Reads `llvm-cov export` JSON (one walk's counters) on standard input and prints the files, then the
functions (demangled, without the closures inside them: a closure is read with its function) and
the types whose members ran, counted. `swift-demangle` (beside `swift`) names the functions.

Usage: llvm-cov export BINARY -instr-profile=P | Scripts/walk/count.py SWIFT_DEMANGLE
"""
import json
import re
import subprocess
import sys

LIBRARY = "Sources/CachingProtocol/"
# What the compiler makes beside what was written: not code a reader reads.
GENERATED = re.compile(r"implicit closure|default argument|variable initialization expression|"
                       r"\boutlined\b|__derived_|reabstraction thunk|protocol witness|"
                       r"lazy property initializer|property wrapper")


def main():
    demangle = sys.argv[1]
    data = json.load(sys.stdin)["data"][0]
    files = sorted({f["filename"].split(LIBRARY, 1)[1] for f in data["files"]
                    if LIBRARY in f["filename"] and f["summary"]["lines"]["covered"] > 0})
    ran = [(f["name"], f["filenames"][0]) for f in data["functions"]
           if f["count"] > 0 and LIBRARY in f["filenames"][0]]
    mangled = [name.split(":")[-1] for name, _ in ran]   # file-local names are "file:symbol"
    demangled = subprocess.run([demangle, "-simplified"], input="\n".join(mangled), capture_output=True,
                               text=True).stdout.splitlines()
    functions, types = set(), set()
    for symbol in demangled:
        if "closure #" in symbol or GENERATED.search(symbol):
            continue
        symbol = re.sub(r"\s+in\s+.*$", "", symbol)          # "x in y": generic context
        functions.add(symbol)
        path = re.sub(r"^static ", "", symbol)
        path = re.sub(r"\(.*", "", path)                    # drop the parameter list
        path = re.sub(r"\.\S+ (?:infix|prefix|postfix)$", "", path)   # an operator
        path = re.sub(r"<[^<>]*>", "", path)                # and generic arguments
        parts = [p for p in path.split(".") if p]
        # Drop the member (and an accessor such as `getter`): what remains names the types.
        while parts and (not re.fullmatch(r"[A-Za-z_]\w*", parts[-1]) or parts[-1][:1].islower() or parts[-1] in ("getter", "setter", "modify", "init", "deinit")):
            parts.pop()
        if parts and parts[0] == "CachingProtocol":
            parts = parts[1:]
        for depth in range(1, len(parts) + 1):
            types.add(".".join(parts[:depth]))
    print(f"files {len(files)}, functions {len(functions)}, types {len(types)}")
    for name in files:
        print(f"   file      {name}")
    for name in sorted(types):
        print(f"   type      {name}")
    for name in sorted(functions):
        print(f"   function  {name}")


if __name__ == "__main__":
    main()
