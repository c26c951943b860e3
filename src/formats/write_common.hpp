#pragma once
// What the writers share: streaming tensor bytes to a file in bounded
// chunks (with progress and page release), and checks on names.

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/save.hpp"

namespace torchport::formats {

/// Where a writer's data bytes go (a file, or the open entry of a zip).
using ByteSink = std::function<void(std::span<const std::byte>)>;

/// Streams tensor data and reports progress across all files of one save.
class DataStreamer {
 public:
  DataStreamer(const SaveOptions& options, std::uint64_t total) : options_(options), total_(total) {}

  /// Writes `t`'s elements in C order: a contiguous tensor straight from its
  /// storage (a mapped file, zero copy), a strided view through one buffer
  /// of its size. Returns the bytes written (`t.nbytes()`).
  std::uint64_t write_tensor(const Tensor& t, const ByteSink& sink);
  /// Writes a whole storage's bytes.
  std::uint64_t write_storage(const Storage& storage, const ByteSink& sink);

  std::uint64_t done() const noexcept { return done_; }
  std::uint64_t total() const noexcept { return total_; }

 private:
  void write_bytes(std::span<const std::byte> bytes, bool mapped, const ByteSink& sink);

  const SaveOptions& options_;
  std::uint64_t total_ = 0;
  std::uint64_t done_ = 0;
  std::uint64_t reported_ = 0;
};

/// True when the storage's bytes are a read-only view of someone else's
/// memory (in practice, a mapped file): the pages we may ask to drop.
bool is_mapped(const Storage& storage) noexcept;
/// Asks the kernel to drop the pages under `bytes` from this process
/// (MADV_PAGEOUT: never loses data; file pages are re-read on next use).
void release_pages(std::span<const std::byte> bytes) noexcept;
/// `release_pages` over the bytes `t` can reach, when its storage is mapped.
void release_view_pages(const Tensor& t) noexcept;
/// True when `s` is well-formed UTF-8 (what JSON and Python str need).
bool valid_utf8(std::string_view s) noexcept;
/// \throws Error(invalid_argument) naming the tensor when its name is not UTF-8.
void check_name(std::string_view name, std::string_view format);

}  // namespace torchport::formats
