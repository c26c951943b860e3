#include "torchport/formats/catalog.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <unordered_set>

#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/take_tensors.hpp"

namespace torchport {
namespace {

// The name segment a dict key contributes: strings as they are, integers in
// decimal (optimizer state is keyed by parameter index), others as repr.
std::string key_segment(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::Str:
      return k.as_str();
    case Value::Kind::Bytes:
      return k.as_bytes();
    case Value::Kind::Int:
      return std::to_string(k.as_int());
    default:
      return k.repr();
  }
}

// True for the state of a pickled torch.nn.Module: its __dict__ holds the
// OrderedDicts `_parameters`, `_buffers` and `_modules`.
bool is_module_state(const Value& state) {
  return state.is(Value::Kind::Dict) && state.find("_parameters") != nullptr &&
         state.find("_modules") != nullptr;
}

// Appends a dict key's name segment to `name` (after a '.' unless `name`
// is empty), as key_segment does, without a temporary string.
void append_segment(std::string& name, const Value& k) {
  if (!name.empty()) name += '.';
  switch (k.kind()) {
    case Value::Kind::Str:
      name += k.as_str();
      break;
    case Value::Kind::Bytes:
      name += k.as_bytes();
      break;
    case Value::Kind::Int: {
      char buf[24];
      const auto r = std::to_chars(buf, buf + sizeof buf, k.as_int());
      name.append(buf, r.ptr);
      break;
    }
    default:
      name += k.repr();
      break;
  }
}

void append_index(std::string& name, std::size_t i) {
  if (!name.empty()) name += '.';
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, i);
  name.append(buf, r.ptr);
}

// Walks the tree with one name buffer: a segment is appended before
// descending and cut off after.
class Flattener {
 public:
  explicit Flattener(const Limits& limits) : limits_(limits) {}

  std::vector<NamedTensor> run(const Value& root) {
    std::string name;
    if (root.is(Value::Kind::Tensor)) name = kRootTensorName;  // a bare tensor has no key path
    // The list sized first: growth by doubling would leave up to half of it
    // unused for the catalogue's whole life (a shrink copies it at the peak).
    out_.reserve(static_cast<std::size_t>(
        std::min<std::uint64_t>(count(root), static_cast<std::uint64_t>(limits_.max_tensors))));
    walk(root, name);
    return std::move(out_);
  }
  // A state dict, taken apart as it is listed (detail::take_tensor_dict):
  // its names are the keys, moved rather than copied, and each key's and
  // tensor's nodes are freed as they are listed. Then the tree and the list
  // are never both whole at a load's peak (a node of a string and one of a
  // tensor, and a copy of the name, each tensor). False for any other tree.
  bool take(Value& root, bool& ordered) {
    if (!root.is(Value::Kind::Dict)) return false;
    out_.reserve(std::min<std::size_t>(root.size(), limits_.max_tensors));
    return detail::take_tensor_dict(root, ordered, [this](std::string&& name, Tensor&& t) {
      add(std::move(name), std::move(t));
    });
  }
  std::vector<NamedTensor> take_list() { return std::move(out_); }

  /// The nested tensors met, as metadata: `torchport.nested.NAME` = the
  /// count of components (NAME.0, NAME.1, ...); and the tensor subclasses:
  /// `torchport.subclass.NAME` = the class ("torchao.quantization.Int8Tensor"),
  /// whose component tensors are NAME.ATTR.
  void add_nested(std::map<std::string, std::string>& metadata) const {
    for (const auto& [name, n] : nested_) metadata["torchport.nested." + name] = std::to_string(n);
    for (const auto& [name, cls] : subclasses_) metadata["torchport.subclass." + name] = cls;
  }

