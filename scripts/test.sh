#!/usr/bin/env bash
# Installs the dependencies (with Debian's PyTorch, for the interop tests),
# builds everything warning-free, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCHPORT_WERROR=ON -DTORCHPORT_BUILD_TESTS=ON
cmake --build build
ctest --test-dir build --output-on-failure --timeout 900
