// The safetensors header: the input is the JSON header; the target frames
// it (8-byte length, the header, 256 data bytes) so that every input gets
// past the length check and the JSON and offset checks see it.

#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  std::vector<std::byte> file(8 + size + 256);
  const std::uint64_t n = size;
  std::memcpy(file.data(), &n, 8);
  if (size) std::memcpy(file.data() + 8, data, size);
  for (std::size_t i = 0; i < 256; ++i) file[8 + size + i] = static_cast<std::byte>(i);
  OpenOptions o = fuzz::small_options();
  o.format = Format::safetensors;
  try {
    fuzz::exercise(open(Source::borrow(file, "fuzz.safetensors"), o));
  } catch (const Error&) {
  }
  return 0;
}
