// make_sharded OUT_DIR TOTAL_MB TENSOR_MB SHARD_MB
//
// Writes a Hugging Face sharded safetensors checkpoint of about TOTAL_MB
// MB: F32 tensors `layers.<i>.weight` of TENSOR_MB MB each (pseudorandom
// values), in shards of at most SHARD_MB MB, plus model.safetensors.index.json.
// Each tensor is made only when the writer reaches it, so generating a
// checkpoint larger than memory streams too. Used by convert_memory.sh.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "torchport/torchport.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: make_sharded OUT_DIR TOTAL_MB TENSOR_MB SHARD_MB\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::uint64_t total = std::strtoull(argv[2], nullptr, 10) << 20;
  const std::uint64_t tensor = std::strtoull(argv[3], nullptr, 10) << 20;
  const std::uint64_t shard = std::strtoull(argv[4], nullptr, 10) << 20;
  if (total == 0 || tensor == 0 || shard == 0 || tensor % 4096 != 0) {
    std::fprintf(stderr, "make_sharded: sizes must be positive (and TENSOR_MB whole)\n");
    return 2;
  }
  std::vector<torchport::NamedTensor> tensors;
  const std::int64_t cols = 1024, rows = static_cast<std::int64_t>(tensor / 4 / 1024);
  for (std::uint64_t i = 0; i * tensor < total; ++i) {
    auto storage = torchport::Storage::deferred(tensor, [tensor, i] {
      auto s = torchport::Storage::allocate(tensor);
      auto* f = reinterpret_cast<float*>(s->mutable_bytes().data());
      std::uint32_t x = 2463534242u ^ static_cast<std::uint32_t>(i * 2654435761u);
      for (std::uint64_t k = 0; k < tensor / 4; ++k) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f[k] = static_cast<float>(x) * (1.0f / 4294967296.0f) - 0.5f;
      }
      return s;
    });
    tensors.push_back(
        {"layers." + std::to_string(i) + ".weight",
         torchport::Tensor(torchport::DType::F32, {rows, cols}, {cols, 1}, 0, std::move(storage))});
  }
  torchport::SaveOptions o;
  o.max_shard_size = shard;
  try {
    const auto r = torchport::save(
        torchport::TensorCatalog::from_tensors(torchport::Format::state_dict, std::move(tensors)),
        std::filesystem::path(dir) / "model.safetensors", torchport::SaveFormat::safetensors, o);
    std::printf("%zu shards, %llu bytes of tensors\n", r.files.size(),
                static_cast<unsigned long long>(r.tensor_bytes));
  } catch (const torchport::Error& e) {
    std::fprintf(stderr, "make_sharded: %s\n", e.what());
    return 1;
  }
  return 0;
}
