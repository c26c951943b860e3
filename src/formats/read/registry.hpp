#pragma once
// The registry of readers behind open(): one row per format, in torch.load's
// order for the formats torch reads, then ours.

#include <span>
#include <string_view>

#include "formats/read/walk.hpp"
#include "io/compression.hpp"
#include "io/zip.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"

namespace torchport::open_detail {

/// One format's reader.
struct Reader {
  Format format;          ///< the format
  std::string_view name;  ///< its name (`format_name`)
  /// True when the first bytes fit the format; nullptr for formats another
  /// row's reader decides (TorchScript: the zip reader; a plain pickle: the
  /// legacy reader) or that are read from a path (sharded checkpoints).
  bool (*sniff)(std::span<const std::byte> head, std::uint64_t size) noexcept;
  /// Reads the format, telling the walker what it meets; nullptr for
  /// formats read from a path.
  TensorCatalog (*read)(const Source&, const OpenOptions&, formats::Walker&);
  /// Tells a walker what a more lenient loader still reaches once the
  /// reader stopped (`formats::sweep`); nullptr when the reader tells
  /// every part as it meets it.
  void (*sweep)(const Source&, const OpenOptions&, formats::Walker&) = nullptr;
};

/// The bytes the sniffers look at: all of a contiguous source, the first
/// `kSniffBytes` of a ranged one (a remote file: one read).
constexpr std::uint64_t kSniffBytes = 64u << 10;
Source sniff_head(const Source& source);

/// Every reader, in dispatch order.
std::span<const Reader> readers() noexcept;
/// The reader of `format`.
const Reader& reader(Format format) noexcept;

// The decisions below are the registry's too: every reader and the
// scanner ask them rather than testing magic numbers themselves
// (scripts/check-dispatch.py fails on a recogniser called anywhere else).

/// What a zip archive holds, decided once for every reader that opens one,
/// in the order of the loaders that open it: numpy's .npz (np.load: every
/// member an .npy), a torch.export archive (its program at the top), else
/// torch.save's archive (or TorchScript's, which its reader tells).
enum class ZipKind { torch, npz, torch_export };
ZipKind zip_kind(const ZipArchive& zip);

/// True when torch.load reads `bytes` as an archive, a zip by its first
/// four bytes or a tar Python's tarfile opens, rather than as a pickle.
bool torch_archive(std::span<const std::byte> bytes) noexcept;

/// A whole-file compression around `bytes` that Python's loaders undo
/// before unpickling (`gzip.open`, `bz2.open`, `lzma.open`, joblib's
/// compressors, joblib's pre-0.10 "ZF" files): which, where its stream
/// starts, and the name a report gives the file ("" for the compression's).
struct Wrapping {
  Compression compression;
  std::size_t at = 0;
  std::string_view label;
  std::string_view name;  ///< the compression's name ("gzip", "zlib", ...)
  /// Told by a magic short enough to start other files too (zlib's two
  /// bytes, .lzma's): a guess that holds only if the stream decodes.
  bool weak = false;
};
std::optional<Wrapping> wrapping(std::span<const std::byte> bytes) noexcept;

/// What `w` wraps in `source`, decoded as far as it goes, at most `cap`
/// bytes (`cap_text` names that limit in the error): the file inside, as a
/// scanner judges it. Named "<source>!<compression>".
formats::PartBytes unwrap(const Source& source, const Wrapping& w, std::uint64_t cap,
                          const std::string& cap_text);

}  // namespace torchport::open_detail

namespace torchport::formats {

/// Reads a torch.save blob held inside another file (a .pt2 archive's
/// weights) as torch.load reads an `io.BytesIO` of it: a zip by its first
/// four bytes, else a legacy pickle. No tar (torch tries tarfile only on a
/// file with a fileno()), and none of the formats torch.load does not read.
/// \throws Error(corrupt) for a zip the registry tells as numpy's .npz.
TensorCatalog read_as_torch_load(const Source& source, const OpenOptions& options, Walker& walker);
/// The reader `read_as_torch_load` gives `source`: pytorch_zip or
/// pytorch_legacy.
Format torch_load_format(const Source& source);

}  // namespace torchport::formats
