#!/usr/bin/env bash
# Tensor-parallel loading of the Llama-shaped sharded checkpoint
# (bench/make_workloads.py's llama/: .bin shards, bf16, 32 heads, 32
# key/value heads): for N = 1, 2, 4 ranks, each rank in its own process,
# one after another (as if each ran on its own machine; warm page cache),
# the time to open the checkpoint and read the rank's slices (every split
# tensor's part, the others whole) into owned memory, and the bytes read,
# by bench/tp_load_bench. Prints a Markdown table for bench/results.md.
#
# Usage: bench/tensor_parallel.sh [BUILD_DIR]   (LLAMA_PARAMS=3e9 SHARD_GB=2 RUNS=3 by default;
# bench/data/llama is made once: delete it to change its size)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
params=${LLAMA_PARAMS:-3e9}
runs=${RUNS:-3}
cmake -S . -B "$build" -DTORCHPORT_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" --target tp_load_bench torchport_cli
/usr/bin/python3 bench/make_workloads.py --llama-params "$params" --shard-gb "${SHARD_GB:-2}" llama
ckpt=bench/data/llama
plan=bench/data/llama.plan
cat >"$plan" <<'PLAN'
# Megatron-style tensor parallelism for a Hugging Face LlamaForCausalLM
self_attn\.q_proj\.weight$ -> column(0, heads=32)
self_attn\.[kv]_proj\.weight$ -> column(0, kv_heads=32)
self_attn\.o_proj\.weight$ -> row(1, heads=32)
mlp\.(gate|up)_proj\.weight$ -> column(0)
mlp\.down_proj\.weight$ -> row(1)
embed_tokens\.weight$ -> column(0)
lm_head\.weight$ -> column(0)
norm\.weight$ -> replicate
PLAN
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| ranks | rank | load time (s, median of $runs) | bytes read | of the checkpoint |"
echo "|---:|---:|---:|---:|---:|"
for n in 1 2 4; do
  for ((r = 0; r < n; r++)); do
    line=$("$build/bin/tp_load_bench" "$ckpt" "$plan" "$n" "$r" "$runs")
    /usr/bin/python3 -c '
import json, sys
j = json.loads(sys.argv[1])
w, r, t, b, total = j["world"], j["rank"], j["seconds"], j["bytes"], j["total_bytes"]
print(f"| {w} | {r} | {t:.3f} | {b / 1e6:,.1f} MB | {b / total:.3f} |")
' "$line"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
