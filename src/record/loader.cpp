// Typed loading: the tree a module is loaded from (selection, remapping,
// filtering; the trie of its keys is provenance.hpp), the per-field work
// (adapters, shape checks, conversions), and the report (its suggestions
// are suggest.cpp).

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>

#include "torchport/formats/format.hpp"
#include "torchport/record/load.hpp"

#include "record/provenance.hpp"
#include "record/suggest.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/page_release.hpp"
#include "torchport/formats/slice.hpp"
#include "torchport/version.hpp"

namespace torchport::detail {

namespace {

// Whether `v` is a scalar or may hold one (what collect_scalars keeps or
// walks into): the rest (tensors above all, a state_dict's every value)
// is passed by without making its path, two strings a tensor.
bool may_hold_scalars(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Dict:
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Bool:
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::Str:
      return true;
    default:
      return false;
  }
}

// Scalars of the root reachable through dicts and lists (configs and
// counters), with the catalogue's naming rules.
void collect_scalars(const Value& v, std::string& prefix,
                     std::vector<std::pair<std::string, Value>>& out) {
  switch (v.kind()) {
    case Value::Kind::Dict:
      for (const auto& [k, x] : v.pairs())
        if (may_hold_scalars(x)) {
          const PathSegment segment(prefix, key_text(k));
          collect_scalars(x, prefix, out);
        }
      break;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      std::size_t i = 0;
      for (const auto& x : v.items()) {
        if (may_hold_scalars(x)) {
          const PathSegment segment(prefix, std::to_string(i));
          collect_scalars(x, prefix, out);
        }
        ++i;
      }
      break;
    }
    case Value::Kind::Bool:
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::Str:
      if (!prefix.empty()) out.emplace_back(prefix, v);
      break;
    default:
      break;
  }
}

}  // namespace

// The mapped pages a load is done with, dropped a few ranges at a time
// (not one madvise per tensor), and the memory small tensors are copied
// into: 64-byte aligned slices of shared chunks, not an aligned allocation
// each (whose leftovers the heap could not reuse for the next: a file of
// many small tensors grew the heap by about 100 bytes a tensor).
struct Loader::Pending {
  static constexpr std::uint64_t kChunk = std::uint64_t{256} << 10;
  static constexpr std::uint64_t kSmall = std::uint64_t{16} << 10;  // from a chunk below this
  // A small tensor of a mapped file is copied from the mapping (its pages
  // go in batches, `released`): a pread each would be a system call a
  // tensor. From 1 MiB on, one pread reads it without faulting the mapping in.
  static constexpr std::uint64_t kFromMapping = std::uint64_t{1} << 20;

  PageReleaser released;
  std::shared_ptr<Storage> chunk;
  std::uint64_t used = 0;

  // Room for `n` bytes of a tensor's copy (writable, 64-byte aligned).
  std::shared_ptr<Storage> room(std::uint64_t n) {
    if (n >= kSmall) return Storage::allocate(n);
    const std::uint64_t take = (n + 63) / 64 * 64;
    if (!chunk || used + take > chunk->nbytes()) {
      chunk = Storage::allocate(kChunk);
      used = 0;
    }
    auto s = Storage::borrow_mutable(
        chunk->mutable_bytes().subspan(static_cast<std::size_t>(used), static_cast<std::size_t>(n)),
        chunk);
    used += take;
    return s;
  }
};

Loader::Loader(LoadSettings settings, LoadReport& report, std::shared_ptr<Provenance> provenance)
    : settings_(std::move(settings)),
      report_(&report),
      provenance_(std::move(provenance)),
      consumed_((provenance_->size() + 63) / 64, 0),
      pending_(std::make_unique<Pending>()) {}

Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;

Loader::~Loader() = default;  // the releaser drops what is left

Loader Loader::trial(LoadReport& scratch) const {
  Loader t(settings_, scratch, provenance_);
  t.trial_ = true;
  return t;
}

LoadNode Loader::root() const {
  return LoadNode::key(0);
}

