#!/usr/bin/env bash
# libcurl is loaded when a URL is opened, never linked: the tool does not
# name it (readelf), a run that reads a local file never loads it (the
# loader's own log, LD_DEBUG=files), and a run that opens a URL loads it and
# gets as far as the connection (refused: nothing listens on port 9 here).
# A libcurl.so.4 that lacks a function, or is older than 7.85, is refused
# (exit 1) with the reason, before any call into it: two fakes
# (fake_libcurl_*.cpp), each found first through LD_LIBRARY_PATH; and so is
# none at all.
# Usage: lazy_libcurl.sh TOOL LOCAL_CHECKPOINT MISSING_DIR OLD_DIR
set -euo pipefail
tool=$1 local=$2 missing=$3 old=$4
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

refused() {  # DIR WHAT: the fake in DIR is refused, saying WHAT
  local rc=0
  LD_LIBRARY_PATH=$1 "$tool" inspect http://127.0.0.1:9/model.pt > /dev/null 2> "$log" || rc=$?
  [ "$rc" = 1 ] || fail "a libcurl from $1 exited $rc, not 1 (refused): $(tail -3 "$log")"
  grep -qF "$2" "$log" || fail "a libcurl from $1 was not refused with \"$2\": $(tail -3 "$log")"
}
refused "$missing" "remote sources need libcurl's curl_version_info, which libcurl.so.4 does not have"
refused "$old" "remote sources need libcurl 7.85 or later; libcurl.so.4 is 7.84.0"
# No libcurl at all: the system's, hidden in a private mount namespace
# (root with CAP_SYS_ADMIN; said and skipped elsewhere), reads as an empty
# file, which the dynamic loader refuses.
missing_too=""
# (awk reads to the end: an early exit would end ldconfig by SIGPIPE, which
# pipefail turns into a silent failure of the script)
system=$(ldconfig -p | awk '/libcurl\.so\.4 \(libc6/ && !found {found = $NF} END {print found}')
if [ -n "$system" ] && unshare -m true 2> /dev/null; then
  rc=0
  unshare -m sh -c 'mount --bind /dev/null "$1" && exec "$2" inspect http://127.0.0.1:9/model.pt' \
    sh "$system" "$tool" > /dev/null 2> "$log" || rc=$?
  [ "$rc" = 1 ] || fail "without libcurl, a URL exited $rc, not 1 (refused): $(tail -3 "$log")"
  grep -qF "remote sources need libcurl (libcurl.so.4), which cannot be loaded: " "$log" ||
    fail "without libcurl, a URL was not refused with the reason: $(tail -3 "$log")"
  missing_too=", missing"
else
  echo "lazy_libcurl: no private mount namespace here: the case of no libcurl at all is not run"
fi
echo "lazy_libcurl: not linked, not loaded for a local file, loaded for a URL, refused when incomplete, old$missing_too"
