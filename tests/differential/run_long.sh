#!/bin/sh
# A longer differential run: N mutants from a random seed (or SEED=...).
#   tests/differential/run_long.sh [N] [BUILD_DIR]
# Needs build/bin/differential_dump and build/bin/torchport
#   (cmake --build build --target differential_dump torchport_cli).
# Prints the summary; the mutants, results.jsonl and summary.txt stay in
# BUILD_DIR/differential-long-SEED/ for reproducing a failure.
set -eu
n=${1:-20000}
build=${2:-build}
seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
here=$(cd "$(dirname "$0")" && pwd)
out="$build/differential-long-$seed"
echo "differential long run: $n mutants, seed $seed, into $out"
exec /usr/bin/python3 "$here/run.py" --dump "$build/bin/differential_dump" --cli "$build/bin/torchport" \
  --out "$out" --seed "$seed" --count "$n"
