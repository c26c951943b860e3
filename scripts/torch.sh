#!/usr/bin/env bash
# The three torches every suite is checked against, each installed by this
# script and run by it:
#
#   1.13     Debian 12's python3-torch (with torchvision 0.14, numpy 1.24)
#   2.6      Debian 13's python3-torch (with numpy 2.2, safetensors 0.4)
#   current  torch 2.14.1 from PyPI with torchvision 0.29.1, safetensors 0.8.0,
#            numpy 2 and zstandard, in a virtual environment pinned by
#            requirements/current.txt
#
#   scripts/torch.sh REF setup          # make it if missing (root for the Debian trees)
#   scripts/torch.sh REF python3 ARGS   # run its Python on host paths
#   scripts/torch.sh REF argv           # the command that runs it, a word a line
#   scripts/torch.sh REF path           # where it lives
#
# A Debian torch is the host's own /usr/bin/python3 when the host is that
# Debian release (/etc/debian_version), else a minimal tree of that release
# made once by debootstrap under /var/lib/torchport/<codename> (override with
# TORCHPORT_TORCH_TREES). Such a tree's Python runs through the tree's own
# dynamic loader and libraries, not in a chroot: no mounts, and the host's
# paths (the repository, /tmp, /proc) are the same for every torch.
#
# The virtual environment is /var/lib/torchport/venv-current (override with
# TORCHPORT_VENV), made with the host's python3 (Debian's python3-venv) and
# pip under the host's own pip configuration (its index, find-links and
# constraints); it is brought to requirements/current.txt's pins whenever that
# file changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
trees=${TORCHPORT_TORCH_TREES:-/var/lib/torchport}

usage() {
  echo "usage: scripts/torch.sh 1.13|2.6|current setup | python3 ARGS... | argv | path" >&2
  exit 2
}

host_major() {  # 12 on bookworm, 13 on trixie, 0 when not Debian
  local v
  v=$(cat /etc/debian_version 2>/dev/null || true)
  case "$v" in
    bookworm* | 12*) echo 12 ;;
    trixie* | 13*) echo 13 ;;
    *) echo 0 ;;
  esac
}

# The Debian mirror this machine's apt uses (deb822 or one-line sources):
# the first URI of a suite of bookworm or trixie (any release's mirror
# serves both). Nothing is guessed: without one, setup says so.
apt_mirror() {
  local m=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" > /dev/null; then
    m=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / (bookworm|trixie)( |$)/ {print u; exit}' \
      /etc/apt/sources.list.d/*.sources || true)
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" && ($3 == "bookworm" || $3 == "trixie") {print $2; exit}' /etc/apt/sources.list || true)
  fi
  [ -n "$m" ] || { echo "torch.sh: no bookworm or trixie mirror in this machine's apt sources" >&2; exit 2; }
  echo "$m"
}

# --- Debian's torch, on the host or in a tree ------------------------------

debian_setup() {  # CODENAME MAJOR PACKAGES...
  local codename=$1 major=$2 root=$trees/$1
  shift 2
  local stamp=$root/.torchport-ready
  if [ "$(host_major)" = "$major" ]; then
    /usr/bin/python3 -c 'import torch' 2> /dev/null && return 0
    echo "torch.sh: the host's python3-torch is missing (scripts/install-deps.sh --tests installs it)" >&2
    exit 2
  fi
  [ -f "$stamp" ] && { echo "torch.sh: $codename tree ready at $root"; return 0; }
  [ "$(id -u)" -eq 0 ] || { echo "torch.sh: making the $codename tree needs root (debootstrap)" >&2; exit 2; }
  command -v debootstrap > /dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends debootstrap > /dev/null || {
      apt-get update > /dev/null && apt-get install -y --no-install-recommends debootstrap > /dev/null
    }
  }
  local mirror
  mirror=$(apt_mirror)
  rm -rf "$root"
  mkdir -p "$root"
  echo "torch.sh: debootstrap $codename into $root"
  debootstrap --variant=minbase "$codename" "$root" "$mirror" > "$root.debootstrap.log" 2>&1 || {
    tail -20 "$root.debootstrap.log" >&2
    echo "torch.sh: debootstrap of $codename failed" >&2
    exit 2
  }
  echo "deb $mirror $codename main" > "$root/etc/apt/sources.list"
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2> /dev/null || true
  # apt inside wants /proc and /dev only for a few maintainer scripts; mount
  # them for the install alone.
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
  local rc=0
  chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get update && apt-get install -y --no-install-recommends $*" > "$root.install.log" 2>&1 || rc=$?
  umount -l "$root/dev" || true
  umount -l "$root/proc" || true
  if [ $rc -ne 0 ]; then
    tail -20 "$root.install.log" >&2
    echo "torch.sh: installing python3-torch in the $codename tree failed" >&2
    exit 2
  fi
  touch "$stamp"
  echo "torch.sh: $codename tree ready at $root"
}