LoadNode Loader::child(LoadNode node, std::string_view name) const {
  if (const Value* v = node.value()) {
    if (v->is(Value::Kind::Dict)) return LoadNode(v->find(name));
    // A level whose keys were all numbers became a list; a module that names
    // its fields "0", "1" (an nn.Sequential as a struct) reads it by index.
    std::size_t i;
    if ((v->is(Value::Kind::List) || v->is(Value::Kind::Tuple)) && parse_index(name, i))
      return LoadNode(i < v->size() ? &v->items()[i] : nullptr);
    return {};
  }
  if (!node) return {};
  const Trie& trie = provenance_->trie();
  const std::uint32_t n = node.trie();
  if (trie.leaf(n) != Trie::kNone) return {};
  if (trie.is_list(n)) {
    std::size_t i;
    if (!parse_index(name, i)) return {};
    const std::uint32_t c = trie.list_item(n, i);
    return c == Trie::kNone ? LoadNode{} : LoadNode::key(c);
  }
  const std::uint32_t c = trie.find(n, name);
  return c == Trie::kNone ? LoadNode{} : LoadNode::key(c);
}

std::size_t Loader::length(LoadNode node, const std::string& path) const {
  if (const Value* v = node.value()) {
    if (v->is(Value::Kind::List) || v->is(Value::Kind::Tuple)) return v->size();
    std::vector<std::pair<std::size_t, const Value*>> items;
    if (v->is(Value::Kind::Dict) && numeric_items(*v, items)) return items.size();
    throw Error(ErrorCode::corrupt,
                "the module has a list here but the file has a " + std::string(v->kind_name()) +
                    (v->is(Value::Kind::Dict) ? " with non-numeric keys" : ""),
                path);
  }
  const Trie& trie = provenance_->trie();
  const std::uint32_t n = node.trie();
  if (trie.is_list(n)) return trie.list_size(n);
  if (trie.leaf(n) == Trie::kNone && !trie.has_children(n)) return 0;  // an empty file
  const Value shown = provenance_->value_at(n);
  throw Error(ErrorCode::corrupt,
              "the module has a list here but the file has a " + std::string(shown.kind_name()) +
                  (shown.is(Value::Kind::Dict) ? " with non-numeric keys" : ""),
              path);
}

LoadNode Loader::item(LoadNode node, std::size_t i) const {
  if (const Value* v = node.value()) {
    if (v->is(Value::Kind::List) || v->is(Value::Kind::Tuple))
      return LoadNode(i < v->size() ? &v->items()[i] : nullptr);
    std::vector<std::pair<std::size_t, const Value*>> items;
    if (v->is(Value::Kind::Dict) && numeric_items(*v, items) && i < items.size())
      return LoadNode(items[i].second);
    return {};
  }
  const Trie& trie = provenance_->trie();
  if (!trie.is_list(node.trie())) return {};
  const std::uint32_t c = trie.list_item(node.trie(), i);
  return c == Trie::kNone ? LoadNode{} : LoadNode::key(c);
}

std::vector<std::string> Loader::keys(LoadNode node, const std::string& path) const {
  if (const Value* v = node.value()) {
    if (v->is(Value::Kind::List) || v->is(Value::Kind::Tuple)) {
      std::vector<std::string> out;
      for (std::size_t i = 0; i < v->size(); ++i) out.push_back(std::to_string(i));
      return out;
    }
    if (!v->is(Value::Kind::Dict))
      throw Error(ErrorCode::corrupt,
                  "the module has a map here but the file has a " + std::string(v->kind_name()),
                  path);
    std::vector<std::string> out;
    for (const auto& [k, x] : v->pairs()) out.push_back(key_text(k));
    return out;
  }
  const Trie& trie = provenance_->trie();
  const std::uint32_t n = node.trie();
  if (trie.is_list(n)) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < trie.list_size(n); ++i) out.push_back(std::to_string(i));
    return out;
  }
  if (trie.leaf(n) != Trie::kNone)
    throw Error(ErrorCode::corrupt,
                "the module has a map here but the file has a " +
                    std::string(provenance_->value_at(n).kind_name()),
                path);
  return trie.segments(n);
}

