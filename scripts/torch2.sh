#!/usr/bin/env bash
# torch 2.6 beside the host's torch 1.13: a minimal Debian 13 (trixie) system
# with Debian's python3-torch (2.6), python3-numpy (2.x) and
# python3-safetensors, made once by debootstrap and reused when present.
#
#   scripts/torch2.sh setup          # create it if missing (root; ~3-5 min)
#   scripts/torch2.sh python3 ARGS   # run its Python on host paths
#   scripts/torch2.sh argv           # the command that runs it, a word a line
#   scripts/torch2.sh path           # print its root folder
#
# Its Python runs through the system's own dynamic loader and libraries, not
# in a chroot: no mounts, so the host's paths (the repository, /tmp, /proc)
# are the same for both torches, and a killed test leaves nothing mounted.
# TORCHPORT_TORCH2_ROOT overrides the folder (default /var/lib/torchport/trixie).
set -euo pipefail
root=${TORCHPORT_TORCH2_ROOT:-/var/lib/torchport/trixie}
stamp=$root/.torchport-torch2-ready

setup() {
  [ -f "$stamp" ] && { echo "torch2: ready at $root"; return 0; }
  [ "$(id -u)" -eq 0 ] || { echo "torch2: setup needs root (debootstrap)" >&2; exit 2; }
  command -v debootstrap > /dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends debootstrap > /dev/null || {
      apt-get update > /dev/null && apt-get install -y --no-install-recommends debootstrap > /dev/null
    }
  }
  # The mirror this machine's apt uses (deb822 or one-line sources).
  local mirror=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" > /dev/null; then
    mirror=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / (bookworm|trixie)( |$)/ {print u; exit}' \
      /etc/apt/sources.list.d/*.sources || true)
  fi
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && ($3 == "bookworm" || $3 == "trixie") {print $2; exit}' /etc/apt/sources.list || true)
  fi
  mirror=${mirror:-http://deb.debian.org/debian}
  rm -rf "$root"
  mkdir -p "$root"
  echo "torch2: debootstrap trixie into $root from $mirror"
  debootstrap --variant=minbase trixie "$root" "$mirror" > "$root.debootstrap.log" 2>&1 || {
    tail -20 "$root.debootstrap.log" >&2
    echo "torch2: debootstrap failed" >&2
    exit 2
  }
  echo "deb $mirror trixie main" > "$root/etc/apt/sources.list"
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2> /dev/null || true
  # apt inside wants /proc and /dev only for a few maintainer scripts; mount
  # them for the install alone.
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
  local rc=0
  chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
    'apt-get update && apt-get install -y --no-install-recommends python3-torch python3-numpy python3-safetensors' \
    > "$root.install.log" 2>&1 || rc=$?
  umount -l "$root/dev" || true
  umount -l "$root/proc" || true
  if [ $rc -ne 0 ]; then
    tail -20 "$root.install.log" >&2
    echo "torch2: installing python3-torch in trixie failed" >&2
    exit 2
  fi
  touch "$stamp"
  echo "torch2: ready at $root ($(run_python -c 'import torch; print("torch", torch.__version__)'))"
}

# The command that runs its Python, one word a line: env with PYTHONHOME
# (Python finds its standard library and dist-packages there), then the
# tree's own dynamic loader with its library path (every shared library,
# torch's too, resolves inside the trixie tree), then the interpreter.
python_argv() {
  [ -f "$stamp" ] || { echo "torch2: not set up; run scripts/torch2.sh setup as root" >&2; exit 2; }
  local arch=x86_64-linux-gnu py
  py=$(cd "$root/usr/bin" && ls python3.[0-9]* | grep -E '^python3\.[0-9]+$' | sort -V | tail -1)
  local libs="$root/usr/lib/$arch/openblas-pthread:$root/usr/lib/$arch:$root/lib/$arch:$root/usr/lib"
  printf '%s\n' env "PYTHONHOME=$root/usr" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
    "$root/lib64/ld-linux-x86-64.so.2" --library-path "$libs" "$root/usr/bin/$py"
}

run_python() {
  local argv
  mapfile -t argv < <(python_argv)
  [ ${#argv[@]} -gt 0 ] || exit 2
  exec "${argv[@]}" "$@"
}

case "${1:-}" in
  setup) setup ;;
  python3) shift; run_python "$@" ;;
  argv) python_argv ;;
  path) echo "$root" ;;
  *) echo "usage: scripts/torch2.sh setup | python3 ARGS... | argv | path" >&2; exit 2 ;;
esac
