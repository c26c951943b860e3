#!/usr/bin/python3
"""Checks that torchport decides what a file is in one place: the registry.

The reader registry (src/formats/read/registry.cpp and open.cpp, its
dispatch) is the only place that tells formats apart. Readers and the
scanner ask it (`sniff`, `open_detail::zip_kind`, `torch_archive`,
`wrapping`, `path_format`, a row's `sniff`); they do not test magic numbers
themselves. This check reads every C++ file under src/, tools/ and
python/src/ and fails when:

  call      a recogniser (a function that tells a format from bytes, listed
            in RECOGNISERS) is called outside the registry and its own home
            (the file that defines it), and no EXCEPTIONS entry says why;
  magic     a format's magic number is spelled as a string outside the
            registry and the reader of that format (MAGICS);
  unlisted  a function named like a recogniser (`looks_like_*`, `sniff*`,
            `is_npz`-like `is_<format>`) is declared outside the registry but
            not in the table: a new recogniser must be listed, so that its
            calls are checked too (the registry's own sniffers are its rows);
  stale     an EXCEPTIONS entry no longer matches a call, so the list only
            shrinks;
  parse     the scanner (src/formats/scan/) calls a format's parser (PARSERS:
            the zip and tar readers, the decompressors): it judges what the
            readers meet and reads no format on its own. Where a reader stops,
            the reader tells what a more lenient loader still reaches
            (formats::sweep); what a compression wraps, the registry decodes
            (open_detail::unwrap).

Each violation is printed as `file:line: [rule] ...`.

What this cannot see: a recogniser written out inline under another name
(byte comparisons with no magic string). Review catches those; the table
says where they belong.

Usage:
  scripts/check-dispatch.py              check this repository; exit 1 on a violation
  scripts/check-dispatch.py --root DIR   check another tree (the self-test uses it)
"""

import argparse
import os
import re
import sys

# --- The table: the one place that says who may tell formats apart. --------
#
# The registry: every recogniser may be called here.
REGISTRY = {"src/formats/read/registry.cpp", "src/formats/read/open.cpp"}
# Each recogniser and its home, the file that defines it (its own calls of
# itself and its helpers there are its definition, not a dispatch).
RECOGNISERS = {
    "looks_like_zip": "src/io/zip.cpp",
    "looks_like_tar": "src/io/tar.cpp",
    "probe_tar": "src/io/tar.cpp",
    "looks_like_gzip": "src/io/compression.cpp",
    "sniff_compression": "src/io/compression.cpp",
    "looks_like_record": "src/formats/recorders/record_file.cpp",
    "is_npz": "src/formats/read/numpy_file.cpp",
    "is_torch_export": "src/formats/read/torch_export.cpp",
}
# Calls outside the registry that are no dispatch, each with its reason.
EXCEPTIONS = {
    ("src/formats/recorders/record_file.cpp", "looks_like_gzip"):
        "a record's own gzip variant: the record reader (its registry row) undoes it before "
        "telling its layouts apart",
}
# Magic numbers spelled as strings, and the files that may spell them: the
# registry, and the reader of the format checking its own header.
MAGICS = {
    r'"PK\x03\x04': {"src/io/zip.cpp"},
    r'"PK\x05\x06': {"src/io/zip.cpp"},
    r'"\x93NUMPY': {"src/formats/read/numpy_file.cpp"},
    # shelve's SQLite store: only the scanner opens shelve's stores (no
    # reader reads them, so the registry has no row for them).
    '"SQLite format 3': {"src/formats/scan/scan.cpp", "src/formats/scan/dbm.cpp"},
}
# The scanner, and the parsers of the registry's formats it may not call.
# (shelve's stores, which no reader opens, are the scanner's own: dbm.cpp.)
SCANNER = "src/formats/scan/"
PARSERS = re.compile(r"\b(zip_local_entries|decompress\w*|gunzip|zip_method_read|inflate\w*|"
                     r"(?:ZipArchive|TarArchive)::open|read_record)\s*\(")
# Names that look like a recogniser's but tell no format apart from bytes.
NOT_RECOGNISERS = {
    "sniff",            # the registry's own public sniff(): asking it is the point
    "sniff_format",     # its name form
    "sniff_head",       # the registry's: the bytes its sniffers see
    "is_dcp_path",      # the registry's (path_format's), decided in registry.cpp
    "is_record",        # whether a SaveFormat is a record layout: no bytes looked at
}
# The folders that are checked, relative to the root.
SCANNED = ["src", "tools", "python/src"]
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".hh", ".cxx", ".hxx", ".ipp", ".inl")
# ---------------------------------------------------------------------------

