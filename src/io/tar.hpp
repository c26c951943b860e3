#pragma once
/// \file
/// A read-only tar directory, read the way CPython's `tarfile` module reads
/// it (torch.load tries `tarfile.open(fileobj=f, mode='r:')` on every file
/// that is not a zip): V7, ustar, GNU and pax headers, checksums computed
/// unsigned or signed, numeric fields in octal text or base-256, GNU long
/// names and long links, pax path and size overrides (global ones included),
/// the archive ending at the first zero, short or invalid header, and the
/// last member of a name winning whatever its type. docs/format.md lists
/// what is refused where another tar reader could read the bytes otherwise.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/io/source.hpp"

namespace torchport {

/// One member of a tar archive, as `tarfile.TarInfo` describes it.
struct TarMember {
  std::string name;  ///< path inside the archive (long names, ustar prefix and pax paths applied)
  std::string linkname;  ///< target of a hard or symbolic link
  char type =
      '0';  ///< the type flag ('0' file, '5' directory, '2' symlink, ...; a V7 "name/" is '5')
  std::uint64_t header_offset =
      0;  ///< first header of the member (its long-name or pax header, if any)
  std::uint64_t data_offset = 0;  ///< first data byte, in the file
  std::uint64_t size = 0;         ///< bytes of data (after pax overrides)
  /// True when tarfile reads the member's data as a file: the regular types
  /// ('0', '\0', '7') and every type tarfile does not know.
  bool is_file() const noexcept;
};

/// A tar archive's members, with their bytes in place.
class TarArchive {
 public:
  /// Reads every header as `tarfile` does (`TarFile.getmembers()`).
  /// \throws Error(not_a_checkpoint) when tarfile would not open the bytes as
  /// a tar (its `ReadError` on the first header); Error(truncated | corrupt)
  /// when it would raise `ReadError` later (torch then reads the file as a
  /// legacy pickle); Error(ambiguous) when bytes follow the end of the
  /// archive that other tar readers could read on; Error(unsupported) for
  /// sparse members; Error(limit_exceeded) past `Limits::max_entries`.
  static TarArchive open(const Source& source, const Limits& limits);
  /// Every member, in archive order (duplicates included).
  const std::vector<TarMember>& members() const noexcept { return members_; }
  /// The member `tarfile.getmember(name)` returns (the last of that name,
  /// whatever its type), or nullptr.
  const TarMember* resolve(std::string_view name) const;
  /// `resolve(name)` when it is a file whose bytes lie inside the archive,
  /// else nullptr.
  const TarMember* find(std::string_view name) const;
  /// The member `name` as torch's `legacy_load` extracts it: `resolve(name)`,
  /// which must be a file (not a link, directory or device) whose bytes lie
  /// inside the archive.
  /// \throws Error(corrupt) when absent, Error(unsupported) for links and
  /// other types, Error(truncated) when its data runs past the end.
  const TarMember& file(std::string_view name) const;

 private:
  std::vector<TarMember> members_;
  std::uint64_t size_ = 0;
  std::string where_;
};

/// How `tarfile.open(fileobj=f, mode='r:')` answers on `bytes`.
enum class TarOpen {
  refused,  ///< it raises ReadError: torch goes on to the legacy pickle reader
  opened,   ///< its first header (with any long-name or pax headers) is valid
  empty,    ///< the first block is all zeros: it opens an archive without members
};

/// What `tarfile.open` would do with `bytes`, from the first member's
/// headers alone (linear in their size; usually one 512-byte block).
TarOpen probe_tar(std::span<const std::byte> bytes) noexcept;
/// `probe_tar` on the first bytes of a file of `file_size` bytes (a remote
/// file's head): `need_more` is set when the answer depends on bytes past
/// `head` (a long-name or pax header longer than it), which the caller
/// then reads to ask again.
TarOpen probe_tar(std::span<const std::byte> head, std::uint64_t file_size,
                  bool& need_more) noexcept;

/// True when Python's tarfile opens `bytes` (`probe_tar` is not `refused`).
bool looks_like_tar(std::span<const std::byte> bytes) noexcept;

}  // namespace torchport
