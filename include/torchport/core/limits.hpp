#pragma once
/// \file
/// Every resource limit the readers enforce, in one place.

#include <cstdint>

namespace torchport {

/// Resource limits for reading untrusted input. The defaults admit every real
/// checkpoint we know of (a 70B-parameter model has under 1,000 tensors and a
/// pickle of a few hundred KB) and bound what a hostile file can make us do to
/// well under 256 MB and a second. Raise a limit by setting the field; each
/// error of code `limit_exceeded` names the field that stopped it.
struct Limits {
  /// Nesting depth of pickled containers (lists, dicts, tuples, objects).
  std::uint32_t max_depth = 256;
  /// Values a pickle may hold on its stack (all marks together). Picklers
  /// batch containers 1,000 items at a time, so real pickles stay tiny here.
  std::uint64_t max_stack = 1u << 18;
  /// Entries in a pickle's memo.
  std::uint64_t max_memo = 1u << 20;
  /// Values a pickle may create, counting each shared reference as often as
  /// it is reachable (this is what stops "billion laughs" memo expansion).
  std::uint64_t max_nodes = 1u << 22;
  /// Bytes of one pickled string, bytes object or integer.
  std::uint64_t max_string_bytes = 64u << 20;
  /// Bytes of a pickle stream (data.pkl and friends).
  std::uint64_t max_pickle_bytes = 1ull << 30;
  /// Tensors in one checkpoint.
  std::uint64_t max_tensors = 1u << 20;
  /// Bytes of one tensor name (a dotted key path).
  std::uint64_t max_name_bytes = 4096;
  /// Bytes one deflated zip entry (or gzip stream) may inflate to.
  std::uint64_t max_inflate_bytes = 1ull << 30;
  /// Past its first 16 MiB, a deflated zip entry or gzip stream may inflate
  /// to at most this many times its compressed size. Real tensor data
  /// compresses to about 1:1.1 and deflate cannot beat about 1:1032, so
  /// this is what keeps a small zip bomb from costing gigabytes of memory
  /// while `max_inflate_bytes` still admits large deflated checkpoints.
  /// 0 turns the check off.
  std::uint64_t max_inflate_ratio = 100;
  /// Bytes of a JSON header (safetensors caps its own at 100 MB).
  std::uint64_t max_header_bytes = 100u << 20;
  /// Entries in a zip or tar directory.
  std::uint64_t max_entries = 1u << 20;
};

}  // namespace torchport
