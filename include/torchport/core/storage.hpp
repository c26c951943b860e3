#pragma once
/// \file
/// A block of bytes that tensors view: owned, borrowed from a mapping, or
/// produced on first use.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>

namespace torchport {

/// A private read-only file mapping that borrowed storages point into. It
/// lets a copy read the file (one pread) rather than fault the mapping in
/// page by page, and lets a storage drop pages it no longer needs.
class FileBacking {
 public:
  virtual ~FileBacking() = default;
  /// Copies `dst.size()` bytes of the file, starting at address `at` inside
  /// the mapping, into `dst`. False when it could not (then copy from memory).
  virtual bool read(const std::byte* at, std::span<std::byte> dst) const noexcept = 0;
};

/// The bytes behind one or more tensors (torch's storage).
///
/// Ownership: a `Storage` is shared by `std::shared_ptr`; every tensor viewing
/// it holds one. A borrowed storage (a region of a mapped file, a slice of an
/// arena) also holds the `owner` that keeps those bytes alive, so a tensor
/// stays valid after the catalogue or the file handle that made it is gone.
///
/// A deferred storage knows its size but makes its bytes on first access
/// (inflating a deflated zip entry, swapping a big-endian record, copying an
/// unaligned record); `bytes()` runs the loader once, thread-safe, and keeps
/// the result. Errors of the loader propagate and the next call retries.
class Storage {
 public:
  using Loader = std::function<std::shared_ptr<Storage>()>;

  /// Owned, writable, uninitialised bytes aligned to 64.
  /// \throws Error(limit_exceeded) when the allocation fails.
  static std::shared_ptr<Storage> allocate(std::uint64_t nbytes);
  /// Read-only bytes that `owner` keeps alive (e.g. a mapped file).
  /// `file`, when given, is the file mapping the bytes lie in: copies then
  /// read the file, and `release_pages()` may drop resident pages.
  static std::shared_ptr<Storage> borrow(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                         std::shared_ptr<const FileBacking> file = nullptr);
  /// Writable bytes that `owner` keeps alive (e.g. a slice of an arena).
  static std::shared_ptr<Storage> borrow_mutable(std::span<std::byte> bytes,
                                                 std::shared_ptr<void> owner);
  /// Bytes made by `loader` on first access. `loader` must return a storage
  /// of exactly `nbytes` bytes.
  static std::shared_ptr<Storage> deferred(std::uint64_t nbytes, Loader loader);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// Size in bytes, known without materialising.
  std::uint64_t nbytes() const noexcept { return nbytes_; }
  /// The bytes; materialises a deferred storage.
  std::span<const std::byte> bytes() const;
  /// The bytes, for writing. \throws Error(invalid_argument) when read-only.
  std::span<std::byte> mutable_bytes();
  /// True when the bytes are writable (allocated or an arena slice).
  bool writable() const noexcept { return writable_; }
  /// True when the bytes live in someone else's memory (a mapped file).
  bool borrowed() const noexcept { return borrowed_; }
  /// True when the bytes are a private read-only mapping of a file.
  bool file_backed() const noexcept { return file_ != nullptr; }
  /// Copies `dst.size()` bytes starting at `offset` into `dst`: from the file
  /// when file-backed (no page faults on the mapping), else from memory;
  /// materialises a deferred storage. \throws Error(invalid_argument) when
  /// the range is outside the storage.
  void read_into(std::uint64_t offset, std::span<std::byte> dst) const;
  /// True for a deferred storage whose loader has not run yet.
  bool pending() const noexcept;
  /// Drops this process's resident pages of `[offset, offset + n)` when the
  /// storage is file-backed (memory use falls; the page cache keeps the data
  /// and a later access reads it again). Does nothing for other storages.
  void release_pages(std::uint64_t offset, std::uint64_t n) const noexcept;

  struct Private;  // construction token
  explicit Storage(const Private&) {}

 private:
  std::uint64_t nbytes_ = 0;
  std::byte* data_ = nullptr;
  std::shared_ptr<const void> owner_;
  bool writable_ = false;
  bool borrowed_ = false;
  std::shared_ptr<const FileBacking> file_;
  // Deferred storages only.
  Loader loader_;
  mutable std::once_flag once_;
  mutable std::shared_ptr<Storage> made_;
  mutable std::atomic<bool> done_{false};
};

}  // namespace torchport
