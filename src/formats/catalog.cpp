#include "torchport/formats/catalog.hpp"

#include <unordered_set>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

// The name segment a dict key contributes: strings as they are, integers in
// decimal (optimizer state is keyed by parameter index), others as repr.
std::string key_segment(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::Str: return k.as_str();
    case Value::Kind::Bytes: return k.as_bytes();
    case Value::Kind::Int: return std::to_string(k.as_int());
    default: return k.repr();
  }
}

// True for the state of a pickled torch.nn.Module: its __dict__ holds the
// OrderedDicts `_parameters`, `_buffers` and `_modules`.
bool is_module_state(const Value& state) {
  return state.is(Value::Kind::Dict) && state.find("_parameters") != nullptr &&
         state.find("_modules") != nullptr;
}

class Flattener {
 public:
  explicit Flattener(const Limits& limits) : limits_(limits) {}

  std::vector<NamedTensor> run(const Value& root) {
    walk(root, "");
    return std::move(out_);
  }

 private:
  static std::string join(const std::string& prefix, const std::string& seg) {
    return prefix.empty() ? seg : prefix + "." + seg;
  }

  void add(const std::string& name, const Tensor& t) {
    if (name.size() > limits_.max_name_bytes)
      throw Error(ErrorCode::limit_exceeded,
                  "tensor name of " + std::to_string(name.size()) +
                      " bytes exceeds Limits::max_name_bytes = " + std::to_string(limits_.max_name_bytes),
                  name.substr(0, 64) + "...");
    if (out_.size() >= limits_.max_tensors)
      throw Error(ErrorCode::limit_exceeded,
                  "more tensors than Limits::max_tensors = " + std::to_string(limits_.max_tensors));
    if (!seen_.insert(name).second)
      throw Error(ErrorCode::corrupt,
                  "two tensors have the same name (a dotted key collides with a nested one)", name);
    out_.push_back({name, t});
  }

  void walk(const Value& v, const std::string& prefix) {
    switch (v.kind()) {
      case Value::Kind::Tensor: add(prefix, v.as_tensor()); break;
      case Value::Kind::Dict:
        for (const auto& [k, x] : v.pairs()) walk(x, join(prefix, key_segment(k)));
        break;
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set: {
        std::size_t i = 0;
        for (const auto& x : v.items()) walk(x, join(prefix, std::to_string(i++)));
        break;
      }
      case Value::Kind::Object: object(v.as_object(), prefix); break;
      default: break;
    }
  }

  void object(const Object& o, const std::string& prefix) {
    const Value& state = o.state;
    if (is_module_state(state)) {
      module(state, prefix);
    } else if (state.is(Value::Kind::Dict)) {
      walk(state, prefix);  // attribute dicts: TorchScript objects, plain classes
    } else if (state.is(Value::Kind::Tuple)) {
      for (const auto& part : state.items())  // (__dict__, __slots__ state)
        if (part.is(Value::Kind::Dict)) walk(part, prefix);
    }
  }

  // Names as torch.nn.Module.state_dict() gives them: parameters, then
  // persistent buffers, then each submodule, recursively; None entries skipped.
  void module(const Value& state, const std::string& prefix) {
    std::unordered_set<std::string> non_persistent;
    if (const Value* np = state.find("_non_persistent_buffers_set");
        np && (np->is(Value::Kind::Set) || np->is(Value::Kind::List)))
      for (const auto& n : np->items())
        if (n.is(Value::Kind::Str)) non_persistent.insert(n.as_str());
    auto tensors = [&](const char* field, bool buffers) {
      const Value* d = state.find(field);
      if (!d || !d->is(Value::Kind::Dict)) return;
      for (const auto& [k, x] : d->pairs()) {
        const std::string name = key_segment(k);
        if (x.is_none() || (buffers && non_persistent.count(name))) continue;
        walk(x, join(prefix, name));
      }
    };
    tensors("_parameters", false);
    tensors("_buffers", true);
    if (const Value* mods = state.find("_modules"); mods && mods->is(Value::Kind::Dict))
      for (const auto& [k, x] : mods->pairs())
        if (!x.is_none()) walk(x, join(prefix, key_segment(k)));
  }

  const Limits& limits_;
  std::vector<NamedTensor> out_;
  std::unordered_set<std::string> seen_;
};

}  // namespace

TensorCatalog TensorCatalog::from_value(std::string format, Value root, const Limits& limits,
                                        std::map<std::string, std::string> metadata) {
  TensorCatalog c;
  c.format_ = std::move(format);
  c.tensors_ = Flattener(limits).run(root);
  c.root_ = std::move(root);
  c.metadata_ = std::move(metadata);
  c.index();
  return c;
}

TensorCatalog TensorCatalog::from_tensors(std::string format, std::vector<NamedTensor> tensors,
                                          std::map<std::string, std::string> metadata, Value root) {
  TensorCatalog c;
  c.format_ = std::move(format);
  c.tensors_ = std::move(tensors);
  if (root.is_none()) {
    root = Value::dict();
    for (const auto& t : c.tensors_) root.insert(Value::str(t.name), Value::tensor(t.tensor));
  }
  c.root_ = std::move(root);
  c.metadata_ = std::move(metadata);
  c.index();
  return c;
}

void TensorCatalog::index() {
  by_name_.clear();
  by_name_.reserve(tensors_.size());
  for (std::size_t i = 0; i < tensors_.size(); ++i)
    if (!by_name_.emplace(tensors_[i].name, i).second)
      throw Error(ErrorCode::corrupt, "two tensors have the same name", tensors_[i].name);
}

const Tensor* TensorCatalog::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second].tensor;
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
  std::unordered_set<std::string> seen;
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
    if (t.name == key) picked.push_back({"", t.tensor});
    else if (t.name.starts_with(prefix)) picked.push_back({t.name.substr(prefix.size()), t.tensor});
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
  const Value* node = &root_;
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
  return from_tensors(format_, std::move(picked), metadata_, std::move(sub));
}

}  // namespace torchport
