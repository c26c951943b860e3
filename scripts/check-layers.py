#!/usr/bin/python3
"""Checks torchport's include graph against its layer order.

Reads every `#include "..."` (and `#include <torchport/...>`) in src/,
include/torchport/ and tools/, maps each file and each included header to a
layer by its folder, and fails when:

  layer    a file includes a header of a higher layer, or of a sibling
           (layers sharing a level; none share one today);
  umbrella a library file includes an umbrella header (include/torchport/*.hpp
           other than version.hpp: only tools and tests may include those);
  private  a file includes another layer's private header (a header under
           src/<layer>/ is private to <layer>, unless SHARED below lists it:
           then the library's sources in higher layers may include it too,
           but never an installed header or a tool);
  public   an installed header (include/torchport/) includes a private one
           (it would not compile once installed).

Each violation is printed as `file:line: [rule] ...`, naming both layers.
Violations that exist today and need a bigger change are listed, with a
reason, in scripts/layers-allow.txt; an entry that no longer matches anything
is an error too, so that the list only shrinks.

Usage:
  scripts/check-layers.py            check; exit 1 on a violation
  scripts/check-layers.py --graph    print the layer-level include graph
  scripts/check-layers.py --root DIR --allow FILE   check another tree
                                     (the self-test uses it)
"""

import argparse
import os
import re
import sys

# --- The layer table: the one place that says what the layers are. ---------
#
# Levels from the bottom up. A file may include headers of its own layer and
# of the layers at lower levels; layers sharing a level are siblings and may
# not include each other.
LEVELS = [
    ["core"],
    ["io"],
    ["pickle"],
    ["formats"],
    ["record"],
    ["nn"],
    ["tools"],
]
# The umbrella headers (include/torchport/*.hpp): they may include anything,
# and only these layers (and tests, which are not checked) may include them.
UMBRELLA = "umbrella"
UMBRELLA_USERS = {"tools"}
# Folders whose name is not a layer's: include/torchport/<folder>/ -> layer.
INCLUDE_FOLDER_LAYER = {"detail": "core"}
# Single headers of include/torchport/ that belong to a layer, not to the
# umbrella (version.hpp is generated into the build tree).
INCLUDE_FILE_LAYER = {"version.hpp": "core"}
# Internal headers a layer shares with the library's sources in the layers
# above it: not installed (they live under src/), so neither the installed
# headers nor the tools may include them, and a user of the library never
# sees them. Each is a mechanism several readers run: the archive and
# stream readers, the byte reader, the decompressors, the zip writer and
# the pickle VM.
SHARED = {
    "src/io/byte_reader.hpp",
    "src/io/compression.hpp",
    "src/io/tar.hpp",
    "src/io/zip.hpp",
    "src/io/zip_writer.hpp",
    "src/pickle/unpickler.hpp",
}
# The folders that are checked, relative to the root.
SCANNED = ["src", "include/torchport", "tools"]
# The extensions of the files that are checked.
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".hh", ".cxx", ".hxx", ".ipp", ".inl")
# ---------------------------------------------------------------------------

LEVEL_OF = {layer: i for i, level in enumerate(LEVELS) for layer in level}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<(torchport/[^>]+)>)')


def layer_of(rel):
    """The layer of a path relative to the root, or None when it has none."""
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) >= 3 and parts[1] in LEVEL_OF:
        return parts[1]
    if parts[0] == "tools":
        return "tools"
    if parts[0] == "include" and len(parts) >= 3 and parts[1] == "torchport":
        if len(parts) == 3:
            return INCLUDE_FILE_LAYER.get(parts[2], UMBRELLA)
        folder = parts[2]
        if folder in LEVEL_OF:
            return folder
        return INCLUDE_FOLDER_LAYER.get(folder)
    return None


def may_include(src, dst):
    """Whether layer `src` may include a header of layer `dst`."""
    if src == dst or src == UMBRELLA:
        return True
    if dst == UMBRELLA:
        return src in UMBRELLA_USERS
    return LEVEL_OF[dst] < LEVEL_OF[src]


def order_text():
    levels = " < ".join(" | ".join(level) for level in LEVELS)
    users = ", ".join(sorted(UMBRELLA_USERS))
    return (f"{levels} (| marks siblings, which may not include each other); "
            f"umbrella headers: included only by {users} and tests")


def includes_of(path):
    """(line number, include text, is_angle) for each include outside comments."""
    out = []
    in_block = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if in_block:
                end = line.find("*/")
                if end < 0:
                    continue
                line = line[end + 2:]
                in_block = False
            m = INCLUDE_RE.match(line)
            if m:
                out.append((number, m.group(1) or m.group(2), m.group(2) is not None))
                continue
            # Track block comments that stay open past this line (good enough
            # for the code base: no "/*" inside string literals before an include).
            stripped = re.sub(r'"(?:\\.|[^"\\])*"', '""', line.split("//", 1)[0])
            while True:
                start = stripped.find("/*")
                if start < 0:
                    break
                end = stripped.find("*/", start + 2)
                if end < 0:
                    in_block = True
                    break
                stripped = stripped[end + 2:]
    return out


def resolve(root, rel, text, angle):
    """The included header as a path relative to the root, or None (external).

    Searched like the build does: the including file's folder (quotes only),
    then include/, then src/. torchport/... headers that are not in the source
    tree (version.hpp is generated) are taken as include/<text>.
    """
    candidates = []
    if not angle:
        candidates.append(os.path.join(os.path.dirname(rel), text))
    candidates += [os.path.join("include", text), os.path.join("src", text)]
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c.replace(os.sep, "/")
    if text.startswith("torchport/"):
        return "include/" + text
    return None


