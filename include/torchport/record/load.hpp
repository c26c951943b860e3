#pragma once
/// \file
/// Typed loading: a checkpoint into a module the user declared.
///
/// \code
/// Net net = make_net(config);
/// auto report = torchport::load(net, "model.pt",
///     torchport::LoadArgs{}.top_level_key("state_dict").remap(R"(^module\.(.*))", "$1"));
/// std::fputs(report.summary().c_str(), stdout);
/// \endcode
///
/// The flow: the file's tensors (under the top-level key) -> include/exclude
/// filters (on the file's names) -> remap rules -> unflatten into a tree
/// (numeric segments become lists, gaps compacted) -> for each field of the
/// module: adapters of its kind, shape check, dtype conversion -> the report.
/// Selection, filters and remapping mean what they mean for `torchport convert`.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "torchport/formats/catalog.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/detail/loader.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/precision.hpp"
#include "torchport/record/remap.hpp"
#include "torchport/record/report.hpp"
#include "torchport/record/shard_plan.hpp"

namespace torchport {

/// Whose layout a file's records are in.
enum class Layout {
  Auto,     ///< PyTorch for PyTorch and safetensors files, ours for our record files
  PyTorch,  ///< apply `PyTorchAdapter` first
  Native,   ///< no layout adapter
};

/// How to load a file into a module. Setters return `*this` for chaining.
class LoadArgs {
 public:
  /// Load only what lies under `key` ("state_dict", "model.ema").
  LoadArgs& top_level_key(std::string key) {
    top_level_key_ = std::move(key);
    return *this;
  }
  /// Appends a rename rule (PCRE2, `$1` / `${name}`); rules apply in order,
  /// each to the output of the previous. \throws Error(invalid_argument).
  LoadArgs& remap(std::string_view pattern, std::string_view replacement) {
    remap_.add(pattern, replacement);
    return *this;
  }
  /// Keeps only keys (the file's names, before remapping) matching one of the includes...
  LoadArgs& include(std::string_view re) {
    filter_.include(re);
    return *this;
  }
  /// ...and none of the excludes.
  LoadArgs& exclude(std::string_view re) {
    filter_.exclude(re);
    return *this;
  }
  /// Fields the file lacks keep their initial values and are only reported
  /// (default: they are an Error(missing_key)).
  LoadArgs& allow_partial(bool on = true) {
    allow_partial_ = on;
    return *this;
  }
  /// Keys no field uses, and the warnings (`LoadReport::Warning`: an
  /// optional field left empty while unused keys end like it), are an
  /// Error(unused_key) (default: only reported).
  LoadArgs& strict(bool on = true) {
    strict_ = on;
    return *this;
  }
  /// Convert every tensor by this precision (default: to the dtype of the
  /// field's initial tensor, or Full when it has none).
  LoadArgs& precision(Precision p) {
    precision_ = p;
    return *this;
  }
  /// Copy tensors into owned memory (default: tensors whose dtype and
  /// layout already match stay zero-copy views of the mapped file).
  LoadArgs& residence(Residence r) {
    residence_ = r;
    return *this;
  }
  /// Appends an adapter, applied after the layout adapter.
  LoadArgs& adapter(std::shared_ptr<const Adapter> a) {
    adapters_.push_back(std::move(a));
    return *this;
  }
  /// Overrides which layout the file is in.
  LoadArgs& layout(Layout l) {
    layout_ = l;
    return *this;
  }
  /// Fills `LoadReport::keys`: original key -> remapped key, dtype, shape.
  LoadArgs& debug(bool on = true) {
    debug_ = on;
    return *this;
  }
  /// Options for opening the file (limits, format).
  LoadArgs& open_options(OpenOptions o) {
    open_ = std::move(o);
    return *this;
  }
  /// Loads rank `rank`'s part of a model split over `world` ranks: each
  /// tensor a rule of `plan` splits (rules see the file's names) arrives as
  /// this rank's slice, reading only its bytes (see `read_slice`); the
  /// others whole. The module's fields must have the rank's shapes.
  /// `LoadReport::shard` names what the rank read.
  /// \throws Error(invalid_argument) unless 0 <= rank < world.
  LoadArgs& shard(int rank, int world, ShardPlan plan);
  /// Quantized tensors (qint8, quint8, qint32) fill tensor fields with their
  /// `Tensor::dequantize()` (F32, then the field's dtype). Without it a
  /// quantized tensor is an Error(dtype_mismatch): its integers are not the
  /// values the field expects.
  LoadArgs& dequantize(bool on = true) {
    dequantize_ = on;
    return *this;
  }

