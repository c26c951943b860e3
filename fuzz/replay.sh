#!/usr/bin/env bash
# Replays a fuzz target's corpus as a test:
#   fuzz/replay.sh TARGET CORPUS_DIR REGRESSIONS_DIR TOOL [flags...]
# Assembles the corpora first when CORPUS_DIR is missing (fuzz/make_corpus.sh,
# with the torchport TOOL when not ""; several replays may race to do it,
# so each builds its own copy and the first to finish moves it into place).
# A missing REGRESSIONS_DIR is skipped.
set -euo pipefail
target=$1 corpus=$2 regressions=$3 tool=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$corpus")
if [ ! -d "$corpus" ]; then
  tmp="$root.tmp.$$"
  bash "$here/make_corpus.sh" "$tmp" "$tool" >/dev/null
  # A corpus root an earlier build made, before this target had seeds:
  # only this target's folder moves in.
  mv -T "$tmp" "$root" 2>/dev/null || {
    [ -d "$corpus" ] || mv -T "$tmp/$(basename "$corpus")" "$corpus" 2>/dev/null || true
    rm -rf "$tmp"
  }
fi
dirs=("$corpus")
[ -d "$regressions" ] && dirs+=("$regressions")
exec "$target" "$@" "${dirs[@]}"
