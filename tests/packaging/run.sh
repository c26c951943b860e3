#!/usr/bin/env bash
# Builds and runs consumer projects against torchport:
#   run.sh find_package  SOURCE_DIR BUILD_DIR WORK_DIR FIXTURE
#   run.sh subdirectory  SOURCE_DIR BUILD_DIR WORK_DIR FIXTURE
#   run.sh read_only     SOURCE_DIR BUILD_DIR WORK_DIR FIXTURE EXE   (EXE built in BUILD_DIR)
# Each builds a program that loads a module (all components) and one that
# only reads (the read component), runs them, and checks that the read-only
# programs link neither PCRE2 nor OpenBLAS (nor the record and nn
# components): on the link line, in the shared libraries they load (ldd),
# and in their symbols (nm). The read component is also found alone
# (find_package COMPONENTS read) and built alone (TORCHPORT_COMPONENTS=read),
# both with pkg-config unavailable.
set -euo pipefail
mode=$1 src=$2 build=$3 work=$4 fixture=$5
rm -rf "$work" && mkdir -p "$work"
here=$(cd "$(dirname "$0")" && pwd)
not_read='pcre2|openblas|torchport-record|torchport-nn'

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The link command of TARGET in the Ninja build BUILD_DIR.
link_line() {
  ninja -C "$1" -t commands "$2" | tail -n 1
}

# check_read_only EXE LINK_LINE: nothing of PCRE2, OpenBLAS, record or nn.
check_read_only() {
  local exe=$1 line=$2
  if grep -Eo "[^ ]*($not_read)[^ ]*" <<< "$line"; then
    fail "$(basename "$exe"): the link line names the above"
  fi
  if ldd "$exe" | grep -E "$not_read"; then
    fail "$(basename "$exe") loads the above"
  fi
  if nm "$exe" | grep -E ' (pcre2_|cblas_)'; then
    fail "$(basename "$exe") holds the above symbols"
  fi
  echo "$(basename "$exe"): no PCRE2, no OpenBLAS"
}

# run_read EXE: prints the fixture's tensors, writes and reads them back.
run_read() {
  local out
  out="$work/out-$(basename "$1")"
  mkdir -p "$out"
  "$1" "$fixture" "$out" | tee "$out.txt"
  grep -q '^fc1.weight ' "$out.txt" || fail "$(basename "$1") did not list fc1.weight"
}

if [ "$mode" = read_only ]; then
  run_read "$6"
  check_read_only "$6" ""
elif [ "$mode" = find_package ]; then
  cmake --install "$build" --prefix "$work/prefix" > /dev/null
  prefix=$work/prefix
  # Only public headers are installed.
  test ! -e "$prefix/include/torchport/detail" || fail "include/torchport/detail/ was installed"
  # The internals several readers share live under src/: the zip, tar and
  # byte readers, the decompressors, the zip writer and the pickle VM.
  for internal in io/zip.hpp io/tar.hpp io/byte_reader.hpp io/compression.hpp io/zip_writer.hpp \
    pickle/unpickler.hpp; do
    test ! -e "$prefix/include/torchport/$internal" || fail "the internal header $internal was installed"
  done
  test -f "$prefix/include/torchport/pickle/globals.hpp" || fail "torchport/pickle/globals.hpp was not installed"
  test -f "$prefix/include/torchport/read.hpp" || fail "torchport/read.hpp was not installed"

  # Every component, and every installed header compiled by a consumer.
  cmake -S "$here/find_package_consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
  cmake --build "$work/build" > /dev/null
  "$work/build/consumer" "$fixture"
  "$work/build/consumer_shared" "$fixture"
  # The checks below see what they look for when it is there.
  link_line "$work/build" consumer | grep pcre2 > /dev/null || fail "the full consumer's link line lacks PCRE2"
  ldd "$work/build/consumer_shared" | grep openblas > /dev/null || fail "the full shared consumer does not load OpenBLAS"

  # The read component alone, found with pkg-config unavailable: its package
  # must not look for PCRE2 or OpenBLAS.
  cmake -S "$here/find_package_read_consumer" -B "$work/build-read" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON --no-warn-unused-cli > /dev/null
  cmake --build "$work/build-read" > /dev/null
  for exe in read_consumer read_consumer_shared; do
    run_read "$work/build-read/$exe"
    check_read_only "$work/build-read/$exe" "$(link_line "$work/build-read" $exe)"
  done

  # pkg-config: one module per component, torchport for all of them. They
  # give the static libraries, as the CMake targets do: a program linked
  # with them, without a runpath or LD_LIBRARY_PATH, starts and runs (with
  # -L/-l it linked the shared libraries and did not start: "libtorchport-
  # nn.so.0.1: cannot open shared object file").
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  pkg-config --modversion torchport
  for m in torchport-read torchport-record torchport-nn; do
    pkg-config --exists "$m" || fail "pkg-config has no $m"
  done
  pkg-config --libs torchport | grep pcre2 > /dev/null || fail "pkg-config torchport lacks PCRE2"
  read_libs=$(pkg-config --libs --static torchport-read)
  if grep -Eo "[^ ]*($not_read)[^ ]*" <<< "$read_libs"; then
    fail "pkg-config --libs --static torchport-read names the above"
  fi
  # shellcheck disable=SC2046 # pkg-config's output is a list of flags
  "${CXX:-c++}" "$here/consumer.cpp" -o "$work/consumer_pc" $(pkg-config --cflags torchport) \
    $(pkg-config --libs torchport)
  # shellcheck disable=SC2046
  "${CXX:-c++}" "$here/read_consumer.cpp" -o "$work/read_consumer_pc" $(pkg-config --cflags torchport-read) \
    $(pkg-config --libs torchport-read)
  for exe in consumer_pc read_consumer_pc; do
    if readelf -d "$work/$exe" | grep -E 'RPATH|RUNPATH'; then
      fail "$exe carries the above: the test must run it without one"
    fi
    if ldd "$work/$exe" | grep torchport; then
      fail "$exe loads the above shared libraries: pkg-config should give the static ones"
    fi
  done
  env -u LD_LIBRARY_PATH "$work/consumer_pc" "$fixture"
  run_read "$work/read_consumer_pc"
  check_read_only "$work/read_consumer_pc" "$(pkg-config --libs torchport-read)"

  test -x "$prefix/bin/torchport" && "$prefix/bin/torchport" --version
else
  cmake -S "$here/subdirectory_consumer" -B "$work/build" -G Ninja -DTORCHPORT_SOURCE_DIR="$src" > /dev/null
  cmake --build "$work/build" > /dev/null
  "$work/build/consumer" "$fixture"
  link_line "$work/build" consumer | grep pcre2 > /dev/null || fail "the full consumer's link line lacks PCRE2"
  for exe in read_consumer read_consumer_shared; do
    run_read "$work/build/$exe"
    check_read_only "$work/build/$exe" "$(link_line "$work/build" $exe)"
  done
  # Vendored for reading only (TORCHPORT_COMPONENTS=read), with pkg-config
  # unavailable: nothing looks for PCRE2 or OpenBLAS.
  cmake -S "$here/subdirectory_read_consumer" -B "$work/build-read" -G Ninja -DTORCHPORT_SOURCE_DIR="$src" \
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON --no-warn-unused-cli > /dev/null
  cmake --build "$work/build-read" > /dev/null
  for exe in read_consumer read_consumer_shared; do
    run_read "$work/build-read/$exe"
    check_read_only "$work/build-read/$exe" "$(link_line "$work/build-read" $exe)"
  done
fi
