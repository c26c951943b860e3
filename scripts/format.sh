#!/usr/bin/env bash
# Formats torchport's C++ sources with clang-format 14 and the repository's
# .clang-format, or checks them.
# Usage: scripts/format.sh            format every file in place
#        scripts/format.sh --check    report the files that differ, exit 1 if any
#        scripts/format.sh --list     print the file list only
# The files: every C++ source and header under src/, include/, tools/, tests/,
# examples/, fuzz/ and bench/, except build folders and test fixtures.
# --check exits 77 (ctest's skip code for the format_check test) when
# clang-format 14 is not installed: other versions format differently.
# Set CLANG_FORMAT to use another binary (it must still be version 14).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=format
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --list) mode=list ;;
  *) echo "usage: scripts/format.sh [--check|--list]" >&2; exit 2 ;;
esac

files() {
  local dirs=() d
  for d in src include tools tests examples fuzz bench; do [ -d "$d" ] && dirs+=("$d"); done
  find "${dirs[@]}" \
    \( -type d \( -name 'build*' -o -name fixtures -o -name fuzz_regressions -o -name corpus \
       -o -name data -o -name '.*' \) -prune \) -o \
    -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cc' -o -name '*.hh' \
       -o -name '*.cxx' -o -name '*.hxx' -o -name '*.ipp' -o -name '*.inl' \) -print |
    LC_ALL=C sort
}

if [ "$mode" = list ]; then
  files
  exit 0
fi

find_clang_format() {
  local c
  for c in "${CLANG_FORMAT:-}" clang-format-14 clang-format; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || continue
    if "$c" --version 2>/dev/null | grep -E 'clang-format version 14\.' > /dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

if ! cf=$(find_clang_format); then
  echo "format.sh: clang-format 14 not found (apt-get install clang-format-14, or scripts/install-deps.sh --tests)" >&2
  [ "$mode" = check ] && exit 77
  exit 1
fi

mapfile -t list < <(files)

# Sets `bad` to the files that differ from .clang-format (one clang-format
# run over all of them); with -v, prints its first findings.
check_files() {
  local out rc=0 f
  out=$("$cf" --dry-run --Werror --style=file "${list[@]}" 2>&1) || rc=$?
  local -A named=()
  while IFS= read -r f; do named[$f]=1; done < <(grep -oE '^[^: ]+:[0-9]+:[0-9]+: (error|warning):' <<<"$out" | cut -d: -f1)
  bad=()
  for f in "${list[@]}"; do [ -z "${named[$f]:-}" ] || bad+=("$f"); done
  if [ "${1:-}" = -v ] && [ -n "$out" ]; then
    head -40 <<<"$out"
    [ "$(wc -l <<<"$out")" -le 40 ] || echo "..."
  fi
  if [ "$rc" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
    printf '%s\n' "$out" >&2
    echo "format.sh: $cf failed (exit $rc) without naming a file" >&2
    exit 1
  fi
  return 0
}

if [ "$mode" = format ]; then
  "$cf" -i --style=file "${list[@]}"
  echo "format.sh: formatted ${#list[@]} files with $("$cf" --version)"
  # clang-format is not always idempotent (a comment line after a trailing
  # comment, for one): name the files a second run would change again.
  check_files
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format.sh: clang-format does not settle on these files; edit them by hand (scripts/format.sh --check shows where):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  exit 0
fi

check_files -v
if [ ${#bad[@]} -gt 0 ]; then
  echo "format.sh: ${#bad[@]} of ${#list[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "format.sh: run scripts/format.sh to format them in place" >&2
  exit 1
fi
echo "format.sh: ${#list[@]} files match .clang-format"
