#pragma once
/// \file
/// `TensorCatalog`: what every reader produces and every consumer reads.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/limits.hpp"
#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/formats/prune.hpp"

namespace torchport {

namespace detail {
struct CatalogAccess;      // the typed load's (src/record/loader.cpp)
struct MaterializeAccess;  // materialize()'s (src/formats/catalog/materialize.cpp)
}  // namespace detail

/// The name a tensor without a key path is listed under: the whole object
/// of a file that holds one bare tensor (`torch.save(tensor, f)`), or the
/// tensor a `select` key names itself. Formats that store tensors by name
/// (safetensors, our records, a state dict) then have one to write.
inline constexpr std::string_view kRootTensorName = "tensor";

/// A tensor and its dotted key path ("layer1.0.conv1.weight").
struct NamedTensor {
  std::string name;  ///< the dotted key path
  Tensor tensor;     ///< the tensor (a lazy view when read from a file)
};

/// The contents of a checkpoint, whatever its format: an ordered list of
/// named tensors (file order), the whole object as an inert `Value` tree
/// (configs, epochs, strings, with the same tensors at their places), and
/// string metadata (safetensors' `__metadata__`, ours).
///
/// Tensors are lazy views: opening reads directories and pickles only, and
/// a tensor's bytes are mapped or read when first used. A contiguous tensor
/// whose record is aligned is a zero-copy view of the mapped file.
///
/// Lifetime: the tensors keep their storages (and the mapped file) alive;
/// the catalogue can be dropped while tensors taken from it are in use.
/// A catalogue is immutable and safe to read from many threads.
class TensorCatalog {
 public:
  TensorCatalog() = default;
  /// Lists the tensors of `root` under dotted names (see docs/format.md:
  /// dict keys joined with '.', list items by index, a pickled nn.Module by
  /// its state_dict names; a root that is itself a tensor is named
  /// `kRootTensorName`). `format`: what the tensors were read from
  /// (`Format::value` for a catalogue made in memory). A state dict (string
  /// keys, tensor values) that no one else holds is taken apart as it is
  /// listed; `root()` then makes an equal dict again, if asked. \throws
  /// Error(corrupt) on duplicate names, Error(limit_exceeded) past
  /// `max_tensors` or `max_name_bytes`.
  static TensorCatalog from_value(Format format, Value root, const Limits& limits = {},
                                  std::map<std::string, std::string> metadata = {});
  /// A catalogue of already named tensors (root becomes a dict of them).
  static TensorCatalog from_tensors(Format format, std::vector<NamedTensor> tensors,
                                    std::map<std::string, std::string> metadata = {},
                                    Value root = {});
  /// A catalogue of other tensors from the same file: this one's format
  /// and format name, `tensors` and `metadata` (and `root`, as `from_tensors`).
  TensorCatalog with_tensors(std::vector<NamedTensor> tensors,
                             std::map<std::string, std::string> metadata, Value root = {}) const;

  /// The format the tensors were read from.
  Format format() const noexcept { return format_; }
  /// Its name as `inspect` and reports print it: `torchport::format_name(format())`
  /// ("pytorch-zip", "safetensors", ...), or a record's own layout
  /// ("torchport-mpk.gz"), which `set_format_name` gives.
  std::string_view format_name() const noexcept;
  /// Names the format more precisely than its `Format` does (a record's
  /// layout). \throws Error(invalid_argument) unless `parse_format(name)`
  /// is `format()`.
  void set_format_name(std::string name);
  /// The named tensors, in file order.
  const std::vector<NamedTensor>& tensors() const noexcept { return tensors_; }
  std::size_t size() const noexcept { return tensors_.size(); }  ///< number of tensors
  bool empty() const noexcept { return tensors_.empty(); }       ///< true when there are no tensors
  /// The tensor named `name`, or nullptr.
  const Tensor* find(std::string_view name) const;
  /// The whole object the file holds, tensors included.
  const Value& root() const;
  /// True when `root()` is only the tensors by name (a catalogue made of
  /// named tensors, or of a state dict, whose root is made when first asked
  /// for): it holds no other value.
  bool root_is_tensors() const noexcept { return lazy_root_ != nullptr; }
  /// The non-tensor values (`prune_tensors(root())`).
  Value values() const;
  /// String metadata (safetensors' `__metadata__`, ours); empty for formats without it.
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  /// Sets one metadata entry (a reader notes where the catalogue came from).
  void set_metadata(std::string key, std::string value) {
    metadata_[std::move(key)] = std::move(value);
  }
  /// Sum of the tensors' `nbytes()` (a storage shared by two tensors counts twice).
  std::uint64_t total_bytes() const noexcept;
  /// Bytes of distinct storage the tensors use (shared storages once).
  std::uint64_t storage_bytes() const;

  /// The tensors under `key` (names equal to it or starting with `key.`),
  /// renamed without the prefix (the tensor named `key` itself becomes
  /// `kRootTensorName`); `root()` becomes that sub-tree. This is
  /// how `{"state_dict": {...}, "epoch": 3}` yields its state dict.
  /// \throws Error(missing_key) listing the top-level keys there are.
  TensorCatalog select(std::string_view key) const;
  /// The tensors, moved out; the catalogue is left empty (tree, index and
  /// metadata released).
  std::vector<NamedTensor> take_tensors() &&;
  /// The distinct first segments of the tensor names, in order.
  std::vector<std::string> top_level_keys() const;

 private:
  friend struct detail::CatalogAccess;
  friend struct detail::MaterializeAccess;
  void index(const char* duplicate_message);

  Format format_ = Format::value;
  std::string format_name_;  ///< empty: `torchport::format_name(format_)`
  std::vector<NamedTensor> tensors_;
  std::vector<std::uint32_t> slots_;  ///< hash of names: tensor index + 1, 0 when empty
  Value root_;
  // The dict of the tensors by name, made when root() is first asked for a
  // catalogue made of named tensors or of a state dict (most never are: a
  // materialized or converted catalogue, or a state dict's, would otherwise
  // pay a tree node per tensor).
  struct LazyRoot {
    std::once_flag once;
    Value value;
    bool ordered = false;  ///< an OrderedDict (a state dict taken apart by from_value)
  };
  std::shared_ptr<LazyRoot> lazy_root_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace torchport
