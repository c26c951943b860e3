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
# /etc/apt/sources.list.d/*.sources); without one it stops. pip inside the
# chroot (the current torch's virtual environment) works as pip does on this
# machine: its configuration files, PIP_* variables and locally added
# certificate authorities are copied in, and
# the local folders they name (an index or find-links given as a path or a
# file:// URL) are bind-mounted read-only at the same paths, as a pip cache
# would be; remote indexes are reached as from this machine.
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
[ -n "$mirror" ] || { echo "fresh-debian: no bookworm mirror in this machine's apt sources" >&2; exit 2; }
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
  pip_setup
  # A clean clone: the committed tree only, no build folders or local files.
  rm -rf "$dir/root/torchport"
  git clone --quiet --no-local --no-hardlinks "$repo" "$dir/root/torchport"
  git -C "$dir/root/torchport" log -1 --format='fresh-debian: testing commit %h %s'
}

# This machine's pip configuration, for the chroot: the PIP_* variables, the
# configuration files, and the local folders they name, mounted read-only.
pip_vars=()
pip_setup() {
  local f d line
  while IFS= read -r line; do pip_vars+=("$line"); done < <(env | grep '^PIP_' || true)
  for f in /etc/pip.conf /etc/xdg/pip; do
    [ -e "$f" ] || continue
    mkdir -p "$dir$(dirname "$f")"
    cp -a "$f" "$dir$(dirname "$f")/"
  done
  # The certificate authorities this machine added for itself
  # (/usr/local/share/ca-certificates): pip's `cert` names the system bundle,
  # which the chroot's ca-certificates package builds, local ones included,
  # when install-deps installs it (or now, if it is already there).
  if compgen -G "/usr/local/share/ca-certificates/*.crt" > /dev/null; then
    mkdir -p "$dir/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
    if [ -x "$dir/usr/sbin/update-ca-certificates" ]; then
      chroot "$dir" /usr/sbin/update-ca-certificates > /dev/null
    fi
    echo "fresh-debian: this machine's local certificate authorities copied in"
  fi
  local cfg=""
  if command -v pip > /dev/null; then cfg=$(pip config list 2>/dev/null || true); fi
  # Paths named as values (find-links, file:// indexes), then their folder:
  # an index's "simple" folder links to files beside it, so its parent.
  for d in $(printf '%s\n' "$cfg" "${pip_vars[@]}" | grep -oE "(file://)?/[^ '\"]+" | sed 's|^file://||' | sort -u); do
    [ -d "$d" ] || continue
    [ "$(basename "$d")" = simple ] && d=$(dirname "$d")
    case "$d" in /etc/* | /usr/* | /root/* | /) continue ;; esac
    [ -d "$dir$d" ] && mountpoint -q "$dir$d" && continue
    mkdir -p "$dir$d"
    mount --bind -o ro "$d" "$dir$d"
    mounted+=("$dir$d")
    echo "fresh-debian: pip's local folder $d mounted read-only"
  done
}

in_chroot() {  # a login-like environment, nothing inherited from this shell but pip's settings
  chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pip_vars[@]}" \
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
