#!/usr/bin/env bash
# Installs the build dependencies, builds the tool, and shows what a shipped
# PyTorch training checkpoint holds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target torchport_cli
build/bin/torchport inspect tests/fixtures/checkpoint.pt