Value Loader::adapt(const ModuleInfo& module, LoadNode node, const std::string& path) {
  Value v = node.value() ? *node.value() : provenance_->value_at(node.trie());
  try {
    for (const auto& a : settings_.adapters) v = a->import_module(module, v, *provenance_);
  } catch (const Error& e) {
    throw e.at_key(path);
  }
  return v;
}

void Loader::consume(std::uint32_t leaf, const Value* value, const std::string& path) {
  const std::uint32_t i = leaf != Provenance::npos ? leaf
                          : value != nullptr       ? provenance_->index_of(*value, path)
                                                   : Provenance::npos;
  if (i != Provenance::npos)
    consumed_[i / 64] |= std::uint64_t{1} << (i % 64);
  else
    consumed_paths_.insert(path);  // a leaf an adapter made without `derive`
}

std::size_t Loader::consumed() const {
  std::size_t n = consumed_paths_.size();
  for (const std::uint64_t w : consumed_) n += static_cast<std::size_t>(__builtin_popcountll(w));
  return n;
}

std::vector<bool> Loader::used() const {
  std::vector<bool> out(provenance_->size(), false);
  for (std::uint32_t i = 0; i < out.size(); ++i) out[i] = (consumed_[i / 64] >> (i % 64)) & 1u;
  if (!consumed_paths_.empty())
    for (std::uint32_t i = 0; i < out.size(); ++i)
      if (consumed_paths_.count(provenance_->key(i))) out[i] = true;
  return out;
}

void Loader::missing(const std::string& path, std::string type) {
  report_->missing.push_back({path, std::move(type), {}});
}

void Loader::absent(const std::string& path) {
  report_->absent.push_back(path);
}

Tensor Loader::leaf_tensor(LoadNode node, const std::string& path, std::uint32_t& leaf) const {
  leaf = Provenance::npos;
  if (const Value* v = node.value()) {
    if (!v->is(Value::Kind::Tensor))
      throw Error(ErrorCode::dtype_mismatch,
                  "the module has a tensor here but the file has a " + std::string(v->kind_name()) +
                      " " + v->repr(3),
                  path);
    return v->as_tensor();
  }
  const std::uint32_t i = provenance_->trie().leaf(node.trie());
  if (i == Trie::kNone || !provenance_->tensor(i).defined()) {
    const Value shown = provenance_->value_at(node.trie());
    throw Error(ErrorCode::dtype_mismatch,
                "the module has a tensor here but the file has a " +
                    std::string(shown.kind_name()) + " " + shown.repr(3),
                path);
  }
  leaf = i;
  return provenance_->tensor(i);
}

