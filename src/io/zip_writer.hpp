#pragma once
/// \file
/// A streaming writer of uncompressed zip archives whose entry data starts
/// at an aligned offset, as torch.save lays them out.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "torchport/detail/hash.hpp"
#include "torchport/io/atomic_file.hpp"

namespace torchport {

/// How `ZipWriter` lays out an archive.
struct ZipWriterOptions {
  /// The first data byte of every entry lies at a multiple of this (a power
  /// of two, 1 to 4096). torch.save uses 64 so records can be mapped and
  /// used in place; the padding is a local-header extra field (id "FB",
  /// filled with 'Z') exactly as torch writes it.
  std::uint32_t alignment = 64;
  /// Write zip64 extra fields for every entry and the zip64 end records
  /// even when no size or offset needs them (they are written whenever one
  /// reaches 4 GiB or there are 65,535 entries or more). For testing readers.
  bool force_zip64 = false;
  /// Lay each entry out as torch's writer (miniz, `mz_zip_writer_add_mem_ex_v2`)
  /// does: a non-empty entry's local header has flag bit 3 with its CRC-32
  /// and sizes zero, and a data descriptor follows its data (signature,
  /// CRC-32, sizes: 16 bytes, or 24 with zip64 sizes); an empty entry has
  /// neither. The local header carries a zip64 extra field exactly when the
  /// size or the header's offset reaches 4 GiB (sizes when the size does,
  /// the offset when it does), before the padding field. torch 2.x's
  /// `torch.load` with `calculate_storage_offsets` computes where each
  /// storage record lies from this layout alone, never reading its header.
  bool torch_layout = false;
};

/// Writes a zip archive of *stored* (uncompressed) entries to an
/// `AtomicFile`, one entry at a time, without holding any entry's data.
///
/// Each entry's size is declared up front so the local header is final
/// except for its CRC-32, which is computed over the data as it streams and
/// patched in when the entry ends (no data descriptors; with
/// `torch_layout`, a data descriptor follows instead). Names are stored as
/// given (flag bit 11 marks non-ASCII names as UTF-8); times are 1980-01-01
/// so output is reproducible; permissions in the central directory are 0644.
///
/// Lifetime: holds a reference to `file`, which must outlive the writer.
/// `finish()` writes the central directory; the caller then commits the
/// file. Usage errors (a duplicate name, more data than declared, an entry
/// left open) are Error(invalid_argument); OS errors are Error(io).
class ZipWriter {
 public:
  /// \throws Error(invalid_argument) on a bad alignment.
  explicit ZipWriter(AtomicFile& file, ZipWriterOptions options = {});

  /// Starts an entry that will hold exactly `size` bytes.
  void begin_entry(std::string_view name, std::uint64_t size);
  /// Appends data to the open entry.
  void write(std::span<const std::byte> data);
  /// Ends the open entry. \throws Error(invalid_argument) when fewer bytes
  /// were written than declared.
  void end_entry();
  /// `begin_entry` + `write` + `end_entry` for data already in memory.
  void add_entry(std::string_view name, std::span<const std::byte> data);
  /// Writes the central directory and end records. No entry may be open.
  void finish();

  /// Entries written so far.
  std::size_t entry_count() const noexcept { return entries_.size(); }
  /// The CRC-32 of every entry's data so far, as if written back to back
  /// (torch's `combined_uncomp_crc32_`).
  std::uint32_t combined_crc32() const noexcept;
  /// File offset of the open (or last) entry's first data byte.
  std::uint64_t data_offset() const noexcept { return data_start_; }

 private:
  struct Entry {
    std::string name;
    std::uint64_t header_offset = 0;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
    bool utf8 = false;
    bool descriptor = false;        // a data descriptor follows the data (torch_layout)
    bool zip64_descriptor = false;  // ... with 8-byte sizes
  };

  void check_open(bool want_open, const char* op) const;

  AtomicFile& file_;
  ZipWriterOptions options_;
  std::vector<Entry> entries_;
  detail::StringSet names_;
  bool open_ = false;
  bool finished_ = false;
  std::uint64_t data_start_ = 0;
  std::uint64_t written_ = 0;
  std::uint32_t crc_ = 0;
};

}  // namespace torchport
