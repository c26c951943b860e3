// Distributed checkpoints (torch.distributed.checkpoint): the input is a
// folder, packed as records of
//
//   name (up to 64 bytes, NUL-terminated) | length (u32, little-endian) | bytes
//
// written into a private directory that is then opened (and scanned) as a
// folder: a .metadata with its .distcp files (stream transforms included),
// or Hugging Face storage shards (safetensors with DCP_SHARDING_INFO). Names
// are kept to [A-Za-z0-9._-] and at most 16 files; fuzz/make_corpus.sh packs
// the small fixture folders of tests/fixtures/dcp as seeds.

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.hpp"

namespace {

namespace fs = std::filesystem;

fs::path dir() {
  static const fs::path d =
      fs::temp_directory_path() / ("torchport-fuzz-dcp-" + std::to_string(::getpid()));
  return d;
}

bool plain(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 64) return false;
  for (const char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  std::error_code ec;
  fs::remove_all(dir(), ec);
  fs::create_directories(dir());
  std::size_t at = 0;
  int files = 0;
  while (at < size && files < 16) {
    std::size_t end = at;
    while (end < size && end - at <= 64 && data[end] != 0) ++end;
    if (end >= size || data[end] != 0 || size - end - 1 < 4) break;
    const std::string name(reinterpret_cast<const char*>(data + at), end - at);
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(data[end + 1 + i]) << (8 * i);
    at = end + 5;
    if (n > size - at) n = static_cast<std::uint32_t>(size - at);
    if (plain(name)) {
      std::ofstream out(dir() / name, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(data + at), static_cast<std::streamsize>(n));
      ++files;
    }
    at += n;
  }
  try {
    fuzz::exercise(open(dir(), fuzz::small_options()));
  } catch (const Error&) {
  }
  try {
    (void)scan(dir(), fuzz::small_options());
  } catch (const Error&) {
  }
  return 0;
}