 private:
  // At least the tensors walk() lists (every tensor it can reach), visiting
  // what walk() visits, so it is as bounded as walk() is.
  static std::uint64_t count(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::Tensor:
        return 1;
      case Value::Kind::Dict: {
        std::uint64_t n = 0;
        for (const auto& [k, x] : v.pairs())
          if (x.is(Value::Kind::Tensor) || x.is_container()) n += count(x);
        return n;
      }
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set: {
        std::uint64_t n = 0;
        for (const auto& x : v.items())
          if (x.is(Value::Kind::Tensor) || x.is_container()) n += count(x);
        return n;
      }
      case Value::Kind::Object:
        return count(v.as_object().state);
      default:
        return 0;
    }
  }

  void add(std::string name, Tensor t) {
    if (name.size() > limits_.max_name_bytes)
      throw Error(
          ErrorCode::limit_exceeded,
          "tensor name of " + std::to_string(name.size()) +
              " bytes exceeds Limits::max_name_bytes = " + std::to_string(limits_.max_name_bytes),
          name.substr(0, 64) + "...");
    if (out_.size() >= limits_.max_tensors)
      throw Error(ErrorCode::limit_exceeded,
                  "more tensors than Limits::max_tensors = " + std::to_string(limits_.max_tensors));
    out_.push_back({std::move(name), std::move(t)});  // duplicates: TensorCatalog::index
  }

  void walk(const Value& v, std::string& name) {
    const std::size_t n = name.size();
    switch (v.kind()) {
      case Value::Kind::Tensor:
        add(name, v.as_tensor());
        break;
      case Value::Kind::Dict:
        for (const auto& [k, x] : v.pairs()) {
          if (!x.is(Value::Kind::Tensor) && !x.is_container()) continue;  // holds no tensor
          append_segment(name, k);
          walk(x, name);
          name.resize(n);
        }
        break;
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set: {
        std::size_t i = 0;
        for (const auto& x : v.items()) {
          if (x.is(Value::Kind::Tensor) || x.is_container()) {
            append_index(name, i);
            walk(x, name);
            name.resize(n);
          }
          ++i;
        }
        break;
      }
      case Value::Kind::Object:
        object(v.as_object(), name);
        break;
      default:
        break;
    }
  }

  void object(const Object& o, std::string& name) {
    const Value& state = o.state;
    if (o.cls.is("torch._utils", "_rebuild_nested_tensor") && state.is(Value::Kind::List)) {
      // A nested tensor as the torch readers make it: its components.
      nested_[name] = state.size();
      walk(state, name);
      return;
    }
    if (o.cls.is("torch._tensor", "_rebuild_from_type_v2") && o.args.size() == 3 &&
        o.args.items()[1].is(Value::Kind::Global) && state.is(Value::Kind::Dict)) {
      // A tensor subclass as the torch readers make it: its attributes.
      subclasses_[name] = o.args.items()[1].as_global().qualified();
      walk(state, name);
      return;
    }
    if (is_module_state(state)) {
      module(state, name);
    } else if (state.is(Value::Kind::Dict)) {
      walk(state, name);  // attribute dicts: TorchScript objects, plain classes
    } else if (state.is(Value::Kind::Tuple)) {
      for (const auto& part : state.items())  // (__dict__, __slots__ state)
        if (part.is(Value::Kind::Dict)) walk(part, name);
    }
  }

  // Names as torch.nn.Module.state_dict() gives them: parameters, then
  // persistent buffers, then each submodule, recursively; None entries skipped.
  void module(const Value& state, std::string& name) {
    detail::StringSet non_persistent;
    if (const Value* np = state.find("_non_persistent_buffers_set");
        np && (np->is(Value::Kind::Set) || np->is(Value::Kind::List)))
      for (const auto& x : np->items())
        if (x.is(Value::Kind::Str)) non_persistent.insert(x.as_str());
    const std::size_t n = name.size();
    auto tensors = [&](const char* field, bool buffers) {
      const Value* d = state.find(field);
      if (!d || !d->is(Value::Kind::Dict)) return;
      for (const auto& [k, x] : d->pairs()) {
        if (x.is_none() ||
            (buffers && !non_persistent.empty() && non_persistent.count(key_segment(k))))
          continue;
        append_segment(name, k);
        walk(x, name);
        name.resize(n);
      }
    };
    tensors("_parameters", false);
    tensors("_buffers", true);
    if (const Value* mods = state.find("_modules"); mods && mods->is(Value::Kind::Dict))
      for (const auto& [k, x] : mods->pairs())
        if (!x.is_none()) {
          append_segment(name, k);
          walk(x, name);
          name.resize(n);
        }
  }

  const Limits& limits_;
  std::vector<NamedTensor> out_;
  std::map<std::string, std::size_t> nested_;
  std::map<std::string, std::string> subclasses_;
};

}  // namespace

TensorCatalog TensorCatalog::from_value(Format format, Value root, const Limits& limits,
                                        std::map<std::string, std::string> metadata) {
  TensorCatalog c;
  c.format_ = format;
  Flattener flat(limits);
  bool ordered = false;
  if (flat.take(root, ordered)) {
    c.tensors_ = flat.take_list();
    c.lazy_root_ = std::make_shared<LazyRoot>();
    c.lazy_root_->ordered = ordered;
  } else {
    c.tensors_ = flat.run(root);
    flat.add_nested(metadata);
    c.root_ = std::move(root);
  }
  c.metadata_ = std::move(metadata);
  c.index("two tensors have the same name (a dotted key collides with a nested one)");
  return c;
}

TensorCatalog TensorCatalog::from_tensors(Format format, std::vector<NamedTensor> tensors,
                                          std::map<std::string, std::string> metadata, Value root) {
  TensorCatalog c;
  c.format_ = format;
  c.tensors_ = std::move(tensors);
  if (root.is_none())
    c.lazy_root_ = std::make_shared<LazyRoot>();
  else
    c.root_ = std::move(root);
  c.metadata_ = std::move(metadata);
  c.index("two tensors have the same name");
  return c;
}

TensorCatalog TensorCatalog::with_tensors(std::vector<NamedTensor> tensors,
                                          std::map<std::string, std::string> metadata,
                                          Value root) const {
  TensorCatalog c = from_tensors(format_, std::move(tensors), std::move(metadata), std::move(root));
  c.format_name_ = format_name_;
  return c;
}

