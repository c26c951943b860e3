#!/usr/bin/env bash
# Installs everything torchport needs to build, from Debian's packages (and,
# with --tests, the current torch from PyPI: scripts/torch.sh).
# Usage: scripts/install-deps.sh [--tests] [--bench]
#   --tests  also PyTorch, torchvision and scikit-learn (interop tests, fixtures),
#            python-lz4 and Python's GNU dbm (the advisory corpus's consumers),
#            doxygen (the API reference must build without a warning), clang's
#            sanitizer and libFuzzer runtimes (libclang-rt-14-dev: the hardening
#            pass of scripts/test.sh links against them) and Open MPI (the
#            tensor-parallel example), clang-format 14 (the format_check test
#            compares the tree with .clang-format using that version), and
#            the three torches the suites check against (scripts/torch.sh):
#            1.13 and 2.6 from Debian (the one that is not this host's
#            release in a tree debootstrap makes once, a few minutes), and
#            the current torch from PyPI in a virtual environment pinned by
#            requirements/current.txt (about a minute from this machine's
#            local wheels, then reused)
#            and (python/requirements-dev.txt) nanobind and pytest in
#            /var/lib/torchport/python-dev, for the Python module and its
#            tests (tests/python), with python3-dev's headers
#   --bench  also libtorch (the side-by-side benchmarks)
# Idempotent; run as root (or with sudo available).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
torches=0

packages=(
  cmake ninja-build g++ clang pkg-config
  zlib1g-dev libbz2-dev liblzma-dev libzstd-dev liblz4-dev libgdbm-dev libsqlite3-dev nlohmann-json3-dev libmsgpack-cxx-dev libpcre2-dev
  libcli11-dev libfmt-dev libopenblas-dev libcurl4-openssl-dev libtcmalloc-minimal4
  libgtest-dev libgmock-dev libbenchmark-dev
)
for arg in "$@"; do
  case "$arg" in
    --tests) packages+=(python3 python3-torch python3-torchvision python3-sklearn python3-numpy doxygen
                        python3-lz4 python3-gdbm
                        libclang-rt-14-dev openmpi-bin libopenmpi-dev clang-format-14 debootstrap
                        python3-venv python3-dev ca-certificates nginx-light openssl)
             torches=1 ;;
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
if [ $torches -eq 1 ]; then
  $SUDO bash "$here/torch.sh" 1.13 setup
  $SUDO bash "$here/torch.sh" 2.6 setup
  $SUDO bash "$here/torch.sh" current setup
  # moto's S3 server for the remote tests (tests/remote), pinned, in the
  # current torch's venv.
  $SUDO "$(bash "$here/torch.sh" current path)/bin/pip" install --quiet --no-input \
    -r "$here/../requirements/remote-tests.txt"
  # nanobind and pytest, pinned, in one folder both test Pythons (CPython
  # 3.11) put on PYTHONPATH; remade when the pins change.
  dev=${TORCHPORT_PYTHON_DEV:-/var/lib/torchport/python-dev}
  req=$here/../python/requirements-dev.txt
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ "$(cat "$dev/.torchport-requirements" 2> /dev/null)" != "$want" ]; then
    $SUDO rm -rf "$dev"
    $SUDO "$(bash "$here/torch.sh" current path)/bin/pip" install --quiet --no-input --no-deps \
      --target "$dev" -r "$req"
    echo "$want" | $SUDO tee "$dev/.torchport-requirements" > /dev/null
  fi
fi
