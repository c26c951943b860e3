#pragma once
/// \file
/// `Source`: the immutable bytes every reader parses, mapped from a file,
/// read from one with `pread`, held in memory, or read from a remote object
/// (`torchport::remote`), with what keeps them alive.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/core/storage.hpp"

namespace torchport {

/// How to map a file.
struct MapOptions {
  /// Fault every page in at map time (MAP_POPULATE): faster when all bytes
  /// will be read, slower to open when few will.
  bool populate = false;
  /// Map the file writable and private (copy-on-write, as torch.load's
  /// `mmap=True` maps it): torchport never writes to it, but code given a
  /// view of it (a torch tensor over a mapped tensor, which torch cannot
  /// mark read-only) may, and its writes then go to private copies of the
  /// pages instead of faulting. The file never changes. Such a mapping's
  /// pages are never dropped (`FileBacking::release` does nothing): that
  /// would drop those writes.
  bool copy_on_write = false;
  /// Read the file with `pread` instead of mapping it: nothing is mapped,
  /// a reader reads the ranges it parses, and a tensor's bytes are read when
  /// used (a copy reads them straight into its destination). Tensors then
  /// never view the file (`Residence::mapped` makes owned copies).
  bool pread = false;
};

/// The random-access bytes behind a `Source` that are not one block of
/// memory: a file read with `pread`, a remote object. Readers ask a
/// `Source` for ranges (`fetch`, `read`, `read_many`, `storage`);
/// implementations only read. Thread-safe.
class ByteSource : public RangeReader {
 public:
  /// Length in bytes.
  virtual std::uint64_t size() const noexcept = 0;
  /// What the source is, for messages: "file (pread)", "https", "s3".
  virtual std::string_view kind() const noexcept = 0;
};

/// Read-only bytes with a name for messages and an owner that keeps them
/// alive. Copying a `Source` shares the bytes.
///
/// A source is *contiguous* (a mapped file, memory: `bytes()` is all of
/// it, and ranges are views, never copies) or *ranged* (a file read with
/// `pread`, a remote object: ranges are read into owned memory when asked
/// for, and `bytes()` is refused). Readers ask for the ranges they parse
/// (`fetch`, `head`, `read`, `read_many`) and hand out tensor storages
/// (`storage`): views of a contiguous source, reads on first use of a
/// ranged one.
///
/// Lifetime: the bytes live as long as any copy of the `Source`, any slice of
/// it, or any `Storage` made by `storage()`. A mapped file must not be
/// truncated by another process while mapped (reading past its new end would
/// fault); torchport never writes to files it maps.
class Source {
 public:
  Source() = default;
  /// Maps `path` read-only (or, with `MapOptions::pread`, opens it for
  /// `pread`). \throws Error(io) naming the path and the OS error.
  static Source map_file(const std::filesystem::path& path, MapOptions options = {});
  /// Reads `bytes` by ranges (a remote object, say), named `name`.
  static Source from(std::shared_ptr<const ByteSource> bytes, std::string name);
  /// Takes ownership of `bytes`.
  static Source from_buffer(std::vector<std::byte> bytes, std::string name);
  /// Views the bytes of `storage` (materialising it), keeping it alive.
  static Source from_storage(std::shared_ptr<Storage> storage, std::string name);
  /// Views bytes the caller keeps alive for as long as any tensor read from
  /// them (a `static const` array, say).
  static Source borrow(std::span<const std::byte> bytes, std::string name);

  /// True when `bytes()` holds all of the source (a mapped file, memory).
  bool contiguous() const noexcept { return ranged_ == nullptr; }
  /// The bytes, valid while `owner()` lives.
  /// \throws Error(unsupported) for a ranged source: ask for ranges instead.
  std::span<const std::byte> bytes() const {
    if (ranged_) whole_bytes_refused();
    return bytes_;
  }
  std::uint64_t size() const noexcept { return size_; }  ///< length in bytes
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

  /// The byte source of a ranged source (null for a contiguous one), and
  /// where this source starts in it.
  const std::shared_ptr<const ByteSource>& ranged() const noexcept { return ranged_; }
  std::uint64_t ranged_offset() const noexcept { return base_; }  ///< see ranged()

  /// A sub-range sharing the owner; nothing is read.
  /// \throws Error(truncated) when out of range.
  Source slice(std::uint64_t offset, std::uint64_t size, std::string name) const;
  /// The range `[offset, offset + size)` as a contiguous source: a view of
  /// a contiguous source, else the range read into owned memory now.
  /// \throws Error(truncated) when out of range, the reader's error.
  Source fetch(std::uint64_t offset, std::uint64_t size) const;
  /// `fetch` of the first `min(n, size())` bytes.
  Source head(std::uint64_t n) const { return fetch(0, n < size_ ? n : size_); }
  /// All of the source as a contiguous source, for a reader that parses a
  /// whole file (a tar, a gzip stream, our record files): itself when
  /// contiguous, else read whole when it holds at most `max_bytes`.
  /// \throws Error(limit_exceeded) naming `why` and `limit_name` past that.
  Source whole(std::uint64_t max_bytes, std::string_view limit_name, std::string_view why) const;
  /// Copies `dst.size()` bytes from `offset` into `dst`.
  /// \throws Error(truncated) when out of range, the reader's error.
  void read(std::uint64_t offset, std::span<std::byte> dst) const;
  /// `read` of several ranges at once (a remote source coalesces and fetches
  /// them in parallel).
  void read_many(std::span<const RangeRead> reads) const;
  /// A read-only `Storage` over `[offset, offset + size)`: zero copy for a
  /// contiguous source, read when used for a ranged one.
  /// \throws Error(truncated) when out of range.
  std::shared_ptr<Storage> storage(std::uint64_t offset, std::uint64_t size) const;

 private:
  [[noreturn]] void whole_bytes_refused() const;
  void check(std::uint64_t offset, std::uint64_t size) const;

  std::span<const std::byte> bytes_;
  std::shared_ptr<const ByteSource> ranged_;  ///< set for a ranged source
  std::uint64_t base_ = 0;                    ///< of a ranged source, in ranged_
  std::uint64_t size_ = 0;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const FileBacking> file_;  ///< set for a mapped file
  std::string name_;
  std::filesystem::path path_;
};

/// True when `location` is a URL a `RemoteOpener` reads: it starts with
/// `http://`, `https://` or `s3://` (the scheme in any case).
bool is_url(std::string_view location) noexcept;

/// Opens remote objects by URL, for `open()` and `scan()`
/// (`OpenOptions::remote`). The read component knows only this interface;
/// `torchport::remote::opener()` (the `torchport::remote` component, which
/// links libcurl) implements it.
class RemoteOpener {
 public:
  virtual ~RemoteOpener() = default;
  /// Opens the object at `url` as a ranged source (its size known, its
  /// bytes read when asked for). \throws Error(io) when it cannot be read.
  virtual Source open(const std::string& url, const Limits& limits) const = 0;
  /// True when the object exists; false when the server says it does not
  /// (404). \throws Error(io) for any other failure.
  virtual bool exists(const std::string& url, const Limits& limits) const = 0;
};

}  // namespace torchport