  /// \name Getters
  /// What the setters above set.
  ///@{

  /// The key loaded from; empty for the whole file.
  const std::string& top_level_key() const noexcept { return top_level_key_; }
  const KeyRemap& remap() const noexcept { return remap_; }       ///< the rename rules, in order
  const KeyFilter& filter() const noexcept { return filter_; }    ///< the includes and excludes
  bool allow_partial() const noexcept { return allow_partial_; }  ///< missing fields only reported
  bool strict() const noexcept { return strict_; }                ///< unused keys, warnings: errors
  /// The precision to convert to; empty to follow each field's initial dtype.
  const std::optional<Precision>& precision() const noexcept { return precision_; }
  Residence residence() const noexcept { return residence_; }          ///< where loaded bytes live
  const AdapterChain& adapters() const noexcept { return adapters_; }  ///< added adapters, in order
  Layout layout() const noexcept { return layout_; }                   ///< the file's layout
  bool debug() const noexcept { return debug_; }  ///< `LoadReport::keys` is filled
  const OpenOptions& open_options() const noexcept { return open_; }  ///< for opening the file
  /// The sharding plan; null when the load is not sharded.
  const std::shared_ptr<const ShardPlan>& shard_plan() const noexcept { return shard_plan_; }
  int shard_rank() const noexcept { return shard_rank_; }    ///< this rank (0 when not sharded)
  int shard_world() const noexcept { return shard_world_; }  ///< the number of ranks (1 unsharded)
  bool dequantize() const noexcept { return dequantize_; }   ///< quantized tensors are dequantized

  ///@}

 private:
  std::string top_level_key_;
  KeyRemap remap_;
  KeyFilter filter_;
  bool allow_partial_ = false;
  bool strict_ = false;
  std::optional<Precision> precision_;
  Residence residence_ = Residence::mapped;
  AdapterChain adapters_;
  Layout layout_ = Layout::Auto;
  bool debug_ = false;
  OpenOptions open_;
  std::shared_ptr<const ShardPlan> shard_plan_;
  int shard_rank_ = 0;
  int shard_world_ = 1;
  bool dequantize_ = false;
};

inline LoadArgs& LoadArgs::shard(int rank, int world, ShardPlan plan) {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + " of " +
                                                 std::to_string(world) +
                                                 ": need 0 <= rank < world");
  shard_rank_ = rank;
  shard_world_ = world;
  shard_plan_ = std::make_shared<const ShardPlan>(std::move(plan));
  return *this;
}

namespace detail {

/// A prepared load: the loader walking the file's tree.
struct PreparedLoad {
  LoadReport report;
  std::unique_ptr<Loader> loader;
  std::map<std::string, std::string> file_metadata;  ///< the catalogue's
  /// Sharded loads: the provenance index of each `report.shard->reads` entry.
  std::vector<std::uint32_t> shard_keys;
};

/// Selects, remaps, filters and unflattens a catalogue's tensors (and the
/// scalars of its root) into a tree of keys, and sets up the loader. The
/// keys view the catalogue's names: it must outlive the load.
/// `source` names the file in the report and in errors (the catalogue's
/// format when empty). `own`: the same catalogue, when it is this load's
/// alone (a load from a path): its value tree (for a state dict, a dict
/// entry, a key string and a tensor node a tensor) is released once the
/// scalars are collected from it, before the key trie is built, so the
/// two never both count against the peak.
PreparedLoad prepare_load(const TensorCatalog& catalog, const LoadArgs& args,
                          const std::string& source = {}, TensorCatalog* own = nullptr);
/// Lists unused keys, suggests names for missing fields, and throws what the
/// args make an error (saying how a record file's metadata differs from
/// `module_type` and this library, when it does). Returns the report (moved
/// out of `p`).
LoadReport finish_load(PreparedLoad& p, const LoadArgs& args, const std::string& module_type = {});

template <Module M>
LoadReport load_catalog(M& module, const TensorCatalog& catalog, const LoadArgs& args,
                        const std::string& source, TensorCatalog* own = nullptr) try {
  PreparedLoad p = prepare_load(catalog, args, source, own);
  std::string path;
  load_into(*p.loader, p.loader->root(), path, module);
  return finish_load(p, args, type_name<M>());
} catch (const Error& e) {
  // A field's error names its key path; the file too.
  if (!e.where().empty() || source.empty()) throw;
  throw Error(e.code(), e.message(), e.key(), e.offset(), source);
} catch (...) {
  rethrow_as_error("load", source);  // no bare std:: exception leaves the library
}

}  // namespace detail

