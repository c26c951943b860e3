#pragma once
// The registry of readers behind open(): one row per format, in torch.load's
// order for the formats torch reads, then ours.

#include <span>
#include <string_view>

#include "formats/read/walk.hpp"
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
};

/// The bytes the sniffers look at: all of a contiguous source, the first
/// `kSniffBytes` of a ranged one (a remote file: one read).
constexpr std::uint64_t kSniffBytes = 64u << 10;
Source sniff_head(const Source& source);

/// Every reader, in dispatch order.
std::span<const Reader> readers() noexcept;
/// The reader of `format`.
const Reader& reader(Format format) noexcept;

}  // namespace torchport::open_detail
