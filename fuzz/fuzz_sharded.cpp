// The sharded-checkpoint index: the input is written as an index into a
// private directory that also holds a small valid shard (a.safetensors,
// with F32 tensors "x" and "y"), so an index naming it is read through;
// anything else fails on its missing or mismatched shards.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.hpp"

namespace {

namespace fs = std::filesystem;

// A safetensors file with two F32 tensors of 2 elements.
const std::string kShardA = [] {
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(16, '\x01');
}();

fs::path dir() {
  static const fs::path d = [] {
    fs::path p =
        fs::temp_directory_path() / ("torchport-fuzz-sharded-" + std::to_string(::getpid()));
    fs::create_directories(p);
    std::ofstream(p / "a.safetensors", std::ios::binary) << kShardA;
    return p;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const fs::path index = dir() / "model.safetensors.index.json";
  {
    std::ofstream out(index, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    fuzz::exercise(open(index, fuzz::small_options()));
  } catch (const Error&) {
  }
  return 0;
}
