#pragma once
/// \file
/// `Source`: the immutable bytes every reader parses, mapped from a file or
/// held in memory, with what keeps them alive.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "torchport/core/storage.hpp"

namespace torchport {

/// How to map a file.
struct MapOptions {
  /// Fault every page in at map time (MAP_POPULATE): faster when all bytes
  /// will be read, slower to open when few will.
  bool populate = false;
};

/// Read-only bytes with a name for messages and an owner that keeps them
/// alive. Copying a `Source` shares the bytes.
///
/// Lifetime: the bytes live as long as any copy of the `Source`, any slice of
/// it, or any `Storage` made by `storage()`. A mapped file must not be
/// truncated by another process while mapped (reading past its new end would
/// fault); torchport never writes to files it maps.
class Source {
 public:
  Source() = default;
  /// Maps `path` read-only. \throws Error(io) naming the path and the OS error.
  static Source map_file(const std::filesystem::path& path, MapOptions options = {});
  /// Takes ownership of `bytes`.
  static Source from_buffer(std::vector<std::byte> bytes, std::string name);
  /// Views the bytes of `storage` (materialising it), keeping it alive.
  static Source from_storage(std::shared_ptr<Storage> storage, std::string name);
  /// Views bytes the caller keeps alive for as long as any tensor read from
  /// them (a `static const` array, say).
  static Source borrow(std::span<const std::byte> bytes, std::string name);

  /// The bytes, valid while `owner()` lives.
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  std::uint64_t size() const noexcept { return bytes_.size(); }  ///< length in bytes
  /// Name for messages: the file name for a mapped file, else the one given.
  const std::string& name() const noexcept { return name_; }
  /// What keeps the bytes alive; hold it to keep them valid without the `Source`.
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }
  /// The file this source maps, if it maps one.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// The mapped file behind the bytes, when they are a file mapping (null for
  /// memory): lets a reader `pread` a few bytes instead of faulting pages of
  /// the mapping in (and keeping them resident).
  const std::shared_ptr<const FileBacking>& file() const noexcept { return file_; }

  /// A sub-range sharing the owner. \throws Error(truncated) when out of range.
  Source slice(std::uint64_t offset, std::uint64_t size, std::string name) const;
  /// A read-only `Storage` over `[offset, offset + size)`, zero copy.
  /// \throws Error(truncated) when out of range.
  std::shared_ptr<Storage> storage(std::uint64_t offset, std::uint64_t size) const;

 private:
  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const FileBacking> file_;  ///< set for a mapped file
  std::string name_;
  std::filesystem::path path_;
};

}  // namespace torchport
