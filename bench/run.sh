#!/usr/bin/env bash
# The side-by-side load benchmark in one command: installs the benchmark
# dependencies (Debian's PyTorch and libtorch), builds, generates the
# workloads (bench/data/, ~17 GB with the Llama-shaped checkpoint) and runs
# bench/compare.py, which measures every method in three memory regimes
# (back-to-back, after idle, cold page cache: root only), interleaved,
# prints the medians and ratios, and rewrites its tables in bench/results.md.
# About 30 minutes. Extra arguments go to compare.py (e.g. --skip-llama,
# --runs 3, --regimes back-to-back, --skip-record-files).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCHPORT_BUILD_BENCHMARKS=ON
cmake --build build --target torchport_cli load_bench libtorch_load import_memory convert_bench fill_bench
/usr/bin/python3 bench/compare.py --build build "$@"