# The command that runs a Debian torch, one word a line: the host's
# /usr/bin/python3, or env with PYTHONHOME (Python finds its standard library
# and dist-packages there), then the tree's own dynamic loader with its
# library path (every shared library, torch's too, resolves inside the tree),
# then the interpreter.
debian_argv() {  # CODENAME MAJOR
  local codename=$1 major=$2 root=$trees/$1
  if [ "$(host_major)" = "$major" ]; then
    echo /usr/bin/python3
    return 0
  fi
  [ -f "$root/.torchport-ready" ] || {
    echo "torch.sh: the $codename tree is not set up; run scripts/torch.sh ${REF} setup as root" >&2
    exit 2
  }
  local arch=x86_64-linux-gnu py
  py=$(cd "$root/usr/bin" && ls python3.[0-9]* | grep -E '^python3\.[0-9]+$' | sort -V | tail -1)
  local libs="$root/usr/lib/$arch/openblas-pthread:$root/usr/lib/$arch:$root/lib/$arch:$root/usr/lib"
  printf '%s\n' env "PYTHONHOME=$root/usr" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
    "$root/lib64/ld-linux-x86-64.so.2" --library-path "$libs" "$root/usr/bin/$py"
}

# --- the current torch, from PyPI in a virtual environment ------------------

venv=${TORCHPORT_VENV:-$trees/venv-current}
requirements=$here/../requirements/current.txt

venv_setup() {
  local want have=""
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  [ -f "$venv/.torchport-requirements" ] && have=$(cat "$venv/.torchport-requirements")
  if [ "$want" = "$have" ] && "$venv/bin/python" -c 'import torch' 2> /dev/null; then
    echo "torch.sh: current torch ready in $venv"
    return 0
  fi
  # The wheels on this machine's disk are for CPython 3.11, Debian 12's
  # Python; another Python makes pip fetch its own builds.
  if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -c 'import venv, ensurepip' 2> /dev/null || {
      echo "torch.sh: the host's python3 cannot make a virtual environment (install python3-venv)" >&2
      exit 2
    }
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    echo "torch.sh: making $venv"
    /usr/bin/python3 -m venv "$venv"
  fi
  # An existing environment is brought to the pins in place (a changed pin
  # is reinstalled; what is no longer pinned stays, unused). No cache: the
  # wheels are installed once, and a cache would double the disk they take.
  echo "torch.sh: installing requirements/current.txt into $venv"
  "$venv/bin/pip" install --no-cache-dir --quiet --no-input -r "$requirements" > "$venv.install.log" 2>&1 || {
    grep -v "is ignored: it is neither a file nor a directory" "$venv.install.log" | tail -20 >&2
    echo "torch.sh: pip install -r requirements/current.txt failed" >&2
    exit 2
  }
  echo "$want" > "$venv/.torchport-requirements"
  echo "torch.sh: current torch ready in $venv ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
}

venv_argv() {
  [ -f "$venv/.torchport-requirements" ] || {
    echo "torch.sh: the current torch is not set up; run scripts/torch.sh current setup" >&2
    exit 2
  }
  printf '%s\n' env PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python"
}

# --- dispatch ---------------------------------------------------------------

REF=${1:-}
CMD=${2:-}
[ $# -ge 2 ] || usage
shift 2
case "$REF" in
  1.13)
    setup() { debian_setup bookworm 12 python3-torch python3-torchvision python3-numpy python3-sklearn; }
    argv() { debian_argv bookworm 12; }
    where() { [ "$(host_major)" = 12 ] && echo / || echo "$trees/bookworm"; } ;;
  2.6)
    setup() { debian_setup trixie 13 python3-torch python3-numpy python3-safetensors; }
    argv() { debian_argv trixie 13; }
    where() { [ "$(host_major)" = 13 ] && echo / || echo "$trees/trixie"; } ;;
  current)
    setup() { venv_setup; }
    argv() { venv_argv; }
    where() { echo "$venv"; } ;;
  *) usage ;;
esac
case "$CMD" in
  setup) setup ;;
  argv) argv ;;
  path) where ;;
  python3)
    mapfile -t words < <(argv)
    [ ${#words[@]} -gt 0 ] || exit 2
    exec "${words[@]}" "$@" ;;
  *) usage ;;
esac
