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
  bool (*sniff)(const Source&) noexcept;
  /// Reads the format, telling the walker what it meets; nullptr for
  /// formats read from a path.
  TensorCatalog (*read)(const Source&, const OpenOptions&, formats::Walker&);
};

/// Every reader, in dispatch order.
std::span<const Reader> readers() noexcept;
/// The reader of `format`.
const Reader& reader(Format format) noexcept;

}  // namespace torchport::open_detail