void Loader::tensor(LoadNode node, const std::string& path, Tensor& field) {
  if (!node) {
    missing(path, "Tensor");
    return;
  }
  std::uint32_t leaf;
  const Tensor from_file = leaf_tensor(node, path, leaf);
  consume(leaf, node.value(), path);
  Tensor t = from_file;
  try {
    for (const auto& a : settings_.adapters) t = a->import_tensor(path, t);
  } catch (const Error& e) {
    throw e.at_key(path);
  }
  if (field.defined() && field.shape() != t.shape()) {
    const std::uint32_t i =
        leaf != Provenance::npos ? leaf : provenance_->index_of(*node.value(), path);
    std::string key = i == Provenance::npos ? path : provenance_->key(i);
    Shape file_shape = provenance_->file_shape(i, from_file.shape());
    report_->mismatched.push_back(
        {path, std::move(key), field.shape(), t.shape(), std::move(file_shape)});
    return;
  }
  if (trial_) return;
  if (t.is_meta())
    throw Error(ErrorCode::unsupported,
                "the file holds a meta tensor here (" + t.description() +
                    "): torch saved it from device 'meta', with a dtype and shape but no data",
                path);
  if (t.is_sparse()) t = t.to_dense();  // the field is dense: its values are unambiguous
  if (t.is_quantized()) {
    if (!settings_.dequantize)
      throw Error(ErrorCode::dtype_mismatch,
                  "the file holds a quantized tensor (" +
                      std::string(Quantization::qdtype_name(t.dtype(), t.quantization()->bits)) +
                      ", " + std::string(Quantization::scheme_name(t.quantization()->scheme)) +
                      ") here; LoadArgs::dequantize() loads its real values",
                  path);
    t = t.dequantize();
  }
  DType target;
  if (settings_.precision)
    target = precision_dtype(*settings_.precision, t.dtype());
  else if (field.defined())
    target = field.dtype();
  else
    target = precision_dtype(Precision::Full, t.dtype());
  try {
    const Tensor source = t;
    const std::uint64_t offset =
        static_cast<std::uint64_t>(source.storage_offset()) * dtype_size(source.dtype());
    if (t.dtype() != target || !t.is_contiguous()) {
      t = t.to(target);
    } else if (settings_.residence == Residence::owned && !t.storage()->writable() &&
               field.defined() && field.dtype() == t.dtype() && field.is_contiguous() &&
               field.is_unshared() && field.storage()->writable()) {
      // A field no other handle shares takes the bytes where it has them, as
      // torch's load_state_dict copies into a parameter (param.copy_): no
      // tensor, storage and shape made, and none freed, a tensor (the field's
      // shape is the file's, checked above). Small tensors are copied from
      // the mapping, as below.
      const Storage& from = *t.storage();
      const std::span<std::byte> to = field.mutable_bytes();
      if (!to.empty() && from.reads_file() && t.nbytes() < Pending::kFromMapping)
        std::memcpy(to.data(), from.file_data() + offset, to.size());
      else
        t.copy_to(to);
      t = field;
    } else if (settings_.residence == Residence::owned && !t.storage()->writable()) {
      const Storage& from = *t.storage();
      if (from.reads_file() && t.nbytes() < Pending::kFromMapping) {
        auto room = pending_->room(t.nbytes());
        std::memcpy(room->mutable_bytes().data(), from.file_data() + offset,
                    static_cast<std::size_t>(t.nbytes()));
        Shape strides = contiguous_strides(t.shape());
        t = Tensor(t.dtype(), t.shape(), std::move(strides), 0, std::move(room));
      } else {
        t = t.clone();
      }
    }
    // A copy was made: the mapped pages it came from need not stay resident.
    if (t.storage() != source.storage() && source.numel() > 0 && source.is_contiguous())
      pending_->released.add(*source.storage(), offset, source.nbytes());
  } catch (const Error& e) {
    throw Error(e.code(), e.message(), path, e.offset(), e.where());
  }
  report_->loaded.push_back(path);
  report_->tensors += 1;
  report_->elements += static_cast<std::uint64_t>(t.numel());
  report_->bytes += t.nbytes();
  if (t.storage()->borrowed()) report_->zero_copy_bytes += t.nbytes();
  field = std::move(t);
}

void Loader::finish() {
  pending_->released.flush();
}

std::optional<Value> Loader::scalar(LoadNode node, const std::string& path,
                                    const std::string& type) {
  if (!node) {
    missing(path, type);
    return std::nullopt;
  }
  std::uint32_t leaf = Provenance::npos;
  Value held;
  const Value* v = node.value();
  if (v == nullptr) {
    leaf = provenance_->trie().leaf(node.trie());
    if (leaf == Trie::kNone) {
      held = provenance_->value_at(node.trie());
      leaf = Provenance::npos;
    } else if (provenance_->tensor(leaf).defined()) {
      held = Value::tensor(provenance_->tensor(leaf));
    } else {
      held = provenance_->leaf_value(leaf);
    }
    v = &held;
  }
  consume(leaf, v, path);
  if (!trial_) report_->loaded.push_back(path);
  if (v->is(Value::Kind::Tensor)) {
    const Tensor& t = v->as_tensor();
    if (t.numel() != 1)
      throw Error(ErrorCode::shape_mismatch,
                  "the module has a " + type + " here but the file has a tensor of shape " +
                      shape_to_string(t.shape()),
                  path);
    if (is_floating(t.dtype())) {
      const Tensor f = t.to(DType::F64);
      return Value::real(f.span<double>()[0]);
    }
    if (t.dtype() == DType::BOOL) {
      const Tensor b = t.contiguous();
      return Value::boolean(b.span<bool>()[0]);
    }
    const Tensor i = t.to(DType::I64);
    return Value::integer(i.span<std::int64_t>()[0]);
  }
  if (v->is(Value::Kind::Bool) || v->is(Value::Kind::Int) || v->is(Value::Kind::Float) ||
      v->is(Value::Kind::Str))
    return *v;
  throw Error(
      ErrorCode::dtype_mismatch,
      "the module has a " + type + " here but the file has a " + std::string(v->kind_name()), path);
}

