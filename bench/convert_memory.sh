#!/usr/bin/env bash
# Shows that `torchport convert` streams: converting a sharded checkpoint
# much larger than its largest tensor peaks at about that tensor's size.
#
#   bench/convert_memory.sh [--build DIR] [--total-mb N] [--tensor-mb N]
#                           [--shard-mb N] [--dir DIR] [--keep]
#
# Builds make_sharded and the tool (TORCHPORT_BUILD_BENCHMARKS=ON in DIR,
# default build-conv-bench), generates the checkpoint (default 4096 MB of 64 MB
# F32 tensors in 1024 MB shards) and runs each conversion under
# /usr/bin/time -v, printing peak RSS (which counts the file pages a process
# has mapped in), wall time and throughput. The disk and its page cache set
# the throughput; the point is the memory column.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-conv-bench total=4096 tensor=64 shard=1024 dir=/tmp/torchport-convert-bench keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --total-mb) total=$2; shift 2 ;;
    --tensor-mb) tensor=$2; shift 2 ;;
    --shard-mb) shard=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "needs GNU time (apt-get install time)" >&2; exit 2; }

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCHPORT_BUILD_BENCHMARKS=ON \
  -DTORCHPORT_BUILD_TESTS=OFF -DTORCHPORT_BUILD_EXAMPLES=OFF > /dev/null
cmake --build "$build" --target torchport_cli make_sharded > /dev/null
tool="$build/bin/torchport"

rm -rf "$dir"
mkdir -p "$dir/in" "$dir/out"
echo "generating $total MB of ${tensor} MB tensors in ${shard} MB shards in $dir/in"
/usr/bin/time -f "  generated in %e s, peak RSS %M kB" "$build/bin/make_sharded" "$dir/in" "$total" "$tensor" "$shard"

# Runs one conversion; prints a table row.
run() {
  local label=$1; shift
  rm -rf "$dir/out"; mkdir -p "$dir/out"
  local log; log=$(mktemp)
  /usr/bin/time -v "$tool" convert "$@" > /dev/null 2> "$log"
  local rss secs
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log" | awk -F: '{ if (NF == 3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rm -f "$log"
  printf "%-50s %10.0f MB %10.2f s %10.0f MB/s\n" "$label" "$(echo "$rss / 1024" | bc -l)" "$secs" \
    "$(echo "$total / $secs" | bc -l)"
}

printf "\ninput: %s MB in %s shards, largest tensor %s MB\n\n" "$total" "$(ls "$dir/in"/*.safetensors | wc -l)" "$tensor"
printf "%-50s %13s %12s %15s\n" "conversion" "peak RSS" "wall" "input rate"
run "sharded safetensors -> one .safetensors" "$dir/in" "$dir/out/model.safetensors"
run "sharded safetensors -> one PyTorch .pt" "$dir/in" "$dir/out/model.pt"
run "sharded -> PyTorch shards (--max-shard-size 1GB)" "$dir/in" "$dir/out/pytorch_model.bin" --max-shard-size 1GB
run "sharded -> .safetensors --dtype BF16" "$dir/in" "$dir/out/model.safetensors" --dtype BF16
[ "$keep" = 1 ] || rm -rf "$dir"