RECOGNISER_LIKE = re.compile(r"\b(looks_like_\w+|sniff\w*|is_(?:npz|npy|zip|tar|gzip|pickle|"
                             r"safetensors|torch_export|record|pt2)\w*)\s*\(")
# What may stand before a name that is declared or defined (a return type and
# specifiers), as opposed to called.
DECL_PREFIX = re.compile(r"^\s*(?:\[\[\w+\]\]\s*)?(?:(?:static|inline|constexpr|extern|friend)\s+)*"
                         r"(?:const\s+)?[A-Za-z_][\w:]*(?:<[\w:<>, ]*>)?\s*[\*&]*\s+"
                         r"(?:[A-Za-z_]\w*::)*$")
KEYWORDS = re.compile(r"\b(return|co_return|if|else|case|throw|new|delete|while|for|switch)\b")


def code_lines(path):
    """(line number, code with comments removed, code with comments and strings removed)."""
    out = []
    in_block = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            text = ""
            i = 0
            in_str = None
            while i < len(line):
                if in_block:
                    end = line.find("*/", i)
                    if end < 0:
                        i = len(line)
                        break
                    in_block = False
                    i = end + 2
                    continue
                c = line[i]
                if in_str:
                    text += c
                    if c == "\\" and i + 1 < len(line):
                        text += line[i + 1]
                        i += 2
                        continue
                    if c == in_str:
                        in_str = None
                    i += 1
                    continue
                if line.startswith("//", i):
                    break
                if line.startswith("/*", i):
                    in_block = True
                    i += 2
                    continue
                if c in "\"'":
                    in_str = c
                text += c
                i += 1
            bare = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
            bare = re.sub(r"'(?:\\.|[^'\\])*'", "''", bare)
            out.append((number, text, bare))
    return out


def is_declaration(before):
    """Whether the text before a name on its line makes the name declared, not called."""
    return bool(DECL_PREFIX.match(before)) and not KEYWORDS.search(before)


def files_of(root):
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def check(root):
    problems = []
    used = set()
    calls = 0
    for rel in files_of(root):
        for number, text, bare in code_lines(os.path.join(root, rel)):
            where = f"{rel}:{number}"
            for m in RECOGNISER_LIKE.finditer(bare):
                name = m.group(1)
                before = bare[:m.start()]
                member = before.rstrip().endswith((".", "->"))
                if member or name in NOT_RECOGNISERS:
                    continue
                if name not in RECOGNISERS:
                    if rel not in REGISTRY and is_declaration(before) and not before.rstrip().endswith("::"):
                        problems.append(
                            f"{where}: [unlisted] {name}() is named like a recogniser but is not "
                            f"in scripts/check-dispatch.py's RECOGNISERS (or NOT_RECOGNISERS): "
                            f"list it, so that its calls outside the registry are checked")
                    continue
                if is_declaration(before):
                    continue
                calls += 1
                if rel in REGISTRY or rel == RECOGNISERS[name]:
                    continue
                if (rel, name) in EXCEPTIONS:
                    used.add((rel, name))
                    continue
                problems.append(
                    f"{where}: [call] {name}() tells a format from bytes outside the registry: "
                    f"a second dispatch point. Ask the registry (src/formats/read/registry.hpp: "
                    f"sniff, zip_kind, torch_archive, wrapping, a reader row's sniff) instead")
            if rel.startswith(SCANNER):
                for m in PARSERS.finditer(bare):
                    before = bare[:m.start()]
                    if before.rstrip().endswith((".", "->")) or is_declaration(before):
                        continue
                    problems.append(
                        f"{where}: [parse] {m.group(1)}() parses a format in the scanner, which "
                        f"judges what the readers meet and reads no format on its own: let the "
                        f"reader tell it as parts (formats::sweep) or the registry decode it "
                        f"(open_detail::unwrap)")
            for magic, homes in MAGICS.items():
                if magic in text and rel not in REGISTRY and rel not in homes:
                    problems.append(
                        f"{where}: [magic] the magic number {magic}\" is tested outside the "
                        f"registry and its format's reader: a second dispatch point")
    for key in sorted(set(EXCEPTIONS) - used):
        problems.append(f"scripts/check-dispatch.py: [stale] EXCEPTIONS entry {key[0]} {key[1]}(): "
                        f"it no longer matches a call; remove it")
    return problems, calls


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description="Checks that only the registry tells formats apart.")
    parser.add_argument("--root", default=os.path.dirname(here), help="the source tree (default: this repository)")
    args = parser.parse_args()
    problems, calls = check(os.path.abspath(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f"check-dispatch: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-dispatch: {calls} recogniser calls, all in the registry, their homes or the "
          f"{len(EXCEPTIONS)} listed exception(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
