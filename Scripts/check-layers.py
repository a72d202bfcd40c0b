#!/usr/bin/env python3
"""Fails when a library file names a type (or top-level function or constant) of a layer above its
own, or of a sibling layer: the layer diagram of Docs/architecture.md, checked. Also fails when a
type declared in a `Type+Topic.swift` file is used in another file: a type used outside its file
gets a file of its own, named after it (Docs/architecture.md, "Files").

Each folder of Sources/CachingProtocol is a layer. A file may name what its own layer and the
layers below it declare:

    Protocol  >  Engine  >  Cache  >  Policy | Storage  >  Model  >  HTTP | Support

Policy and Storage are siblings (neither names the other); so are HTTP and Support. Comments and
string literals are not code and are skipped; only top-level declarations count (a nested
`State` or `Configuration` is local to its type).

Usage: Scripts/check-layers.py [library directory]   (default: Sources/CachingProtocol)
"""
import os
import re
import sys

RANK = {"Protocol": 5, "Engine": 4, "Cache": 3, "Policy": 2, "Storage": 2, "Model": 1, "HTTP": 0, "Support": 0}
DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|open|final|indirect|nonisolated)\s+)*"
    r"(?:struct|class|enum|protocol|actor|typealias|func|let|var)\s+([A-Za-z_]\w*)")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# A type declared at any depth (a nested type of an extension counts too).
GENERIC_PARAMETERS = re.compile(r"(?:struct|class|enum|func|init|protocol)\s*[A-Za-z_]*\w*\s*<([^<>]*)>")
TYPE_DECLARATION = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|open|final|indirect|nonisolated)\s+)*"
    r"(?:struct|class|enum|protocol|actor|typealias)\s+([A-Za-z_]\w*)")


def code_only(text):
    """The file without comments and string literals (their content could name anything)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            depth = 0
            while i < n:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                    if depth == 0:
                        break
                else:
                    i += 1
        elif text.startswith('"""', i):
            end = text.find('"""', i + 3)
            i = n if end < 0 else end + 3
            out.append('""')
        elif text[i] == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "Sources/CachingProtocol"
    files = {}   # path -> (layer, code)
    declared = {}  # name -> (layer, path)
    for layer in sorted(os.listdir(root)):
        folder = os.path.join(root, layer)
        if not os.path.isdir(folder) or layer.endswith(".docc"):
            continue
        if layer not in RANK:
            print(f"check-layers: {folder} is not a known layer; add it to RANK in {sys.argv[0]}")
            return 2
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                code = code_only(handle.read())
            files[path] = (layer, code)
            for line in code.splitlines():
                match = DECLARATION.match(line)   # column 0: top level only
                if match:
                    declared.setdefault(match.group(1), (layer, path))
    problems = []
    for path, (layer, code) in sorted(files.items()):
        for name in sorted(set(IDENTIFIER.findall(code))):
            owner = declared.get(name)
            if owner is None or owner[0] == layer:
                continue
            higher = RANK[owner[0]] > RANK[layer]
            sibling = RANK[owner[0]] == RANK[layer]
            if higher or sibling:
                kind = "a higher layer" if higher else "a sibling layer"
                problems.append(f"{path}: names {name}, declared in {kind} ({owner[1]})")
    # Types declared in `Type+Topic.swift` files and named in another file. A top-level type is
    # used wherever its name appears (and no type or generic parameter of that name is declared
    # there); a type nested in `Type` where `Type.Name` appears, or its bare name in another file
    # of `Type` (`Type.swift`, `Type+Other.swift`).
    def declared_types(code):
        names = {m.group(1) for m in map(TYPE_DECLARATION.match, code.splitlines()) if m}
        for generics in GENERIC_PARAMETERS.findall(code):
            names.update(IDENTIFIER.findall(generics.split(":")[0]) if ":" not in generics else
                         [part.split(":")[0].strip() for part in generics.split(",")])
        return names
    types_in = {path: declared_types(code) for path, (_, code) in files.items()}
    identifiers = {path: set(IDENTIFIER.findall(code)) for path, (_, code) in files.items()}
    hidden = []
    for path in sorted(files):
        base = os.path.basename(path)[:-len(".swift")]
        if "+" not in base:
            continue
        owner = base.split("+")[0]
        code = files[path][1]
        for line in code.splitlines():
            match = TYPE_DECLARATION.match(line)
            if not match:
                continue
            name, nested = match.group(1), line[:1].isspace()
            users = []
            for other in sorted(files):
                if other == path or name in types_in[other]:
                    continue
                other_base = os.path.basename(other)[:-len(".swift")]
                if not nested:
                    used = name in identifiers[other]
                else:
                    same_owner = other_base == owner or other_base.startswith(owner + "+")
                    used = (same_owner and name in identifiers[other]) or re.search(
                        rf"\b{re.escape(owner)}\.{re.escape(name)}\b", files[other][1]) is not None
                if used:
                    users.append(os.path.basename(other))
            if users:
                hidden.append(f"{path}: declares {name}, used in {', '.join(users)}")
    for problem in problems + hidden:
        print(problem)
    print(f"check-layers: {len(files)} files, {len(declared)} top-level names, {len(problems)} upward or sideways references, "
          f"{len(hidden)} types declared in a '+' file and used elsewhere")
    return 1 if problems or hidden else 0


if __name__ == "__main__":
    sys.exit(main())