def scan(root):
    """Files, their layers and their resolved includes."""
    files = []
    problems = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(EXTENSIONS):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                layer = layer_of(rel)
                if layer is None:
                    problems.append(f"{rel}: [table] the file is in no layer: add its folder "
                                    f"to the layer table of scripts/check-layers.py")
                    continue
                edges = []
                for number, text, angle in includes_of(os.path.join(root, rel)):
                    target = resolve(root, rel, text, angle)
                    if target is None:
                        continue  # a third-party or system header
                    target_layer = layer_of(target)
                    if target_layer is None:
                        problems.append(f"{rel}:{number}: [table] \"{text}\" ({target}) is in "
                                        f"no layer: add its folder to the layer table")
                        continue
                    edges.append((number, text, target, target_layer))
                files.append((rel, layer, edges))
    return files, problems


def violations(files):
    """(file, line, include text, message) for each broken rule."""
    out = []
    for rel, layer, edges in files:
        for number, text, target, target_layer in edges:
            where = f"{rel}:{number}"
            if not may_include(layer, target_layer):
                if target_layer == UMBRELLA:
                    rule = "umbrella"
                    why = f"only {', '.join(sorted(UMBRELLA_USERS))} and tests may include an umbrella header"
                elif LEVEL_OF[target_layer] == LEVEL_OF[layer]:
                    rule = "layer"
                    why = "the two are siblings and may not include each other"
                else:
                    rule = "layer"
                    why = "a lower layer includes a higher one"
                out.append((rel, number, text,
                            f"{where}: [{rule}] {layer} includes \"{text}\" of {target_layer}: {why}"))
            shared = target in SHARED and rel.startswith("src/")
            if target.startswith("src/") and target_layer != layer and not shared:
                whom = (f"only {target_layer} and the library's sources above it may include it"
                        if target in SHARED else f"only {target_layer} may include it")
                out.append((rel, number, text,
                            f"{where}: [private] {layer} includes \"{text}\", a private header of "
                            f"{target_layer} (src/{target_layer}/): {whom}"))
            if rel.startswith("include/") and target.startswith("src/"):
                out.append((rel, number, text,
                            f"{where}: [public] the installed header includes \"{text}\", a private "
                            f"header of {target_layer}: it would not compile once installed"))
    return out


ALLOW_RE = re.compile(r'^(\S+)\s+"([^"]+)"\s+--\s+(\S.*)$')


def read_allow(path):
    """{(file, include text): reason} from the allow-list; errors on bad lines."""
    allowed = {}
    errors = []
    if not path or not os.path.exists(path):
        return allowed, errors
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = ALLOW_RE.match(line)
            if not m:
                errors.append(f"{path}:{number}: [allow] expected `file \"include\" -- reason`, "
                              f"got: {line}")
                continue
            allowed[(m.group(1), m.group(2))] = m.group(3)
    return allowed, errors


def print_graph(files):
    graph = {}
    for _, layer, edges in files:
        deps = graph.setdefault(layer, set())
        for _, _, _, target_layer in edges:
            if target_layer != layer:
                deps.add(target_layer)
    rank = {layer: i for i, layer in enumerate(l for level in LEVELS for l in level)}
    rank[UMBRELLA] = len(rank)
    print("# torchport's include graph by layer (scripts/check-layers.py --graph):")
    print("# each layer -> the layers its files include.")
    print(f"# Order: {order_text()}.")
    for layer in sorted(graph, key=lambda l: rank[l]):
        deps = sorted(graph[layer], key=lambda l: rank[l])
        marked = [d if may_include(layer, d) else f"{d} (!)" for d in deps]
        print(f"{layer} -> {', '.join(marked) if marked else '(nothing)'}")
    if any(not may_include(l, d) for l, ds in graph.items() for d in ds):
        print("# (!) marks an edge against the order.")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description="Checks the include graph against the layer order.")
    parser.add_argument("--root", default=os.path.dirname(here), help="the source tree (default: this repository)")
    parser.add_argument("--allow", default=None,
                        help="the allow-list (default: scripts/layers-allow.txt under the root)")
    parser.add_argument("--graph", action="store_true", help="print the layer-level include graph and exit")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    allow_path = args.allow if args.allow is not None else os.path.join(root, "scripts", "layers-allow.txt")

    files, problems = scan(root)
    if args.graph:
        print_graph(files)
        return 0

    allowed, allow_errors = read_allow(allow_path)
    problems += allow_errors
    used = set()
    allowed_count = 0
    for rel, _, text, message in violations(files):
        if (rel, text) in allowed:
            used.add((rel, text))
            allowed_count += 1
            continue
        problems.append(message)
    for key in sorted(set(allowed) - used):
        problems.append(f"{allow_path}: [allow] stale entry {key[0]} \"{key[1]}\": it no longer "
                        f"breaks a rule; remove it")

    for p in problems:
        print(p)
    nfiles = len(files)
    nedges = sum(len(e) for _, _, e in files)
    if problems:
        print(f"check-layers: {len(problems)} problem(s) in {nfiles} files ({nedges} includes); "
              f"order: {order_text()}", file=sys.stderr)
        return 1
    print(f"check-layers: {nfiles} files, {nedges} includes follow the layer order"
          f"{f' ({allowed_count} allowed exception(s), see {os.path.relpath(allow_path, root)})' if allowed_count else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
