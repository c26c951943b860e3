#!/usr/bin/env bash
# libcurl is loaded when a URL is opened, never linked: the tool does not
# name it (readelf), a run that reads a local file never loads it (the
# loader's own log, LD_DEBUG=files), and a run that opens a URL loads it and
# gets as far as the connection (refused: nothing listens on port 9 here).
# Usage: lazy_libcurl.sh TOOL LOCAL_CHECKPOINT
set -euo pipefail
tool=$1 local=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "lazy_libcurl: $*"; exit 1; }

if readelf -d "$tool" | grep -q 'NEEDED.*libcurl'; then fail "$tool links libcurl"; fi

LD_DEBUG=files "$tool" inspect "$local" > /dev/null 2> "$log" || fail "inspect $local failed: $(tail -3 "$log")"
if grep -q 'file=libcurl' "$log"; then fail "reading a local file loaded libcurl"; fi

rc=0
LD_DEBUG=files "$tool" inspect http://127.0.0.1:9/model.pt > /dev/null 2> "$log" || rc=$?
[ "$rc" = 2 ] || fail "a refused connection exited $rc, not 2: $(grep -v '^ *[0-9]*:' "$log" | tail -3)"
grep -q 'file=libcurl.so.4.*dynamically loaded' "$log" || fail "opening a URL did not load libcurl"
grep -v '^ *[0-9]*:' "$log" | grep -q "Couldn't connect" ||
  fail "opening a URL did not reach the connection: $(grep -v '^ *[0-9]*:' "$log" | tail -3)"
echo "lazy_libcurl: not linked, not loaded for a local file, loaded for a URL"