std::string_view TensorCatalog::format_name() const noexcept {
  return format_name_.empty() ? torchport::format_name(format_) : std::string_view(format_name_);
}

void TensorCatalog::set_format_name(std::string name) {
  if (parse_format(name) != format_)
    throw Error(ErrorCode::invalid_argument, "'" + name +
                                                 "' does not name the catalogue's format, " +
                                                 std::string(torchport::format_name(format_)));
  format_name_ = std::move(name);
}

std::vector<NamedTensor> TensorCatalog::take_tensors() && {
  std::vector<NamedTensor> out = std::move(tensors_);
  *this = TensorCatalog();
  return out;
}

const Value& TensorCatalog::root() const {
  if (!lazy_root_) return root_;
  std::call_once(lazy_root_->once, [this] {
    Value root = lazy_root_->ordered ? Value::ordered_dict() : Value::dict();
    for (const auto& t : tensors_) root.insert(Value::str(t.name), Value::tensor(t.tensor));
    lazy_root_->value = std::move(root);
  });
  return lazy_root_->value;
}

Value TensorCatalog::values() const {
  // A root of tensors alone is not made only to be pruned: prune_tensors
  // gives None for it (an empty dict when there are no tensors).
  if (root_is_tensors()) return tensors_.empty() ? Value::dict() : Value();
  return prune_tensors(root());
}

// Open addressing over tensor indices (stored + 1; 0 is an empty slot), at
// most half full: no copy of the names, and copies of the catalogue keep a
// valid index.
void TensorCatalog::index(const char* duplicate_message) {
  // Slots of 4 bytes (a table twice the tensors, 8 bytes a tensor).
  if (tensors_.size() >= UINT32_MAX)
    throw Error(ErrorCode::limit_exceeded, "2^32 - 1 tensors or more in one catalogue");
  std::size_t cap = 16;
  while (cap < 2 * tensors_.size()) cap *= 2;
  slots_.assign(cap, 0);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::string& name = tensors_[i].name;
    for (std::size_t s = static_cast<std::size_t>(detail::seeded_hash(name)) & (cap - 1);;
         s = (s + 1) & (cap - 1)) {
      if (slots_[s] == 0) {
        slots_[s] = static_cast<std::uint32_t>(i + 1);
        break;
      }
      if (tensors_[slots_[s] - 1].name == name)
        throw Error(ErrorCode::corrupt, duplicate_message, name);
    }
  }
}

const Tensor* TensorCatalog::find(std::string_view name) const {
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t s = static_cast<std::size_t>(detail::seeded_hash(name)) & mask; slots_[s] != 0;
       s = (s + 1) & mask)
    if (tensors_[slots_[s] - 1].name == name) return &tensors_[slots_[s] - 1].tensor;
  return nullptr;
}

std::uint64_t TensorCatalog::total_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& t : tensors_) n += t.tensor.nbytes();
  return n;
}

std::uint64_t TensorCatalog::storage_bytes() const {
  std::unordered_set<const Storage*> seen;
  std::uint64_t n = 0;
  for (const auto& t : tensors_)
    if (seen.insert(t.tensor.storage().get()).second) n += t.tensor.storage()->nbytes();
  return n;
}

std::vector<std::string> TensorCatalog::top_level_keys() const {
  std::vector<std::string> keys;
  detail::StringSet seen;
  for (const auto& t : tensors_) {
    std::string k = t.name.substr(0, t.name.find('.'));
    if (seen.insert(k).second) keys.push_back(std::move(k));
  }
  return keys;
}

TensorCatalog TensorCatalog::select(std::string_view key) const {
  std::vector<NamedTensor> picked;
  const std::string prefix = std::string(key) + ".";
  for (const auto& t : tensors_) {
    if (t.name == key)
      picked.push_back({std::string(kRootTensorName), t.tensor});
    else if (t.name.starts_with(prefix))
      picked.push_back({t.name.substr(prefix.size()), t.tensor});
  }
  if (picked.empty()) {
    std::string have;
    for (const auto& k : top_level_keys()) have += (have.empty() ? "" : ", ") + ("'" + k + "'");
    throw Error(ErrorCode::missing_key,
                "no tensors under this top-level key; the keys holding tensors are: " +
                    (have.empty() ? std::string("(none)") : have),
                std::string(key));
  }
  // The matching sub-tree of the root, walking dotted segments.
  Value sub;
  const Value* node = &root();
  std::string_view rest = key;
  while (node != nullptr && !rest.empty()) {
    const Value* whole = node->find(rest);
    if (whole) {
      node = whole;
      rest = {};
      break;
    }
    const auto dot = rest.find('.');
    node = node->find(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
  }
  if (node != nullptr && rest.empty()) sub = *node;
  return with_tensors(std::move(picked), metadata_, std::move(sub));
}

}  // namespace torchport