namespace {

// A sharded load: replaces a tensor leaf by this rank's slice (lazy: read
// when a field takes it) and records what the rank reads of it. Returns
// whether it replaced `t`.
bool shard_leaf(const LoadArgs& args, std::string_view format, const std::string& name, Tensor& t,
                PreparedLoad& p, std::uint32_t index) {
  const ShardSlice sl =
      args.shard_plan()->resolve(name, t.shape(), args.shard_rank(), args.shard_world());
  LoadReport::ShardRead read{name,       std::string(shard_kind_name(sl.kind)),
                             sl.rule,    sl.dim,
                             t.shape(),  t.shape(),
                             t.nbytes(), t.nbytes()};
  if (sl.kind != ShardKind::replicate) {
    try {
      check_sliceable_format(format);
      read.bytes = slice_nbytes(t, sl.dim, sl.ranges);
      t = read_slice(t, sl.dim, sl.ranges);
    } catch (const Error& e) {
      throw e.at_key(name);
    }
    read.shape = t.shape();
  }
  p.report.shard->reads.push_back(std::move(read));
  p.shard_keys.push_back(index);
  return sl.kind != ShardKind::replicate;
}

}  // namespace

// What the load may do to a catalogue it owns.
struct CatalogAccess {
  // Drops the value tree: root() becomes the tensors by name (made if
  // asked for), the tensors, names, index and metadata stay.
  static void release_tree(TensorCatalog& c) {
    c.root_ = Value();
    c.lazy_root_ = std::make_shared<TensorCatalog::LazyRoot>();
  }
};

