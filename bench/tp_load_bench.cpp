// tp_load_bench CHECKPOINT PLAN WORLD RANK [RUNS] [--mapped]
//
// What one rank of a tensor-parallel model loads of CHECKPOINT (any format
// torchport opens; a sharded checkpoint's index or directory) by the
// sharding plan PLAN: every split tensor as the rank's slice
// (read_slice), every other tensor whole, read into owned memory (with
// --mapped, slices that are contiguous in the file stay zero-copy views).
// Times open + reads, RUNS times (default 3), and prints one JSON line:
// {"world", "rank", "seconds" (median), "bytes" (read by the rank),
// "total_bytes" (every tensor whole), "split", "whole" (tensor counts)}.
// Driven by bench/tensor_parallel.sh.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "torchport/torchport.hpp"

using namespace torchport;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: tp_load_bench CHECKPOINT PLAN WORLD RANK [RUNS] [--mapped]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int world = std::atoi(argv[3]), rank = std::atoi(argv[4]);
  int runs = 3;
  bool mapped = false;
  for (int i = 5; i < argc; ++i) {
    if (std::string(argv[i]) == "--mapped")
      mapped = true;
    else
      runs = std::max(1, std::atoi(argv[i]));
  }
  try {
    const ShardPlan plan = ShardPlan::read_file(argv[2]);
    std::vector<double> times;
    std::uint64_t bytes = 0, total = 0, split = 0, whole = 0;
    for (int run = 0; run < runs; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      const TensorCatalog cat = open(path);
      auto counter = std::make_shared<ReadCounter>();
      std::vector<Tensor> kept;
      kept.reserve(cat.size());
      split = whole = total = 0;
      for (const auto& [name, t] : cat.tensors()) {
        total += t.nbytes();
        const ShardSlice s = plan.resolve(name, t.shape(), rank, world);
        if (s.kind == ShardKind::replicate) {
          Tensor c = Tensor::empty(t.dtype(), t.shape());
          t.copy_to(c.mutable_bytes());  // one pread for a contiguous tensor of a mapped file
          counter->add(t.nbytes());
          kept.push_back(std::move(c));
          ++whole;
        } else {
          Tensor x = read_slice(t, s.dim, s.ranges, {counter, /*lazy*/ false});
          if (!mapped && x.storage() == t.storage())
            x = x.clone();  // a view: read it into owned memory
          kept.push_back(std::move(x));
          ++split;
        }
      }
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      bytes = counter->bytes();
    }
    std::sort(times.begin(), times.end());
    std::printf(
        "{\"world\": %d, \"rank\": %d, \"seconds\": %.4f, \"bytes\": %llu, \"total_bytes\": %llu, "
        "\"split\": %llu, "
        "\"whole\": %llu}\n",
        world, rank, times[times.size() / 2], static_cast<unsigned long long>(bytes),
        static_cast<unsigned long long>(total), static_cast<unsigned long long>(split),
        static_cast<unsigned long long>(whole));
  } catch (const Error& e) {
    std::fprintf(stderr, "tp_load_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
