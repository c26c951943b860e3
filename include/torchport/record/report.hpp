#pragma once
/// \file
/// `LoadReport`: what a typed load did with every key.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/format.hpp"

namespace torchport {

/// What a load did: which fields were filled, which the file lacked, which
/// keys nobody used, and which shapes disagreed.
struct LoadReport {
  /// A field of the module the file has no key for.
  struct Missing {
    std::string path;                       ///< the field's key path ("head.weight")
    std::string type;                       ///< the field's type ("Tensor", "Linear", "int")
    std::vector<std::string> did_you_mean;  ///< nearest unused keys, best first
  };
  /// A tensor whose shape differs from the field's.
  struct Mismatch {
    std::string path;    ///< the field's key path
    std::string source;  ///< the key it came from in the file
    Shape expected;      ///< the field's initial shape
    Shape found;         ///< the file's tensor in the module's layout (after the adapters)
    Shape file_shape;    ///< the file's tensor as the file holds it
  };
  /// Something that loaded but looks wrong: an optional field left empty
  /// while unused keys of the file end like it (a forgotten remap rule).
  /// `LoadArgs::strict` makes warnings errors.
  struct Warning {
    std::string path;                  ///< the optional field's key path
    std::vector<std::string> similar;  ///< unused keys that end like it, best first
    /// A remap rule that would give `similar.front()` the field's name
    /// (`LoadArgs::remap(remap_pattern, remap_replacement)`).
    std::string remap_pattern;
    std::string remap_replacement;  ///< see `remap_pattern`
    std::size_t remap_covers = 0;   ///< unused keys the rule's pattern matches
    std::string message;            ///< one line saying all of the above
  };
  /// One line of the debug listing.
  struct KeyLine {
    std::string original;  ///< key in the file (after the top-level key)
    std::string remapped;  ///< after the remap rules ("" when filtered out)
    std::string dtype;     ///< "F32", ..., or "scalar int" etc. for a non-tensor leaf
    Shape shape;           ///< the tensor's shape (empty for a scalar)
  };

  /// What a rank of a sharded load (`LoadArgs::shard`) read of one tensor.
  struct ShardRead {
    std::string key;               ///< the tensor's name in the file
    std::string kind;              ///< "column", "row" or "replicate"
    std::string rule;              ///< the plan's rule; empty when none matched (read whole)
    std::int64_t dim = -1;         ///< the split dimension; -1 when read whole
    Shape file_shape;              ///< the whole tensor's shape in the file
    Shape shape;                   ///< the rank's part
    std::uint64_t bytes = 0;       ///< bytes of the file's tensor the rank reads
    std::uint64_t file_bytes = 0;  ///< bytes of the whole tensor in the file
  };
  /// A sharded load's reads.
  struct Shard {
    int rank = 0;                  ///< this rank
    int world = 1;                 ///< the number of ranks
    std::vector<ShardRead> reads;  ///< one per tensor a field took, in file order
    std::uint64_t bytes = 0;  ///< bytes of tensors the rank reads (its slices, the others whole)
    std::uint64_t file_bytes = 0;   ///< bytes of those tensors whole (what an unsharded load reads)
    std::uint64_t split_bytes = 0;  ///< of `file_bytes`, the tensors split
    std::uint64_t replicated_bytes = 0;  ///< of `file_bytes`, the tensors read whole
  };

  std::string source;                 ///< the file (the format, when loaded from a catalogue)
  Format format = Format::value;      ///< the file's format (`format_name` names it)
  std::vector<std::string> loaded;    ///< field paths filled from the file
  std::vector<Missing> missing;       ///< fields the file has no key for
  std::vector<std::string> unused;    ///< keys of the file no field consumed
  std::vector<Mismatch> mismatched;   ///< tensors whose shape differs from the field's
  std::vector<std::string> absent;    ///< optional fields the file has no key for (left empty)
  std::vector<Warning> warnings;      ///< loaded, but look wrong (see `Warning`)
  std::vector<KeyLine> keys;          ///< filled when LoadArgs::debug is set
  std::uint64_t tensors = 0;          ///< tensors loaded
  std::uint64_t elements = 0;         ///< their elements (parameters and buffers)
  std::uint64_t bytes = 0;            ///< their bytes, in the module's dtypes
  std::uint64_t zero_copy_bytes = 0;  ///< of which left in the mapped file
  std::optional<Shard> shard;         ///< set by a sharded load (`LoadArgs::shard`)

  /// True when nothing is missing, unused or mismatched, and no warning.
  bool clean() const noexcept {
    return missing.empty() && unused.empty() && mismatched.empty() && warnings.empty();
  }
  /// A human summary: counts, then every missing field (with suggestions),
  /// unused key, mismatch and warning; every line ends with a newline, so
  /// print it with `std::fputs(r.summary().c_str(), stdout)` (`puts` would
  /// add a blank line).
  std::string summary() const;
  /// The debug listing: original key -> remapped key, dtype, shape.
  std::string key_listing() const;
  /// A sharded load's reads, one line a tensor: key, kind, shapes, bytes;
  /// empty when the load was not sharded.
  std::string shard_listing() const;
};

}  // namespace torchport