/// Loads `catalog` into `module`. Fields present in the file get its values:
/// an owned load writes them into a field's own bytes when no other handle
/// shares them (`Tensor::is_unshared()`, as torch's load_state_dict copies into
/// a parameter), and otherwise gives the field a new tensor, so that a copy
/// of it kept elsewhere keeps its values. The others keep their initial values.
/// \throws Error(shape_mismatch) when a tensor's shape differs from the
/// field's initial one, Error(missing_key) for missing fields unless
/// `allow_partial`, Error(unused_key) for unused keys when `strict`,
/// Error(dtype_mismatch) when a value does not convert; each names the key
/// path and, for missing ones, the field's type and the nearest unused keys.
template <Module M>
LoadReport load(M& module, const TensorCatalog& catalog, const LoadArgs& args = {}) {
  return detail::load_catalog(module, catalog, args, {});
}

/// Opens `path` (any format `open()` reads) and loads it into `module`;
/// the report and errors name `path`.
template <Module M>
LoadReport load(M& module, const std::filesystem::path& path, const LoadArgs& args = {}) {
  TensorCatalog catalog = open(path, args.open_options());
  return detail::load_catalog(module, catalog, args, path.string(), &catalog);
}

/// Loads a record from a value tree as it is (no remapping, no adapter):
/// what `load_config` uses.
template <class T>
LoadReport load_value(T& target, const Value& tree,
                      const LoadArgs& args = LoadArgs{}.layout(Layout::Native)) {
  const TensorCatalog catalog = TensorCatalog::from_value(Format::value, tree);
  detail::PreparedLoad p = detail::prepare_load(catalog, args);
  std::string path;
  detail::load_into(*p.loader, p.loader->root(), path, target);
  return detail::finish_load(p, args);
}

/// Reads a dict stored in a checkpoint (ints, floats, bools, strings, lists,
/// nested dicts) into a struct declared with `TORCHPORT_FIELDS`.
/// `key` is a dotted path to the dict ("config", "hparams.model"); empty for
/// the root. \throws Error(missing_key) when the key or a field is absent.
template <Module C>
C load_config(const std::filesystem::path& path, std::string_view key = {}) {
  const TensorCatalog cat = open(path);
  const Value* node = &cat.root();
  std::string_view rest = key;
  while (node != nullptr && !rest.empty()) {
    const auto dot = rest.find('.');
    node = node->find(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
  }
  if (node == nullptr)
    throw Error(ErrorCode::missing_key, "the file has no config under this key", std::string(key),
                std::nullopt, path.filename().string());
  C config{};
  load_value(config, *node);
  return config;
}

/// Burn's `PyTorchFileRecorder`: loads PyTorch files into modules at one
/// precision.
class PyTorchFileRecorder {
 public:
  /// A recorder converting every tensor by `precision`.
  explicit PyTorchFileRecorder(Precision precision = Precision::Full) : precision_(precision) {}
  /// Loads `path` into `module`, with `args` (its precision is this recorder's
  /// and its layout PyTorch's).
  template <Module M>
  LoadReport load(M& module, const std::filesystem::path& path, LoadArgs args = {}) const {
    args.precision(precision_).layout(Layout::PyTorch);
    return torchport::load(module, path, args);
  }
  /// A default-constructed `M` loaded from `path` (all fields from the file).
  template <Module M>
  M load(const std::filesystem::path& path, LoadArgs args = {}) const {
    M module{};
    load(module, path, std::move(args));
    return module;
  }

 private:
  Precision precision_;
};

}  // namespace torchport