PreparedLoad prepare_load(const TensorCatalog& catalog, const LoadArgs& args,
                          const std::string& source, TensorCatalog* own) {
  if (own != nullptr && own != &catalog)
    throw Error(ErrorCode::internal, "prepare_load: `own` is not the catalogue loaded");
  PreparedLoad p;
  if (args.shard_plan())
    p.report.shard = LoadReport::Shard{args.shard_rank(), args.shard_world(), {}, 0, 0, 0, 0};
  // The leaves are the catalogue's tensors by index (their names the keys
  // unless renamed): a selection is kept for the load.
  const TensorCatalog* cat = &catalog;
  std::shared_ptr<TensorCatalog> selected;
  TensorCatalog* made = nullptr;  // the selection: made here, the load's own
  if (!args.top_level_key().empty()) {
    selected = std::make_shared<TensorCatalog>(catalog.select(args.top_level_key()));
    cat = made = selected.get();
  }
  const bool renames = !args.remap().empty();
  auto provenance = std::make_shared<Provenance>(*cat, renames);
  if (selected) provenance->keep(std::move(selected));
  std::vector<std::pair<std::string, Value>> scalars;
  if (!cat->root_is_tensors()) {
    std::string path;
    collect_scalars(cat->root(), path, scalars);
  }
  if (own != nullptr) CatalogAccess::release_tree(*own);
  if (made != nullptr) CatalogAccess::release_tree(*made);
  provenance->reserve(cat->size() + scalars.size());
  // Remapped -> original, to name both keys the rules turn into one
  // (without rules the keys are the catalogue's names: the trie refuses a
  // repeat).
  detail::StringMap<std::string> taken;
  // As `torchport convert` does (see transform()): filters see the file's
  // names, then the remap rules rename what is kept. `index`: the tensor's
  // in the catalogue; the key of a scalar (undefined `t`) is its path.
  const auto add = [&](std::string_view name, std::uint32_t index, const Tensor& t, Value scalar) {
    const bool kept = args.filter().accepts(name);
    std::string renamed = kept && renames ? args.remap().apply(std::string(name)) : std::string();
    if (args.debug()) {
      LoadReport::KeyLine line{
          std::string(name), kept ? (renames ? renamed : std::string(name)) : "", "", {}};
      if (t.defined()) {
        line.dtype = std::string(dtype_name(t.dtype()));
        line.shape = t.shape();
      } else {
        line.dtype = "scalar " + std::string(scalar.kind_name());
      }
      p.report.keys.push_back(std::move(line));
    }
    if (!kept) return;
    Tensor slice;
    if (args.shard_plan() && t.defined()) {
      slice = t;
      if (!shard_leaf(args, catalog.format_name(), std::string(name), slice, p,
                      static_cast<std::uint32_t>(provenance->size())))
        slice = Tensor();
    }
    if (renames) {
      auto [it, fresh] = taken.emplace(renamed, std::string(name));
      if (!fresh)
        throw Error(ErrorCode::invalid_argument,
                    "the remap rules turn both '" + it->second + "' and '" + std::string(name) +
                        "' into '" + renamed + "'",
                    renamed);
    }
    if (t.defined())
      provenance->add_tensor(index, std::move(renamed), std::move(slice));
    else
      provenance->add_scalar(renames ? std::move(renamed) : std::string(name), std::move(scalar));
  };
  if (cat->size() >= UINT32_MAX)
    throw Error(ErrorCode::limit_exceeded, "more than 2^32 - 1 keys in one load");
  for (std::uint32_t i = 0; i < cat->size(); ++i)
    add(cat->tensors()[i].name, i, cat->tensors()[i].tensor, Value());
  for (auto& [name, v] : scalars) add(name, 0, Tensor(), std::move(v));
  detail::StringMap<std::string>().swap(taken);
  provenance->finish();
  p.report.loaded.reserve(provenance->size());  // a field a key, at most

  LoadSettings settings;
  settings.precision = args.precision();
  settings.residence = args.residence();
  settings.dequantize = args.dequantize();
  // Our records hold our layout, unless they were converted from a PyTorch
  // checkpoint without a module to adapt to (they then say so).
  const auto layout = catalog.metadata().find("torchport.layout");
  const bool converted = layout != catalog.metadata().end() && layout->second == "pytorch";
  const bool pytorch =
      args.layout() == Layout::PyTorch ||
      (args.layout() == Layout::Auto && (!has_torchport_layout(catalog.format()) || converted));
  if (pytorch) settings.adapters.push_back(std::make_shared<PyTorchAdapter>());
  for (const auto& a : args.adapters()) settings.adapters.push_back(a);
  p.report.source = source.empty() ? std::string(catalog.format_name()) : source;
  p.report.format = catalog.format();
  p.file_metadata = catalog.metadata();
  p.loader = std::make_unique<Loader>(std::move(settings), p.report, std::move(provenance));
  return p;
}

// How a record file's metadata differs from the module and this library,
// for error messages: "" when nothing differs or the file is no record.
std::string metadata_differences(const std::map<std::string, std::string>& meta,
                                 const std::string& module_type) {
  auto get = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  std::string d;
  const std::string type = get("torchport.type"), library = get("torchport.library"),
                    precision = get("torchport.precision");
  if (!type.empty() && !module_type.empty() && type != module_type)
    d += "the file holds a '" + type + "', this module is a '" + module_type + "'";
  if (!library.empty() && library != kVersion)
    d += (d.empty() ? "" : "; ") + std::string("it was written by torchport ") + library +
         ", this is " + kVersion;
  if (!d.empty() && !precision.empty()) d += "; it was saved at " + precision + " precision";
  return d.empty() ? d : " (" + d + ")";
}

