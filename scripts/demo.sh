#!/usr/bin/env bash
# The main job: installs the build dependencies, builds the library and the
# demo, and runs a CNN trained in PyTorch (examples/digits/train.py) in C++
# on the held-out digits the repository ships.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target digits_demo
build/bin/digits_demo examples/digits build
