#!/usr/bin/env bash
# Builds and runs a consumer project against torchport:
#   run.sh find_package  SOURCE_DIR BUILD_DIR WORK_DIR FIXTURE
#   run.sh subdirectory  SOURCE_DIR BUILD_DIR WORK_DIR FIXTURE
set -euo pipefail
mode=$1 src=$2 build=$3 work=$4 fixture=$5
rm -rf "$work" && mkdir -p "$work"
here=$(cd "$(dirname "$0")" && pwd)
if [ "$mode" = find_package ]; then
  cmake --install "$build" --prefix "$work/prefix" > /dev/null
  cmake -S "$here/find_package_consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
  cmake --build "$work/build" > /dev/null
  "$work/build/consumer" "$fixture"
  "$work/build/consumer_shared" "$fixture"
  # pkg-config sees the same library.
  PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --modversion torchport
  test -x "$work/prefix/bin/torchport" && "$work/prefix/bin/torchport" --version
else
  cmake -S "$here/subdirectory_consumer" -B "$work/build" -G Ninja -DTORCHPORT_SOURCE_DIR="$src" > /dev/null
  cmake --build "$work/build" > /dev/null
  "$work/build/consumer" "$fixture"
fi
