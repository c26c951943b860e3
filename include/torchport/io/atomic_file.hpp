#pragma once
/// \file
/// `AtomicFile`: a file that replaces its target whole or not at all.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace torchport {

/// Refuses an output path that exists and is not a regular file (a
/// symbolic link, FIFO, device, socket or directory): AtomicFile replaces
/// its target by rename, which would replace that node, not write into it.
/// \throws Error(invalid_argument) naming the path and what it is.
void check_output_path(const std::filesystem::path& target);

/// Writes a new version of `target` without ever exposing a partial one.
///
/// The bytes go to a temporary file created (mkstemp, mode 0600 until
/// commit) in the target's own directory, so the final `rename` stays on one
/// file system and is atomic. `commit()` flushes, fsyncs, gives the file the
/// target's permissions (those of the file it replaces, else 0666 minus the
/// umask), renames it over the target and fsyncs the directory. A file that
/// is destroyed, moved from or `discard()`ed without a commit unlinks its
/// temporary, so a failed save leaves the old target untouched and no
/// debris. A process killed mid-write (SIGKILL, a crash) leaves a
/// `.NAME.tmp-XXXXXX` file next to the target; nothing else. SIGINT,
/// SIGTERM and SIGHUP leave nothing once `remove_temporaries_on_signals()`
/// is installed (the torchport tool installs it).
///
/// Replacing a file that is mapped (as `torchport convert a.pt a.pt`
/// does) is safe: the mapping keeps the old inode alive.
///
/// Writes are buffered (1 MiB); large writes go straight to the file.
/// Not thread-safe: one writer at a time.
class AtomicFile {
 public:
  /// Creates the temporary file next to `target`.
  /// \throws Error(io) naming the directory and the OS error (missing
  /// directory, no permission, read-only file system);
  /// Error(invalid_argument) when `target` exists and is not a regular file
  /// (`check_output_path`).
  explicit AtomicFile(std::filesystem::path target);
  /// A stream to `fd` (standard output, a pipe), named `name` in messages:
  /// no temporary and no rename, so not atomic. Writes go to a duplicate
  /// of `fd` in order; `write_at` is an Error(unsupported) (a stream cannot
  /// seek back); `commit()` flushes; `discard()` leaves what was written.
  /// \throws Error(io) when `fd` cannot be duplicated.
  static AtomicFile stream(int fd, std::string name);
  /// Unlinks the temporary file unless committed. Never throws.
  ~AtomicFile();
  /// Takes over `other`'s temporary file; `other` is left empty (its
  /// destructor does nothing).
  AtomicFile(AtomicFile&& other) noexcept;
  /// Discards this file's temporary, then takes over `other`'s.
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;             ///< one owner per temporary
  AtomicFile& operator=(const AtomicFile&) = delete;  ///< one owner per temporary

  /// Appends `bytes`. \throws Error(io) (disk full, I/O error), after which
  /// the file can only be discarded.
  void write(std::span<const std::byte> bytes);
  /// Overwrites bytes already appended, at `offset` (used to patch a header
  /// once the data behind it is known). \throws Error(invalid_argument) when
  /// the range is not within `size()`, Error(io) when the OS refuses.
  void write_at(std::uint64_t offset, std::span<const std::byte> bytes);
  /// Bytes appended so far (the position of the next `write`).
  std::uint64_t size() const noexcept { return size_; }

  /// Makes the new content the target's. After a commit the object only
  /// reports; a second commit is an Error(invalid_argument).
  /// \throws Error(io) when flushing, syncing or renaming fails; the
  /// temporary is then unlinked and the target left as it was.
  void commit();
  /// Drops the temporary file now (what the destructor does). Never throws.
  void discard() noexcept;
  /// True once `commit()` succeeded.
  bool committed() const noexcept { return committed_; }
  /// True for a `stream()`.
  bool is_stream() const noexcept { return stream_; }

  /// Unlinks the temporary file of every AtomicFile of the process not yet
  /// committed or discarded. Async-signal-safe: for a signal handler of the
  /// program's own, on whichever thread the signal lands. A file being
  /// created on another thread at that moment is waited for (up to 2 s)
  /// and removed too; files created after the call returns are not (the
  /// handler `remove_temporaries_on_signals()` installs holds new ones back
  /// until the process has died). Up to 4096 files at once are tracked.
  static void remove_temporaries() noexcept;
  /// Installs handlers for SIGINT, SIGTERM and SIGHUP that call
  /// `remove_temporaries()`, then the handler installed before (or, when
  /// that was the default, die of the signal as they would have). Calls
  /// after the first do nothing.
  static void remove_temporaries_on_signals();

  /// The file that `commit()` replaces.
  const std::filesystem::path& target() const noexcept { return target_; }
  /// The temporary file being written (empty once committed or discarded).
  const std::filesystem::path& temp_path() const noexcept { return temp_; }

 private:
  void flush();
  void write_fd(const std::byte* data, std::size_t n);
  [[noreturn]] void fail(const char* what, int err);

  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::vector<std::byte> buffer_;
  bool committed_ = false;
  bool stream_ = false;
  std::size_t slot_ = SIZE_MAX;  // in the table remove_temporaries() reads

  AtomicFile() = default;  // for stream()
};

}  // namespace torchport
