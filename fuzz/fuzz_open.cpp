// open() on arbitrary bytes: once sniffed, then forced through every reader
// (a zip read as tar, a pickle read as safetensors...), each catalogue
// materialised.

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const Source src = Source::borrow(fuzz::as_bytes(data, size), "fuzz.bin");
  static const std::optional<Format> kFormats[] = {
      std::nullopt,        Format::pytorch_zip, Format::pytorch_legacy,
      Format::pytorch_tar, Format::safetensors, Format::torchport_record};
  for (const std::optional<Format> format : kFormats) {
    OpenOptions o = fuzz::small_options();
    o.format = format;
    o.verify_crc = (size & 1) != 0;
    try {
      fuzz::exercise(open(src, o));
    } catch (const Error&) {
    }
  }
  (void)sniff_format(src);
  return 0;
}
