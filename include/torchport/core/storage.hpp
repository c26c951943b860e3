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
  /// Copies the file's bytes from address `at` on into `pieces` in turn
  /// (piece i + 1 takes the bytes after piece i's): neighbouring records
  /// and the bytes between them in one system call. False when it could
  /// not (then copy from memory). The default reads piece by piece.
  virtual bool read_run(const std::byte* at,
                        std::span<const std::span<std::byte>> pieces) const noexcept;
  /// Drops this process's resident pages of every 2 MiB block of the file
  /// that `[begin, end)` touches (clamped to the mapping). The data stays in
  /// the page cache.
  virtual void release(const std::byte* begin, const std::byte* end) const noexcept = 0;
};

/// One read of a batch: `dst.size()` bytes from `offset`.
struct RangeRead {
  std::uint64_t offset = 0;  ///< the first byte's offset in the source
  std::span<std::byte> dst;  ///< where the bytes go; its size is the count
};

/// Random-access reads of bytes that are not in memory: a file read with
/// `pread`, a remote object (`torchport::remote`). Implementations are
/// thread-safe.
class RangeReader {
 public:
  virtual ~RangeReader() = default;
  /// Copies `dst.size()` bytes starting at `offset` into `dst`; all of them
  /// or an exception (never part of a range).
  /// \throws Error (io, truncated, corrupt, ...) naming the source.
  virtual void read(std::uint64_t offset, std::span<std::byte> dst) const = 0;
  /// Reads every request (neighbours coalesced, in parallel where the
  /// reader can); by default one `read` each, in order.
  virtual void read_many(std::span<const RangeRead> reads) const;
  /// True when `read_many` does better than reads cut into pieces and
  /// spread over threads (a remote source: fewer, larger requests, its own
  /// parallel connections); false for a local file.
  virtual bool batches() const noexcept { return false; }
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
/// A deferred *copy* (`deferred_copy`) also knows where its bytes lie, so
/// `read_into` copies them from there without making the aligned copy.
class Storage {
 public:
  /// Makes a deferred storage's bytes: returns a storage of the declared size,
  /// or throws (the next access then calls it again).
  using Loader = std::function<std::shared_ptr<Storage>()>;

