// scan() on arbitrary bytes: it must never throw for bad input (problems
// are findings), and its verdict must agree with open(): whatever open()
// refuses, scan() may not call clean (unless it is an archive of other
// files, each of which was scanned clean).

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace torchport;
  const Source src = Source::borrow(fuzz::as_bytes(data, size), "fuzz.bin");
  const OpenOptions o = fuzz::small_options();
  const ScanReport r = scan(src, o);  // throws nothing for bad input
  (void)r.reason();
  bool opened = true;
  try {
    (void)open(src, o);
  } catch (const Error&) {
    opened = false;
  }
  // A file open() refuses is never clean.
  if (!opened && r.verdict == ScanVerdict::clean && r.members.empty()) __builtin_trap();
  return 0;
}
