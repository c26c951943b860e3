// The zip directory parser on arbitrary bytes: open, look every entry up by
// name, read it (inflating deflated ones, capped by the limits) and check
// its CRC.

#include "fuzz_common.hpp"
#include "io/zip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const Source src = Source::borrow(fuzz::as_bytes(data, size), "fuzz.zip");
  const Limits limits = fuzz::small_limits();
  try {
    const ZipArchive zip = ZipArchive::open(src, limits);
    for (const ZipEntry& e : zip.entries()) {
      if (zip.find(e.name) != &e) __builtin_trap();  // names are unique once opened
      try {
        const Source s = zip.read(e);
        if (s.size() != e.size) __builtin_trap();
        zip.verify_crc(e);
        const auto st = zip.storage(e);
        if (st->nbytes() != e.size || st->bytes().size() != e.size) __builtin_trap();
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
