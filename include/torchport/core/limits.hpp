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
  /// Entries in a pickle's memo. torch.save memoizes 3 to 4 entries a
  /// tensor (320,000 tensors need 1.2 million); an entry costs one bit, or,
  /// numbered out of order (only a hand-made pickle does that), a set entry,
  /// of which at most 2^20 are kept whatever this says.
  std::uint64_t max_memo = 1u << 23;
  /// Values a pickle may create, counting each shared reference as often as
  /// it is reachable (this is what stops "billion laughs" memo expansion).
  /// torch.save creates about 15 a tensor: this fits `max_tensors` twice.
  std::uint64_t max_nodes = 1u << 25;
  /// Items and pairs put into containers by one pickle, all containers
  /// together (what bounds the building work; real pickles hold a few
  /// hundred thousand at most).
  std::uint64_t max_container_items = 1u << 25;
  /// Bytes of one pickled string, bytes object or integer.
  std::uint64_t max_string_bytes = 64u << 20;
  /// Bytes the data constructors one pickle calls (`bytearray`,
  /// `_codecs.encode`) may copy in all: Python copies the argument on each
  /// call, so one memo-shared string encoded many times would otherwise
  /// multiply memory (a real pickle copies each of its strings once).
  std::uint64_t max_constructed_bytes = 256u << 20;
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
  /// Bytes all deflated entries of one file (a zip) may inflate to
  /// together. Past its first 16 MiB, the sum is also held to
  /// `max_inflate_ratio` times the file's size, so many small entries cannot
  /// each use the per-entry floor.
  std::uint64_t max_inflate_total_bytes = 1ull << 36;
  /// Bytes of tensor data an owned load or a conversion may produce beyond
  /// `max_materialized_ratio` times the distinct storage bytes the file
  /// holds. Views of one storage are copied out one by one where a format
  /// has no views (safetensors, records; the storage views of legacy and
  /// tar files), so many views of one large storage would multiply it.
  /// The maximum value turns the check off.
  std::uint64_t max_materialized_bytes = 1ull << 30;
  /// See `max_materialized_bytes`: the multiple of the file's distinct
  /// storage bytes always allowed.
  std::uint64_t max_materialized_ratio = 4;
  /// Bytes of a JSON header (safetensors caps its own at 100 MB).
  std::uint64_t max_header_bytes = 100u << 20;
  /// Entries in a zip or tar directory.
  std::uint64_t max_entries = 1u << 20;
  /// Bytes one `scan()` may read out of archives, compressed files and
  /// nested members, and walk as pickles, all nesting together: each byte
  /// it inflates, copies or walks counts, however often an archive's
  /// entries overlap or nest. What is past it is `unscannable`.
  std::uint64_t max_scan_bytes = 1ull << 30;
  /// Archives inside archives (or compressed files) `scan()` follows; a
  /// member nested deeper is `unscannable`.
  std::uint32_t max_scan_depth = 4;
  /// Bytes read from standard input (the tool's `-`), which is held in
  /// memory: a pipe cannot be mapped.
  std::uint64_t max_stdin_bytes = 4ull << 30;
  /// Bytes of a file read by ranges (`MapOptions::pread`, a remote object)
  /// that a reader needing the whole file reads into memory: the tar format,
  /// a gzip-compressed record, our record files, a scan's sweeps.
  std::uint64_t max_whole_read_bytes = 4ull << 30;

  // Remote sources (`torchport::remote`):

  /// Milliseconds to connect (TCP and TLS) to a server.
  std::uint32_t remote_connect_timeout_ms = 10'000;
  /// Milliseconds a transfer may go without receiving a byte before it is
  /// abandoned (and retried, up to `remote_retries`).
  std::uint32_t remote_stall_timeout_ms = 30'000;
  /// Times one range request is tried again after a dropped connection, a
  /// stall, or a 5xx / 429 answer (waiting 0.25 s, 0.5 s, 1 s, ... between);
  /// a dropped transfer resumes where its bytes stopped.
  std::uint32_t remote_retries = 4;
  /// Bytes of a whole object a server that ignores Range (200 instead of
  /// 206) may send in its place: a smaller object is taken whole (and kept),
  /// a larger one is refused by name.
  std::uint64_t max_unranged_bytes = 64u << 20;
};

}  // namespace torchport
