// Our record readers (named MessagePack, pretty JSON, compact binary, each
// also gzipped) on arbitrary bytes, through read_record and then as open()
// lists them.

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const Source src = Source::borrow(fuzz::as_bytes(data, size), "fuzz.rec");
  const OpenOptions o = fuzz::small_options();
  try {
    ParsedRecord r = read_record(src, o.limits);
    (void)to_json(prune_tensors(r.tree));
    fuzz::exercise(
        TensorCatalog::from_value(Format::torchport_record, std::move(r.tree), o.limits));
  } catch (const Error&) {
  }
  (void)looks_like_record(src);
  return 0;
}
