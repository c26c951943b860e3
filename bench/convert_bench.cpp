// In-process kernels of a load: dtype conversion against memcpy of the same
// output bytes (the target: half-precision conversion at >= 50% of memcpy
// bandwidth).
//
//   build/bin/convert_bench --benchmark_counters_tabular=true

#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "torchport/core/convert.hpp"
#include "torchport/core/half.hpp"

namespace {

constexpr std::size_t kElements = std::size_t{16} << 20;  // 64 MiB of f32 out

void BM_memcpy_f32(benchmark::State& state) {
  std::vector<float> src(kElements, 1.5f), dst(kElements);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kElements * 4);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * 4));
}

void convert(benchmark::State& state, torchport::DType from, torchport::DType to) {
  const std::size_t in = torchport::dtype_size(from), out = torchport::dtype_size(to);
  std::vector<std::byte> src(kElements * in), dst(kElements * out);
  for (std::size_t i = 0; i < kElements; ++i) {
    const float v = static_cast<float>(i % 1000) * 0.25f;
    if (from == torchport::DType::F32)
      std::memcpy(&src[i * 4], &v, 4);
    else {
      const std::uint16_t h =
          from == torchport::DType::F16 ? torchport::float_to_half(v) : torchport::float_to_bf16(v);
      std::memcpy(&src[i * 2], &h, 2);
    }
  }
  for (auto _ : state) {
    torchport::convert_elements(src.data(), from, dst.data(), to, kElements);
    benchmark::DoNotOptimize(dst.data());
  }
  // Bytes written, to compare with memcpy's.
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * kElements * std::max(in, out)));
}

void BM_bf16_to_f32(benchmark::State& s) {
  convert(s, torchport::DType::BF16, torchport::DType::F32);
}
void BM_f16_to_f32(benchmark::State& s) {
  convert(s, torchport::DType::F16, torchport::DType::F32);
}
void BM_f32_to_bf16(benchmark::State& s) {
  convert(s, torchport::DType::F32, torchport::DType::BF16);
}
void BM_f32_to_f16(benchmark::State& s) {
  convert(s, torchport::DType::F32, torchport::DType::F16);
}

}  // namespace

BENCHMARK(BM_memcpy_f32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_bf16_to_f32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_f16_to_f32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_f32_to_bf16)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_f32_to_f16)->Unit(benchmark::kMillisecond);
