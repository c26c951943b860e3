#!/usr/bin/env bash
# Self-test of scripts/format.sh on a small tree: --check names the file that
# differs and not the one that matches, skips build folders and fixtures,
# formatting in place makes --check pass, and a missing clang-format 14 makes
# --check exit 77 (ctest's skip code).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang-format-14 >/dev/null 2>&1 || { echo "clang-format-14 not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_format_script: $*" >&2; exit 1; }

mkdir -p "$tmp/scripts" "$tmp/src/core" "$tmp/tests/fixtures" "$tmp/tools/build-x"
cp "$repo/scripts/format.sh" "$tmp/scripts/"
cp "$repo/.clang-format" "$tmp/"
printf 'int good() {\n  return 1;\n}\n' >"$tmp/src/core/good.cpp"
printf 'int  bad( ){return 1;}\n' >"$tmp/src/core/bad.hpp"
printf 'int  fixture( ){return 1;}\n' >"$tmp/tests/fixtures/f.cpp"
printf 'int  built( ){return 1;}\n' >"$tmp/tools/build-x/g.cpp"

list=$(bash "$tmp/scripts/format.sh" --list)
[ "$list" = $'src/core/bad.hpp\nsrc/core/good.cpp' ] || fail "unexpected file list: $list"

rc=0
out=$(bash "$tmp/scripts/format.sh" --check 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "--check exited $rc on a misformatted file: $out"
grep -q '^  src/core/bad.hpp$' <<<"$out" || fail "--check did not name src/core/bad.hpp: $out"
! grep -q '^  src/core/good.cpp$' <<<"$out" || fail "--check named the formatted src/core/good.cpp: $out"

bash "$tmp/scripts/format.sh" >/dev/null || fail "formatting in place failed"
[ "$(cat "$tmp/src/core/bad.hpp")" = $'int bad() {\n  return 1;\n}' ] || fail "bad.hpp not formatted: $(cat "$tmp/src/core/bad.hpp")"
[ "$(cat "$tmp/tests/fixtures/f.cpp")" = "int  fixture( ){return 1;}" ] || fail "a fixture was formatted"
bash "$tmp/scripts/format.sh" --check >/dev/null 2>&1 || fail "--check fails after formatting"

# Another version on PATH under both names: skipped, not failed.
mkdir -p "$tmp/bin"
for n in clang-format clang-format-14; do
  printf '#!/bin/sh\necho "Debian clang-format version 15.0.0"\n' >"$tmp/bin/$n"
  chmod +x "$tmp/bin/$n"
done
rc=0
PATH="$tmp/bin:$PATH" bash "$tmp/scripts/format.sh" --check >/dev/null 2>&1 || rc=$?
[ "$rc" = 77 ] || fail "--check exited $rc without clang-format 14 (expected 77)"
echo "test_format_script: ok"
