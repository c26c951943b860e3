#!/usr/bin/env bash
# The hardening pass of CI (issue 9), run by scripts/test.sh after the
# normal build and tests:
#   1. build-san: clang with ASan + UBSan (TORCHPORT_SANITIZE=ON) and the
#      libFuzzer targets (TORCHPORT_BUILD_FUZZERS=ON) in one build; run the
#      whole test suite under the sanitizers (every label: the fuzz corpora
#      replay as tests too);
#   2. fuzz each target for $FUZZ_SECONDS (default 30) from the seed corpus;
#      any crash, sanitizer report, leak, timeout or out-of-memory fails;
#   3. build-tsan: the concurrency test with ThreadSanitizer, and run it.
# Each step prints its wall time. Usage: scripts/ci-hardening.sh [steps...]
# with steps among san, fuzz, tsan (default: all three).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
JOBS=${JOBS:-$(nproc)}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(san fuzz tsan)
# Small, fast sanitizer builds: -O1 and line tables are enough for reports.
flags="-O1 -gline-tables-only"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

timed() {
  local name=$1
  shift
  local t0=$SECONDS
  "$@"
  echo "ci-hardening: $name took $((SECONDS - t0)) s"
}

configure_san() {
  CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=San \
    -DCMAKE_CXX_FLAGS_SAN="$flags" -DCMAKE_C_FLAGS_SAN="$flags" \
    -DTORCHPORT_SANITIZE=ON -DTORCHPORT_BUILD_FUZZERS=ON -DTORCHPORT_WERROR=ON \
    -DTORCHPORT_BUILD_TESTS=ON -DTORCHPORT_BUILD_TOOLS=ON -DTORCHPORT_BUILD_EXAMPLES=OFF \
    -DTORCHPORT_BUILD_DOC_SNIPPETS=OFF -DTORCHPORT_BUILD_SHARED=OFF -DTORCHPORT_INSTALL=OFF
}

for step in "${steps[@]}"; do
  case "$step" in
    san)
      timed "san configure" configure_san
      timed "san build" cmake --build build-san -j "$JOBS"
      timed "san corpus" bash fuzz/make_corpus.sh build-san/fuzz/corpus build-san/bin/torchport
      # The packaging test builds consumers against an installed tree: not a
      # sanitizer question, and it needs an install, which this build skips.
      # The interop suites run under the sanitizers against torch 1.13 only:
      # the C++ they drive is the same for every torch, and the torch 2.6 and
      # current-torch variants (each also run by the normal stage) would add
      # about ten minutes of Python for no new C++ path.
      timed "san tests" ctest --test-dir build-san --output-on-failure --timeout 1800 -j "$JOBS" -LE 'packaging|budget|checks|torch2|torch_current'
      # The wall-clock/memory budgets alone, after the rest.
      timed "san budget tests" ctest --test-dir build-san --output-on-failure --timeout 1800 -L budget
      ;;
    fuzz)
      [ -d build-san/fuzz/corpus ] || bash fuzz/make_corpus.sh build-san/fuzz/corpus build-san/bin/torchport
      out=build-san/fuzz-runs
      rm -rf "$out"
      mkdir -p "$out"
      for bin in build-san/bin/fuzz_*; do
        name=$(basename "$bin")
        target=${name#fuzz_}
        mkdir -p "$out/$target/corpus" "$out/$target/artifacts"
        seeds=(build-san/fuzz/corpus/"$target")
        [ -d "tests/fuzz_regressions/$target" ] && seeds+=("tests/fuzz_regressions/$target")
        echo "ci-hardening: fuzzing $target for $FUZZ_SECONDS s"
        t0=$SECONDS
        if ! "$bin" "$out/$target/corpus" "${seeds[@]}" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
             -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
             -artifact_prefix="$out/$target/artifacts/" >"$out/$target/log" 2>&1; then
          tail -60 "$out/$target/log"
          echo "ci-hardening: fuzz_$target found a problem: see $out/$target/artifacts" >&2
          exit 1
        fi
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/$target/log" | tr '\n' ' '
        echo "($((SECONDS - t0)) s)"
      done
      ;;
    tsan)
      tsan="-O1 -gline-tables-only -fsanitize=thread"
      timed "tsan configure" env CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Tsan \
        -DCMAKE_CXX_FLAGS_TSAN="$tsan" -DCMAKE_C_FLAGS_TSAN="$tsan" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DTORCHPORT_WERROR=ON -DTORCHPORT_BUILD_TESTS=ON \
        -DTORCHPORT_BUILD_TOOLS=ON -DTORCHPORT_BUILD_EXAMPLES=OFF -DTORCHPORT_BUILD_DOC_SNIPPETS=OFF \
        -DTORCHPORT_BUILD_SHARED=OFF -DTORCHPORT_INSTALL=OFF
      timed "tsan build" cmake --build build-tsan -j "$JOBS" --target test_concurrency
      timed "tsan test" env TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
        build-tsan/bin/test_concurrency
      ;;
    *) echo "unknown step: $step" >&2; exit 2 ;;
  esac
done