LoadReport finish_load(PreparedLoad& p, const LoadArgs& args, const std::string& module_type) {
  p.loader->finish();
  LoadReport& r = p.report;
  const std::string differs = metadata_differences(p.file_metadata, module_type);
  const std::vector<bool> used = p.loader->used();
  for (std::uint32_t i = 0; i < used.size(); ++i)
    if (!used[i]) r.unused.push_back(p.loader->provenance().key(i));
  if (r.shard) {  // what the rank read: the tensors a field took
    std::vector<LoadReport::ShardRead> reads;
    for (std::size_t i = 0; i < r.shard->reads.size(); ++i) {
      if (!used[p.shard_keys[i]]) continue;
      LoadReport::ShardRead& x = r.shard->reads[i];
      r.shard->bytes += x.bytes;
      r.shard->file_bytes += x.file_bytes;
      (x.kind == "replicate" ? r.shard->replicated_bytes : r.shard->split_bytes) += x.file_bytes;
      reads.push_back(std::move(x));
    }
    r.shard->reads = std::move(reads);
  }
  // Suggestions cost |missing| x |unused| edit distances: give them to the
  // first few missing fields, which is what a reader looks at.
  constexpr std::size_t kSuggested = 32;
  for (std::size_t i = 0; i < r.missing.size() && i < kSuggested; ++i)
    r.missing[i].did_you_mean = suggestions(r.missing[i].path, r.unused);

  auto listing = [](const auto& items, auto&& show) {
    std::string s;
    for (std::size_t i = 0; i < items.size() && i < 8; ++i) s += (i ? ", " : "") + show(items[i]);
    if (items.size() > 8) s += ", ... " + std::to_string(items.size() - 8) + " more";
    return s;
  };
  // Optional fields left empty that unused keys look like (the first few:
  // each costs a pass over the unused keys).
  if (!r.absent.empty() && !r.unused.empty()) {
    std::vector<std::vector<std::string_view>> parts;
    parts.reserve(r.unused.size());
    for (const auto& u : r.unused) parts.push_back(components(u));
    for (std::size_t i = 0; i < r.absent.size() && i < kSuggested; ++i)
      if (auto w = look_alike(r.absent[i], r.unused, parts)) r.warnings.push_back(std::move(*w));
  }

  if (!r.mismatched.empty()) {
    // Both names, and the file's shape as the file holds it (the module's
    // layout, after the adapters, in brackets when it differs).
    auto shapes = [](const LoadReport::Mismatch& x) {
      std::string s = "field '" + x.path + "' expects " + shape_to_string(x.expected) +
                      ", the file's '" + x.source + "' has " + shape_to_string(x.file_shape);
      if (x.found != x.file_shape)
        s += " (" + shape_to_string(x.found) + " in the module's layout)";
      return s;
    };
    const auto& m = r.mismatched.front();
    throw Error(
        ErrorCode::shape_mismatch,
        "shape mismatch: " + shapes(m) +
            (r.mismatched.size() > 1 ? " (" + std::to_string(r.mismatched.size()) +
                                           " mismatches: " + listing(r.mismatched, shapes) + ")"
                                     : std::string()) +
            differs,
        m.path, std::nullopt, r.source);
  }
  if (!r.missing.empty() && !args.allow_partial()) {
    const auto& m = r.missing.front();
    std::string msg = "the module's field '" + m.path + "' (" + m.type + ") has no key in the file";
    if (!m.did_you_mean.empty()) msg += "; did you mean '" + m.did_you_mean.front() + "'?";
    if (r.missing.size() > 1)
      msg += " (" + std::to_string(r.missing.size()) + " fields missing: " +
             listing(r.missing, [](const LoadReport::Missing& x) { return x.path; }) + ")";
    msg +=
        ". Remap keys with LoadArgs::remap, or keep initial values with LoadArgs::allow_partial" +
        differs;
    throw Error(ErrorCode::missing_key, msg, m.path, std::nullopt, r.source);
  }
  if (!r.warnings.empty() && args.strict())
    throw Error(ErrorCode::unused_key,
                r.warnings.front().message +
                    (r.warnings.size() > 1
                         ? " (" + std::to_string(r.warnings.size()) + " such optional fields)"
                         : std::string()) +
                    differs,
                r.warnings.front().path, std::nullopt, r.source);
  if (!r.unused.empty() && args.strict())
    throw Error(ErrorCode::unused_key,
                std::to_string(r.unused.size()) +
                    (r.unused.size() == 1 ? " key of the file is" : " keys of the file are") +
                    " used by no field: " +
                    listing(r.unused, [](const std::string& x) { return x; }) + differs,
                r.unused.front(), std::nullopt, r.source);
  return std::move(r);  // the prepared load is done with it: a copy would double it
}

}  // namespace torchport::detail
