#pragma once
/// \file
/// Compressed bytes: the one place torchport decompresses anything (zip
/// entries, gzip'd record files, the compressed wrappers `scan` opens), and
/// the stream transforms of a distributed checkpoint), and the streaming
/// gzip writer. zlib, libbz2, liblzma, libzstd and liblz4 do the work; every
/// output is bounded before it is produced.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/core/limits.hpp"

namespace torchport {

/// A whole-file compression that Python's loaders undo before unpickling
/// (`gzip.open`, joblib's `compress=`, `bz2.open`, `lzma.open`,
/// `lz4.frame.open`), or that
/// torch.distributed.checkpoint applies to each item (`stream.zstd/1`).
enum class Compression : std::uint8_t {
  gzip,   ///< RFC 1952 members (1f 8b)
  zlib,   ///< RFC 1950 (joblib's 'zlib'): a weak magic, 78 xx
  bzip2,  ///< "BZh" streams
  xz,     ///< .xz streams (fd 37 7a 58 5a 00)
  lzma,   ///< the legacy .lzma ("LZMA alone") format (joblib's 'lzma'): a weak magic
  zstd,   ///< Zstandard frames (28 b5 2f fd; skippable frames are stepped over)
  lz4,    ///< LZ4 frames (04 22 4d 18: joblib's compress='lz4'; skippable frames stepped over)
};

/// "gzip", "zlib", "bz2", "xz", "lzma", "zstd", "lz4".
std::string_view compression_name(Compression c) noexcept;

/// The compression `bytes` start with, by magic number, or nullopt. zlib
/// and lzma have weak magics (two and five bytes that other data can start
/// with): a caller treats them as a guess that decoding confirms.
std::optional<Compression> sniff_compression(std::span<const std::byte> bytes) noexcept;
/// True for the compressions whose magic is only a guess (zlib, lzma).
bool weak_magic(Compression c) noexcept;

/// True when `bytes` starts with the gzip magic (1f 8b).
bool looks_like_gzip(std::span<const std::byte> bytes) noexcept;

/// What a decoder produced: every byte it could decode, and, when it
/// stopped before the end of a complete stream, why.
struct Decompressed {
  std::vector<std::byte> bytes;  ///< the output, complete or up to where decoding stopped
  std::optional<Error>
      error;  ///< truncated, corrupt, unsupported or limit_exceeded; empty when whole
  std::uint64_t consumed = 0;  ///< input bytes read up to where decoding stopped or ended
};

/// Decodes a whole compressed file as Python's readers do: concatenated
/// gzip members, bz2 and xz streams and zlib streams are read one after the
/// other (trailing zeros after gzip members are padding; other bytes after
/// a complete bz2, xz, lzma or zlib stream end the data, as the Python
/// readers stop there; after gzip members, zstd and lz4 frames such bytes
/// are an Error(corrupt), as Python's gzip, the zstandard module and
/// python-lz4's frame reader raise). Output
/// is bounded by `max_bytes` (an Error(limit_exceeded) naming `limit`, with
/// the bytes before it kept). Never throws for bad input.
Decompressed decompress(Compression c, std::span<const std::byte> bytes, std::uint64_t max_bytes,
                        const std::string& limit, const std::string& what);

/// Zip compression methods, by the reader whose rules apply.
enum class ZipMethods : std::uint8_t {
  torch,   ///< miniz (torch's reader): stored (0) and deflate (8)
  python,  ///< Python's zipfile (np.load): also bzip2 (12) and LZMA (14)
};
/// Whether `methods` reads zip method `method`.
bool zip_method_read(std::uint16_t method, ZipMethods methods) noexcept;
/// "stored", "deflate", "bzip2", "lzma", "zstd" or "method N".
std::string zip_method_name(std::uint16_t method);

/// The data of a zip entry with method 8, 12 or 14, decoded into `out`,
/// which must be filled exactly (the declared size).
/// \throws Error(corrupt) when the stream is damaged, ends early or would
///         write more than `out` holds, naming `entry`, `offset` and `what`.
void decompress_zip_entry(std::uint16_t method, std::span<const std::byte> in,
                          std::span<std::byte> out, const std::string& entry, std::uint64_t offset,
                          const std::string& what);
/// The same without a declared size to trust (a scan's lenient view of
/// local headers): whatever decodes, up to `max_bytes`.
Decompressed decompress_zip_data(std::uint16_t method, std::span<const std::byte> in,
                                 std::uint64_t max_bytes, const std::string& what);

/// Inflates a whole gzip stream (concatenated members included) into memory.
/// \throws Error(limit_exceeded) when the output would pass `max_bytes`,
/// Error(corrupt | truncated) for a damaged stream, naming `what`.
std::vector<std::byte> gunzip(std::span<const std::byte> bytes, std::uint64_t max_bytes,
                              const std::string& what);
/// The same, bounded by `inflate_cap(bytes.size(), limits)`.
std::vector<std::byte> gunzip(std::span<const std::byte> bytes, const Limits& limits,
                              const std::string& what);

/// The most that `compressed` bytes of deflate data may inflate to under
/// `limits`: `max_inflate_bytes`, and past 16 MiB, `max_inflate_ratio`
/// times `compressed`.
std::uint64_t inflate_cap(std::uint64_t compressed, const Limits& limits) noexcept;
/// Which limit `inflate_cap` applies, for messages: "Limits::max_inflate_bytes
/// = N" or "Limits::max_inflate_ratio = R (N bytes from C compressed)".
std::string inflate_cap_reason(std::uint64_t compressed, const Limits& limits);

/// Compresses what is written to it and hands gzip bytes to `sink`.
class GzipWriter {
 public:
  /// Receives each run of compressed bytes as it is produced, in order.
  using Sink = std::function<void(std::span<const std::byte>)>;
  /// \param sink   where the gzip stream goes (header, deflate data, trailer)
  /// \param level  zlib compression level, 0 (store) to 9 (smallest)
  /// \throws Error(io) when zlib cannot start (e.g. a level out of range).
  explicit GzipWriter(Sink sink, int level = 6);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;
  /// Compresses `bytes`, handing whatever output is ready to the sink.
  void write(std::span<const std::byte> bytes);
  /// Ends the stream (writes the trailer). Must be called once, last.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace torchport
