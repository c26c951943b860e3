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

namespace torchport {

/// True when `bytes` starts with the gzip magic (1f 8b).
bool looks_like_gzip(std::span<const std::byte> bytes) noexcept;

/// Inflates a whole gzip stream (concatenated members included) into memory.
/// \throws Error(limit_exceeded) when the output would pass `max_bytes`,
/// Error(corrupt | truncated) for a damaged stream, naming `what`.
std::vector<std::byte> gunzip(std::span<const std::byte> bytes, std::uint64_t max_bytes, const std::string& what);

/// Compresses what is written to it and hands gzip bytes to `sink`.
class GzipWriter {
 public:
  using Sink = std::function<void(std::span<const std::byte>)>;
  explicit GzipWriter(Sink sink, int level = 6);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;
  void write(std::span<const std::byte> bytes);
  /// Ends the stream (writes the trailer). Must be called once, last.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace torchport
