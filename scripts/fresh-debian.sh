#!/usr/bin/env bash
# Proves the README's quick start on a fresh machine: debootstraps a minimal
# Debian 12 (bookworm) into a folder, copies a clean clone of this
# repository (its committed HEAD) into it, runs the README's two commands in
# a chroot as root, and reports pass/fail and the time of each.
#
# Usage (as root): scripts/fresh-debian.sh [--demo-only] [--keep] [DIR]
#   DIR          where the system goes (default: a new folder under /var/tmp)
#   --demo-only  run `bash scripts/demo.sh` only (the test command takes long)
#   --keep       leave DIR in place afterwards (default: removed on success)
# The apt mirror is the one this machine uses (/etc/apt/sources.list or
# /etc/apt/sources.list.d/*.sources), else deb.debian.org.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

demo_only=0
keep=0
dir=""
for arg in "$@"; do
  case "$arg" in
    --demo-only) demo_only=1 ;;
    --keep) keep=1 ;;
    -*) echo "unknown option: $arg" >&2; exit 2 ;;
    *) dir=$arg ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian: run as root (debootstrap and chroot need it)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-debian: install debootstrap first" >&2; exit 2; }
[ -n "$dir" ] || dir=$(mktemp -d /var/tmp/torchport-fresh-debian.XXXXXX)
mkdir -p "$dir"
# The system's root: mktemp makes it 0700, which would keep every user but
# root out of the whole chroot (the sandboxed torch workers run as nobody).
chmod 755 "$dir"

# The mirror this machine's apt uses for bookworm.
mirror=""
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
  mirror=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}' /etc/apt/sources.list.d/*.sources || true)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
security=""
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
  security=$(awk '/^URIs:/ {u=$2} /^Suites:/ && /bookworm-security/ {print u; exit}' /etc/apt/sources.list.d/*.sources || true)
fi

mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    m=${mounted[$i]}
    umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup EXIT

results=()
status=0
step() {  # step NAME COMMAND...: runs and records pass/fail with its time
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "=== fresh-debian: $name"
  "$@" || rc=$?
  local took=$((SECONDS - t0))
  if [ $rc -eq 0 ]; then
    results+=("PASS  $name  (${took} s)")
  else
    results+=("FAIL  $name  (exit $rc after ${took} s)")
    status=1
  fi
  return $rc
}
report() {
  echo
  echo "fresh-debian: Debian 12 (bookworm, $mirror) in $dir"
  printf '  %s\n' "${results[@]}"
  [ $status -eq 0 ] && echo "fresh-debian: everything passed" || echo "fresh-debian: FAILED"
}

bootstrap() {
  if [ -x "$dir/usr/bin/apt-get" ]; then
    echo "fresh-debian: $dir already holds a system; reusing it"
    return 0
  fi
  debootstrap --variant=minbase bookworm "$dir" "$mirror"
}

configure() {
  {
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    [ -z "$security" ] || echo "deb $security bookworm-security main"
  } >"$dir/etc/apt/sources.list"
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
  for m in proc dev; do
    mount --bind "/$m" "$dir/$m"
    mounted+=("$dir/$m")
  done
  # A clean clone: the committed tree only, no build folders or local files.
  rm -rf "$dir/root/torchport"
  git clone --quiet --no-local --no-hardlinks "$repo" "$dir/root/torchport"
  git -C "$dir/root/torchport" log -1 --format='fresh-debian: testing commit %h %s'
}

in_chroot() {  # a login-like environment, nothing inherited from this shell
  chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/torchport && $1"
}

boot_step="debootstrap (minbase)"
[ ! -x "$dir/usr/bin/apt-get" ] || boot_step="debootstrap (reusing the system already in $dir)"
if step "$boot_step" bootstrap && step "configure chroot and clone" configure; then
  if step "bash scripts/demo.sh" in_chroot "bash scripts/demo.sh" && [ $demo_only -eq 0 ]; then
    step "bash scripts/test.sh" in_chroot "bash scripts/test.sh" || true
  fi
fi
cleanup
mounted=()
report
if [ $status -eq 0 ] && [ $keep -eq 0 ]; then
  rm -rf --one-file-system "$dir"
fi
exit $status
