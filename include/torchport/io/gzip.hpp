#pragma once
/// \file
/// gzip streams (RFC 1952) through zlib: bounded inflation and a streaming
/// deflater.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "torchport/core/limits.hpp"

namespace torchport {

/// True when `bytes` starts with the gzip magic (1f 8b).
bool looks_like_gzip(std::span<const std::byte> bytes) noexcept;

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
