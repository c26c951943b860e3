#pragma once
/// \file
/// A read-only POSIX tar directory (ustar, GNU long names, PAX headers).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/io/source.hpp"

namespace torchport {

/// One regular file in a tar archive.
struct TarMember {
  std::string name;  ///< path inside the archive (long names and PAX paths applied)
  std::uint64_t data_offset = 0;  ///< in the file
  std::uint64_t size = 0;  ///< bytes of data
};

/// The regular files of a tar archive, with their bytes in place.
/// Header checksums are verified; duplicate names, members running past the
/// end of the file, and unknown size encodings are refused.
class TarArchive {
 public:
  /// \throws Error(not_a_checkpoint | corrupt | truncated | limit_exceeded).
  static TarArchive open(const Source& source, const Limits& limits);
  /// The regular files, in archive order.
  const std::vector<TarMember>& members() const noexcept { return members_; }
  /// The member named exactly `name`, or nullptr.
  const TarMember* find(std::string_view name) const;

 private:
  std::vector<TarMember> members_;
};

/// True when `bytes` starts with a ustar header.
bool looks_like_tar(std::span<const std::byte> bytes) noexcept;

}  // namespace torchport