  /// Owned, writable, uninitialised bytes aligned to 64.
  /// \throws Error(limit_exceeded) when the allocation fails.
  static std::shared_ptr<Storage> allocate(std::uint64_t nbytes);
  /// Read-only bytes that `owner` keeps alive (e.g. a mapped file).
  /// `file`, when given, is the file mapping the bytes lie in: copies then
  /// read the file, and `release_pages()` may drop resident pages.
  static std::shared_ptr<Storage> borrow(std::span<const std::byte> bytes,
                                         std::shared_ptr<const void> owner,
                                         std::shared_ptr<const FileBacking> file = nullptr);
  /// Writable bytes that `owner` keeps alive (e.g. a slice of an arena).
  static std::shared_ptr<Storage> borrow_mutable(std::span<std::byte> bytes,
                                                 std::shared_ptr<void> owner);
  /// Bytes made by `loader` on first access. `loader` must return a storage
  /// of exactly `nbytes` bytes.
  static std::shared_ptr<Storage> deferred(std::uint64_t nbytes, Loader loader);
  /// A storage holding a copy of `raw` (bytes that `owner` keeps alive, such
  /// as an unaligned record of a mapped file), made in aligned memory by the
  /// first `bytes()`. `read_into` copies straight from `raw` (with `pread`
  /// when `file`, the mapping `raw` lies in, is given) and never makes it,
  /// so a load that copies the storage somewhere reads its bytes once.
  static std::shared_ptr<Storage> deferred_copy(std::span<const std::byte> raw,
                                                std::shared_ptr<const void> owner,
                                                std::shared_ptr<const FileBacking> file = nullptr);
  /// `nbytes` bytes at `offset` of what `reader` reads (a file read with
  /// pread, a remote object), read when used: `read_into` and `read_many`
  /// read the ranges they are asked for straight into their destination;
  /// the first `bytes()` reads the whole storage into aligned memory and
  /// keeps it. The storage keeps `reader` alive.
  static std::shared_ptr<Storage> ranged(std::shared_ptr<const RangeReader> reader,
                                         std::uint64_t offset, std::uint64_t nbytes);

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
  bool file_backed() const noexcept { return file_ != nullptr && !deferred_; }
  /// Copies `dst.size()` bytes starting at `offset` into `dst`: from the file
  /// when file-backed (no page faults on the mapping), else from memory;
  /// materialises a deferred storage, except a deferred copy that has not
  /// been made (it reads its source). Thread-safe.
  /// \throws Error(invalid_argument) when the range is outside the storage.
  void read_into(std::uint64_t offset, std::span<std::byte> dst) const;
  /// `read_into` for several ranges at once (offsets in the storage): a
  /// ranged storage hands them to its reader together (a remote one
  /// coalesces neighbours and fetches in parallel). Thread-safe.
  /// \throws Error(invalid_argument) when a range is outside the storage.
  void read_many(std::span<const RangeRead> reads) const;
  /// The reader of a ranged storage whose bytes have not been made (null
  /// otherwise), and where the storage starts in what it reads: lets a
  /// caller batch the reads of many storages of one source.
  const RangeReader* range_reader() const noexcept;
  std::uint64_t range_offset() const noexcept;  ///< see range_reader()
  /// True for a deferred storage whose loader has not run yet.
  bool pending() const noexcept;
  /// True when `read_into` reads any range of the storage without making
  /// all of it first: every storage except a deferred one whose loader
  /// (inflating a deflated entry, swapping a big-endian record) has not run.
  bool addressable() const noexcept;
  /// Drops this process's resident pages of `[offset, offset + n)` when the
  /// storage is file-backed, or is a deferred copy of a file's bytes (memory
  /// use falls; the page cache keeps the data and a later access reads it
  /// again). Does nothing for other storages. The rest of each 2 MiB block
  /// of the file that the range touches goes too, neighbours' pages
  /// included: reading one byte maps the pages around it (a whole large
  /// folio of the page cache, or the kernel's fault-around window), and a
  /// neighbour's pages, once mapped, would stay mapped if only whole pages
  /// of the range were dropped. A dropped page still in use costs a minor
  /// fault on its next access, nothing more.
  void release_pages(std::uint64_t offset, std::uint64_t n) const noexcept;
  /// The file mapping the bytes lie in (a file-backed storage, or a deferred
  /// copy of a mapped file's bytes, made or not); null otherwise. With
  /// `file_data()`, lets a copy of many neighbouring storages read the file
  /// once, and a writer drop their pages together.
  const std::shared_ptr<const FileBacking>& file() const noexcept { return file_; }
  /// The address of byte 0 inside `file()`'s mapping (null without one).
  const std::byte* file_data() const noexcept { return file_ ? data_ : nullptr; }
  /// True when `read_into` reads `file()` (not memory): a file-backed
  /// storage, or a deferred copy of a file's bytes not made yet.
  bool reads_file() const noexcept;

  struct Private;  // construction token
  /// For `std::make_shared` inside the factories only: `Private` is not
  /// defined outside the library, so use `allocate`, `borrow` or `deferred`.
  explicit Storage(const Private&);
  ~Storage();

 private:
  struct Deferred;  // the loader and what it made

  std::uint64_t nbytes_ = 0;
  // The bytes; for a deferred copy, its source (not aligned, not ours).
  std::byte* data_ = nullptr;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const FileBacking> file_;
  bool writable_ = false;
  bool borrowed_ = false;
  // Deferred and ranged storages only (a ranged storage's reader lives in
  // it too): a file of many small tensors has a storage a tensor, and most
  // are neither.
  std::unique_ptr<Deferred> deferred_;
};

}  // namespace torchport
