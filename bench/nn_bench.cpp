// Benchmarks of the nn CPU backend's heavy paths: a 3x3 convolution and a
// square single-precision matrix product.
//
//   cmake -B build-bench -G Ninja -DTORCHPORT_BUILD_BENCHMARKS=ON && cmake --build build-bench
//   build-bench/bin/nn_bench
//
// Compare with torch (python3 -c "import torch, torch.utils.benchmark as b; ...")
// at the same OPENBLAS_NUM_THREADS / torch.set_num_threads.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "torchport/nn/conv.hpp"
#include "torchport/nn/linalg.hpp"

namespace {

namespace nn = torchport::nn;
using torchport::Tensor;

// Deterministic values in [-1, 1) (a linear congruential generator).
Tensor filled(torchport::Shape shape) {
  const std::int64_t n = torchport::shape_numel(shape);
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint32_t s = 12345;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return Tensor::from(std::span<const float>(v), std::move(shape));
}

// conv2d 3x3, stride 1, padding 1, 64 -> 64 channels on a 1x64x56x56 input
// (a ResNet stage-1 layer): im2col + one sgemm of [64 x 576] @ [576 x 3136].
void BM_Conv2d3x3_64x56x56(benchmark::State& state) {
  const Tensor x = filled({1, 64, 56, 56});
  const Tensor w = filled({64, 64, 3, 3});
  const Tensor b = filled({64});
  for (auto _ : state) {
    Tensor y = nn::conv2d(x, w, b, {.padding = 1});
    benchmark::DoNotOptimize(y.mutable_data<float>());
  }
  const double flops = 2.0 * 64 * 56 * 56 * 64 * 9;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv2d3x3_64x56x56)->Unit(benchmark::kMillisecond)->UseRealTime();

// Depthwise 3x3 on the same input (groups = 64): the direct loop.
void BM_Conv2dDepthwise3x3_64x56x56(benchmark::State& state) {
  const Tensor x = filled({1, 64, 56, 56});
  const Tensor w = filled({64, 1, 3, 3});
  for (auto _ : state) {
    Tensor y = nn::conv2d(x, w, Tensor(), {.padding = 1, .groups = 64});
    benchmark::DoNotOptimize(y.mutable_data<float>());
  }
}
BENCHMARK(BM_Conv2dDepthwise3x3_64x56x56)->Unit(benchmark::kMillisecond)->UseRealTime();

// 1024 x 1024 @ 1024 x 1024 in F32 through nn::matmul (one cblas_sgemm).
void BM_Matmul1024(benchmark::State& state) {
  const Tensor a = filled({1024, 1024});
  const Tensor b = filled({1024, 1024});
  for (auto _ : state) {
    Tensor c = nn::matmul(a, b);
    benchmark::DoNotOptimize(c.mutable_data<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 1024 * 1024 * 1024 * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Matmul1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
