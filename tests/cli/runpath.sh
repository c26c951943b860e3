#!/usr/bin/env bash
# No program or library we build looks for libraries in the working
# directory: every entry of its RUNPATH (or RPATH) is an absolute directory
# or starts with $ORIGIN. The loader reads an empty entry, or a relative
# one, against the directory the program was started in, where a hostile
# checkpoint folder could hold a library of the right name.
# Usage: runpath.sh DIR...   (every ELF file under the directories)
set -euo pipefail
status=0 checked=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" | grep -q $'\x7fELF' || continue
  checked=$((checked + 1))
  paths=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]$/\2/p')
  [ -n "$paths" ] || continue
  while IFS= read -r e; do  # each entry, empty ones too ("a::b", "a:")
    case "$e" in
      /* | '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) ;;
      *) echo "$f: runpath entry '$e' (of '$paths') is relative to the working directory"; status=1 ;;
    esac
  done < <(awk -F: '{ for (i = 1; i <= NF; i++) print $i }' <<< "$paths")
done < <(find "$@" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
[ "$checked" -gt 0 ] || { echo "no ELF files under $*"; exit 1; }
echo "$checked ELF files checked"
exit $status
