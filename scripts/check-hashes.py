#!/usr/bin/python3
"""Checks that no hash table keyed by text is built with std::hash.

A table keyed by text a file chose (tensor names, dict keys, JSON keys,
zip entry names, storage keys, paths) must not let the file choose the
collisions. libstdc++'s std::hash of a string is MurmurHash2-64A under a
fixed seed; every step of it can be undone, so a file can give all its
names one hash, and a table of them compares each new name with every one
before it (tests/security/test_hash_flood.cpp). Such tables are
detail::StringMap, StringSet, StringViewMap and StringViewSet
(include/torchport/detail/hash.hpp), which hash under this process's
random key; hand-made tables call detail::seeded_hash.

This check reads every C++ file under src/, include/, tools/ and
python/src/ and fails on:

  hash   std::hash of a string or string_view (std::hash<std::string>,
         std::hash<std::string_view>, std::hash<const char*>);
  table  std::unordered_map or std::unordered_set keyed by std::string or
         std::string_view, outside hash.hpp, which defines the aliases.

Text that no file chose could use std::hash safely, but telling the two
apart is a judgement a check cannot make; every text table is seeded.
Each violation is printed as `file:line: [rule] ...`.

Usage:
  scripts/check-hashes.py              check this repository; exit 1 on a violation
  scripts/check-hashes.py --root DIR   check another tree (the self-test uses it)
"""

import argparse
import os
import re
import sys

SCANNED = ["src", "include", "tools", "python/src"]
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".hh", ".cxx", ".hxx", ".ipp", ".inl")
HOME = "include/torchport/detail/hash.hpp"  # where the seeded aliases are defined

HASH = re.compile(r"\bstd::hash\s*<\s*(?:const\s+)?(?:std::(?:string|string_view|basic_string)\b|char\s*\*|const\s+char\s*\*)")
TABLE = re.compile(r"\bunordered_(?:map|set|multimap|multiset)\s*<\s*(?:const\s+)?std::(?:string|string_view)\s*[,>]")


def code_of(line, state):
    """The line without comments or string literals; state carries /* */."""
    out, i, quote = [], 0, None
    while i < len(line):
        if state["block"]:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out)
            state["block"], i = False, end + 2
            continue
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"], i = True, i + 2
            continue
        if c in "\"'":
            quote = c
        else:
            out.append(c)
        i += 1
    return "".join(out)


def violations(root):
    found, files = [], 0
    for folder in SCANNED:
        base = os.path.join(root, folder)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if not name.endswith(EXTENSIONS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                files += 1
                state = {"block": False}
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        code = code_of(line, state)
                        if HASH.search(code):
                            found.append(f"{rel}:{number}: [hash] std::hash of text: use "
                                         "detail::seeded_hash (a file can choose std::hash's "
                                         "collisions)")
                        if rel != HOME and TABLE.search(code):
                            found.append(f"{rel}:{number}: [table] a std::unordered_map/set keyed "
                                         "by text: use detail::StringMap, StringSet, "
                                         "StringViewMap or StringViewSet (seeded)")
    return found, files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = parser.parse_args()
    found, files = violations(args.root)
    for v in found:
        print(v)
    if found:
        print(f"check-hashes: {len(found)} violation(s) in {files} files")
        return 1
    print(f"check-hashes: no text table hashed with std::hash ({files} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
