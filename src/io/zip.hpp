#pragma once
/// \file
/// The zip directory of a checkpoint archive, parsed with every field
/// bounds-checked, with entries used in place from the mapped file.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/compression.hpp"
#include "torchport/core/limits.hpp"
#include "torchport/core/storage.hpp"
#include "torchport/io/source.hpp"

namespace torchport {

/// One member of a zip archive.
struct ZipEntry {
  std::string name;          ///< path inside the archive, as the central directory spells it
  std::uint16_t method = 0;  ///< 0 stored, 8 deflate; 12 bzip2 and 14 LZMA under ZipMethods::python
  std::uint64_t compressed_size = 0;  ///< bytes of data in the file
  std::uint64_t size = 0;             ///< uncompressed
  std::uint32_t crc32 = 0;          ///< CRC-32 of the uncompressed data, from the central directory
  std::uint64_t header_offset = 0;  ///< local header, in the file
  std::uint64_t data_offset = 0;    ///< first data byte, taken from the local header
  /// General purpose bit flags, from the central directory (bit 13, local
  /// header values masked, makes miniz refuse the whole archive).
  std::uint16_t flags = 0;
};

/// True when miniz (torch's zip reader) refuses an archive holding `e`
/// when it reads the central directory: general purpose bit 13 ("unsupported
/// encryption"); Python's zipfile ignores the bit.
bool zip_torch_refuses_archive(const ZipEntry& e) noexcept;
/// Whether two entry names are one to torch's reader: miniz's
/// mz_zip_filename_compare, bytes equal after ASCII lower-casing.
bool zip_same_name(std::string_view a, std::string_view b) noexcept;

/// A validated zip directory.
///
/// Opening reads the end records (zip64 included), the central directory and
/// every local header (to learn where each entry's data begins: torch pads
/// entries to 64 bytes with a local extra field the central directory does
/// not show; a mapped file's local headers are read with `pread`, so opening
/// faults in no page of tensor data). It rejects encrypted entries, methods
/// other than stored and deflate (and, for `ZipMethods::python`, Python
/// zipfile's bzip2 and LZMA, as np.load reads .npz files), multi-disk archives, local headers that
/// disagree with the central directory, and entries that overlap, reach into
/// the directory or run past the end of the file.
///
/// It reads the archive as miniz (torch's reader) does: the last end record
/// in the final 64 KiB, names matched ignoring ASCII case. Where another
/// reader could see other entries it refuses with Error(ambiguous): an
/// earlier end record naming another directory, bytes after the end
/// record's comment, between the directory and its end record, inside the
/// directory after the counted entries, before the first local header or
/// between entries (beyond a data descriptor), and two names equal up to
/// case. docs/format.md has the rules.
///
/// Lifetime: keeps a copy of the `Source`, so storages it hands out stay valid.
class ZipArchive {
 public:
  /// \throws Error(not_a_checkpoint) when `source` is no zip archive,
  ///         Error(ambiguous) where readers could disagree (see above),
  ///         Error(corrupt | truncated | unsupported | limit_exceeded) otherwise.
  static ZipArchive open(const Source& source, const Limits& limits,
                         ZipMethods methods = ZipMethods::torch);

  /// The entries, in central directory order.
  const std::vector<ZipEntry>& entries() const noexcept { return entries_; }
  /// The entry named `name` ignoring ASCII case (as miniz's
  /// `mz_zip_reader_locate_file` without flags), or nullptr.
  const ZipEntry* find(std::string_view name) const;
  const Source& source() const noexcept { return source_; }  ///< the archive's bytes

  /// The entry's bytes as a storage: a zero-copy view for stored entries, a
  /// deferred decode (capped at the declared size and `inflate_cap`,
  /// CRC-checked) for compressed ones.
  std::shared_ptr<Storage> storage(const ZipEntry& entry) const;
  /// The entry's bytes now, as a `Source` (decoded when compressed).
  Source read(const ZipEntry& entry) const;
  /// Recomputes the CRC-32 of an entry's data and compares it with the directory.
  /// \throws Error(corrupt) on a mismatch.
  void verify_crc(const ZipEntry& entry) const;
  /// Frees the directory (entries and name index) once a reader has found
  /// what it needs: `entries()` is then empty and `find` finds nothing, while
  /// `read`, `storage` and `verify_crc` of entries copied before still work.
  void release_directory() noexcept;

 private:
  void index_names();

  Source source_;
  Limits limits_;
  std::vector<ZipEntry> entries_;
  std::vector<std::uint32_t> slots_;  ///< hash of names: entry index + 1, 0 when empty
};

/// A local header met walking an archive from its front, as a lenient
/// zip reader (one that ignores the central directory) finds entries.
struct ZipLocalEntry {
  std::string name;          ///< as the local header spells it
  std::uint16_t flags = 0;   ///< general purpose bits (bit 0: encrypted)
  std::uint16_t method = 0;  ///< compression method
  std::uint64_t offset = 0;  ///< of its data, in the file
  /// Its data: the declared compressed size, or, when that size is 0 (a
  /// data descriptor follows) or runs past the bytes, up to the next local
  /// or central header signature (else the end of the bytes).
  std::span<const std::byte> data;
};
/// Every local header signature in `bytes`, front to back, stepping over
/// each entry's declared data; at most `max_entries`. Nothing is checked:
/// this is the view of the readers `ZipArchive` refuses to disagree with.
std::vector<ZipLocalEntry> zip_local_entries(std::span<const std::byte> bytes,
                                             std::uint64_t max_entries);

/// True when `bytes` starts like a zip archive (a local header or an empty
/// archive's end record).
bool looks_like_zip(std::span<const std::byte> bytes) noexcept;

}  // namespace torchport
