#!/usr/bin/env bash
# Installs the dependencies (with Debian's PyTorch, for the interop tests),
# builds everything warning-free, and runs the whole test suite; then the
# hardening pass (scripts/ci-hardening.sh: the suite again under ASan+UBSan,
# each fuzz target for 30 s, the concurrency test under TSan). Set
# TORCHPORT_SKIP_HARDENING=1 to stop after the normal tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
t0=$SECONDS
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCHPORT_WERROR=ON -DTORCHPORT_BUILD_TESTS=ON \
  -DTORCHPORT_BUILD_FUZZERS=ON
cmake --build build
# The suite, then the wall-clock/memory budgets (label
# `budget`) alone, so that other tests do not eat their time.
ctest --test-dir build --output-on-failure --timeout 900 -LE budget
ctest --test-dir build --output-on-failure --timeout 900 -L budget
echo "test.sh: build and tests took $((SECONDS - t0)) s"
if [ "${TORCHPORT_SKIP_HARDENING:-0}" != 1 ]; then
  bash scripts/ci-hardening.sh
fi
echo "test.sh: everything took $((SECONDS - t0)) s"
