#!/usr/bin/env bash
# Installs everything torchport needs to build, from Debian's packages.
# Usage: scripts/install-deps.sh [--tests] [--bench]
#   --tests  also PyTorch, torchvision and scikit-learn (interop tests, fixtures),
#            doxygen (the API reference must build without a warning), clang's
#            sanitizer and libFuzzer runtimes (libclang-rt-14-dev: the hardening
#            pass of scripts/test.sh links against them) and Open MPI (the
#            tensor-parallel example), clang-format 14 (the format_check test
#            compares the tree with .clang-format using that version), and
#            torch 2.6 beside torch 1.13: scripts/torch2.sh setup makes a
#            Debian 13 tree with its python3-torch, numpy 2 and safetensors
#            (debootstrap; a few minutes once, then reused)
#   --bench  also libtorch (the side-by-side benchmarks)
# Idempotent; run as root (or with sudo available).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
torch2=0

packages=(
  cmake ninja-build g++ clang pkg-config
  zlib1g-dev libbz2-dev liblzma-dev nlohmann-json3-dev libmsgpack-cxx-dev libpcre2-dev
  libcli11-dev libfmt-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
for arg in "$@"; do
  case "$arg" in
    --tests) packages+=(python3 python3-torch python3-torchvision python3-sklearn python3-numpy doxygen
                        libclang-rt-14-dev openmpi-bin libopenmpi-dev clang-format-14 debootstrap)
             torch2=1 ;;
    --bench) packages+=(libtorch-dev python3-torch python3-torchvision time) ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" > /dev/null || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [ $torch2 -eq 1 ]; then
  $SUDO bash "$here/torch2.sh" setup
fi
