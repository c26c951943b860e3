// scan() on arbitrary bytes: it must never throw for bad input (problems
// are findings), and its verdict must agree with open(): whatever open()
// refuses as broken, scan() may not call clean. (A file open() refuses as
// `unsupported`, a feature it does not read, may be clean: every place a
// loader could unpickle was judged; an archive of other files, refused as
// `not_a_checkpoint`, is as clean as its members; so is a joblib file, whose
// raw array bytes open() reads as opcodes where joblib.load reads them as
// an array, and the key-value stores shelve opens, which open() does not
// read.)

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const Source src = Source::borrow(fuzz::as_bytes(data, size), "fuzz.bin");
  const OpenOptions o = fuzz::small_options();
  const ScanReport r = scan(src, o);  // throws nothing for bad input
  (void)r.reason();
  std::optional<ErrorCode> refused;
  try {
    (void)open(src, o);
  } catch (const Error& e) {
    refused = e.code();
  }
  const bool excused = refused == ErrorCode::unsupported ||
                       refused == ErrorCode::not_a_checkpoint || r.format == "joblib" ||
                       r.format.starts_with("dbm.");
  if (refused && !excused && r.verdict == ScanVerdict::clean) __builtin_trap();
  return 0;
}
