#include "torchport/record/adapter.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "torchport/core/error.hpp"

namespace torchport {

Value Adapter::import_module(const ModuleInfo&, const Value& node, AdapterContext&) const {
  return node;
}
Value Adapter::export_module(const ModuleInfo&, const Value& node) const {
  return node;
}
Tensor Adapter::import_tensor(std::string_view, const Tensor& t) const {
  return t;
}
Tensor Adapter::export_tensor(std::string_view, const Tensor& t) const {
  return t;
}

namespace detail {

void invalid_layout_rule(std::string_view why) {
  throw Error(ErrorCode::invalid_argument, "malformed PyTorch layout rule: " + std::string(why));
}

}  // namespace detail

namespace {

std::string key_text(const Value& k) {
  if (k.is(Value::Kind::Str)) return k.as_str();
  if (k.is(Value::Kind::Int)) return std::to_string(k.as_int());
  return k.repr();
}

// `pattern` with every `what` replaced by `with`.
std::string replace_all(std::string_view pattern, std::string_view what, std::string_view with) {
  std::string out;
  std::size_t from = 0;
  for (auto at = pattern.find(what); at != std::string_view::npos; at = pattern.find(what, from)) {
    out.append(pattern.substr(from, at - from)).append(with);
    from = at + what.size();
  }
  out.append(pattern.substr(from));
  return out;
}

// PyTorch's key of a rule at `index` (none for an unindexed rule).
std::string torch_key(std::string_view pattern, std::optional<std::size_t> index) {
  return index ? replace_all(pattern, "{index}", std::to_string(*index)) : std::string(pattern);
}

// One segment of a field path: a dict key, or (from `{index}`) a list index.
struct Segment {
  std::string key;
  bool is_index = false;
  std::size_t index = 0;
};

// The field path of a fused rule's pattern for `part` at `index`.
std::vector<Segment> field_path(std::string_view pattern, std::optional<std::size_t> index,
                                std::string_view part) {
  std::vector<Segment> out;
  std::size_t from = 0;
  for (;;) {
    const auto dot = pattern.find('.', from);
    const std::string_view seg =
        pattern.substr(from, dot == std::string_view::npos ? dot : dot - from);
    Segment s;
    if (seg == "{index}") {
      s.is_index = true;
      s.index = index.value_or(0);
      s.key = std::to_string(s.index);
    } else {
      s.key = replace_all(seg, "{part}", part);
    }
    out.push_back(std::move(s));
    if (dot == std::string_view::npos) return out;
    from = dot + 1;
  }
}

// The value at `path` under `node` (dict keys, list indices); nullptr when absent.
const Value* value_at(const Value& node, const std::vector<Segment>& path, std::size_t length) {
  const Value* v = &node;
  for (std::size_t i = 0; i < length && v != nullptr; ++i) {
    const Segment& s = path[i];
    if (v->is(Value::Kind::List) || v->is(Value::Kind::Tuple)) {
      v = s.is_index && s.index < v->size() ? &v->items()[s.index] : nullptr;
    } else {
      v = v->find(s.key);
    }
  }
  return v;
}

const Tensor* tensor_at(const Value& node, const std::vector<Segment>& path) {
  const Value* v = value_at(node, path, path.size());
  return v && v->is(Value::Kind::Tensor) ? &v->as_tensor() : nullptr;
}

Tensor transpose2d(const Tensor& t) {
  return t.dim() == 2 ? t.transpose(0, 1) : t;
}

// Row blocks [i * rows, (i + 1) * rows) of a fused [n * rows, ...] tensor.
Tensor chunk(const Tensor& t, std::int64_t n, std::int64_t i, std::string_view what) {
  if (t.dim() < 1 || t.size(0) % n != 0)
    throw Error(ErrorCode::shape_mismatch,
                std::string(what) + " of shape " + shape_to_string(t.shape()) +
                    " does not split into " + std::to_string(n) + " equal parts");
  const std::int64_t rows = t.size(0) / n;
  return t.narrow(0, i * rows, rows);
}

// Concatenates tensors along dim 0 into a fresh contiguous tensor `what`.
Tensor concat0(const std::vector<const Tensor*>& parts, std::string_view what) {
  Shape shape = parts.front()->shape();
  std::int64_t rows = 0;
  for (const Tensor* p : parts) {
    if (p->dtype() != parts.front()->dtype() || p->dim() != parts.front()->dim() || p->dim() < 1)
      throw Error(
          ErrorCode::shape_mismatch,
          "cannot fuse tensors of different dtypes or ranks into '" + std::string(what) + "'");
    rows += p->size(0);
  }
  shape[0] = rows;
  Tensor out = Tensor::empty(parts.front()->dtype(), shape);
  auto dst = out.mutable_bytes();
  std::size_t at = 0;
  for (const Tensor* p : parts) {
    const std::size_t n = static_cast<std::size_t>(p->nbytes());
    p->copy_to(dst.subspan(at, n));
    at += n;
  }
  return out;
}

// The tree an import builds: dicts keep their insertion order, a later value
// at the same key replaces the earlier one in place (as Value::insert does),
// lists grow to the highest index put.
class TreeBuilder {
 public:
  TreeBuilder() : nodes_(1) {}

  void put(const std::vector<Segment>& path, Value leaf) {
    std::size_t node = 0;
    for (const Segment& s : path) {
      nodes_[node].leaf.reset();
      if (s.is_index) {
        if (!nodes_[node].list) nodes_[node].kids.clear();  // the rules' list replaces a dict
        nodes_[node].list = true;
        while (nodes_[node].kids.size() <= s.index) {
          const std::size_t next = nodes_.size();
          nodes_.emplace_back();  // may reallocate: index again below
          nodes_[node].kids.emplace_back(Value(), next);
        }
        node = nodes_[node].kids[s.index].second;
      } else {
        node = child(node, Value::str(s.key), s.key);
      }
    }
    nodes_[node].leaf = std::move(leaf);
    nodes_[node].kids.clear();
    nodes_[node].list = false;
  }

  // Puts `leaf` under the root at `key` (kept as the file spelled it).
  void put_entry(const Value& key, Value leaf) {
    const std::size_t node = child(0, key, key_text(key));
    nodes_[node].leaf = std::move(leaf);
    nodes_[node].kids.clear();
    nodes_[node].list = false;
  }

  Value build(std::size_t node = 0) const {
    const Node& n = nodes_[node];
    if (n.leaf) return *n.leaf;
    if (n.list) {
      Value out = Value::list();
      for (const auto& kid : n.kids) out.append(build(kid.second));
      return out;
    }
    Value out = Value::dict();
    for (const auto& [key, kid] : n.kids) out.insert(key, build(kid));
    return out;
  }

 private:
  struct Node {
    std::optional<Value> leaf;
    bool list = false;
    std::vector<std::pair<Value, std::size_t>> kids;  // (key, node); lists ignore the key
  };

  std::size_t child(std::size_t node, const Value& key, const std::string& text) {
    for (const auto& [k, kid] : nodes_[node].kids)
      if (!nodes_[node].list && key_text(k) == text) return kid;
    if (nodes_[node].list) {  // a key where the rules made a list: the key wins
      nodes_[node].list = false;
      nodes_[node].kids.clear();
    }
    const std::size_t next = nodes_.size();
    nodes_.emplace_back();
    nodes_[node].kids.emplace_back(key, next);
    return next;
  }

  std::vector<Node> nodes_;
};

void check_rules(const ModuleInfo& module) {
  try {
    for (const LayoutRule& r : module.pytorch) r.check();
  } catch (const Error& e) {
    throw Error(e.code(),
                e.message() + " (in the PyTorch layout of " +
                    (module.kind.empty() ? std::string("a module") : std::string(module.kind)) +
                    ")");
  }
}

const LayoutRule* find_rule(PyTorchLayout rules, LayoutOp op, std::string_view LayoutRule::*name,
                            std::string_view value) {
  for (const LayoutRule& r : rules)
    if (r.op == op && r.*name == value) return &r;
  return nullptr;
}

}  // namespace

Value PyTorchAdapter::import_module(const ModuleInfo& module, const Value& node,
                                    AdapterContext& ctx) const {
  const PyTorchLayout rules = module.pytorch;
  if (rules.empty() || !node.is(Value::Kind::Dict)) return node;
  check_rules(module);
  TreeBuilder out;
  std::set<std::string> taken;  // the file's entries that fused rules placed

  // A fused rule at `index`: the fused tensor split into its parts' fields,
  // or PyTorch's separate entries moved there. True when the file had either.
  auto place = [&](const LayoutRule& r, std::optional<std::size_t> index) {
    const std::size_t n = r.part_count();
    const std::string name = torch_key(r.torch, index);
    const Value* fused = node.find(name);
    if (fused != nullptr && fused->is(Value::Kind::Tensor)) {
      for (std::size_t i = 0; i < n; ++i)
        out.put(field_path(r.ours, index, r.parts[i]),
                ctx.derive(chunk(fused->as_tensor(), static_cast<std::int64_t>(n),
                                 static_cast<std::int64_t>(i), name),
                           *fused));
      taken.insert(name);
      return true;
    }
    bool found = false;
    if (r.has_separate()) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::string part = torch_key(r.separate[i], index);
        if (const Value* v = node.find(part)) {
          out.put(field_path(r.ours, index, r.parts[i]), *v);
          taken.insert(part);
          found = true;
        }
      }
    }
    return found;
  };
  for (const LayoutRule& r : rules)
    if (r.op == LayoutOp::fused && !r.indexed()) place(r, std::nullopt);
  // Indexed rules: index by index, while the file has an entry of one of them.
  for (std::size_t k = 0;; ++k) {
    bool found = false;
    for (const LayoutRule& r : rules)
      if (r.op == LayoutOp::fused && r.indexed()) found = place(r, k) || found;
    if (!found) break;
  }

  for (const auto& [key, v] : node.pairs()) {
    std::string field = key_text(key);
    if (taken.count(field) != 0) continue;
    Value our_key = key;
    if (const LayoutRule* r = find_rule(rules, LayoutOp::renamed, &LayoutRule::torch, field)) {
      field = std::string(r->ours);
      our_key = Value::str(field);
    }
    const bool transpose =
        find_rule(rules, LayoutOp::transposed, &LayoutRule::ours, field) != nullptr &&
        v.is(Value::Kind::Tensor) && v.as_tensor().dim() == 2;
    out.put_entry(our_key, transpose ? ctx.derive(transpose2d(v.as_tensor()), v) : v);
  }
  return out.build();
}

Value PyTorchAdapter::export_module(const ModuleInfo& module, const Value& node) const {
  const PyTorchLayout rules = module.pytorch;
  if (rules.empty() || !node.is(Value::Kind::Dict)) return node;
  check_rules(module);
  Value out = Value::dict();
  std::set<std::string> fused_fields;  // our top-level fields that fused entries replace

  // A fused rule at `index`: its parts concatenated, or written apart under
  // PyTorch's separate names when they differ in shape (or some are missing).
  auto fuse = [&](const LayoutRule& r, std::optional<std::size_t> index) {
    const std::size_t n = r.part_count();
    std::vector<const Tensor*> parts(n);
    bool all = true, same_shape = true;
    for (std::size_t i = 0; i < n; ++i) {
      parts[i] = tensor_at(node, field_path(r.ours, index, r.parts[i]));
      all = all && parts[i] != nullptr;
    }
    for (std::size_t i = 1; all && i < n; ++i)
      same_shape = same_shape && parts[i]->shape() == parts[0]->shape();
    if (r.has_separate() && !(all && same_shape)) {
      for (std::size_t i = 0; i < n; ++i)
        if (parts[i] != nullptr)
          out.insert(Value::str(torch_key(r.separate[i], index)), Value::tensor(*parts[i]));
      return;
    }
    if (!all) return;
    const std::string name = torch_key(r.torch, index);
    out.insert(Value::str(name), Value::tensor(concat0(parts, name)));
  };

  std::size_t count = 0;  // the indices of indexed rules: the longest list they name
  for (const LayoutRule& r : rules) {
    if (r.op != LayoutOp::fused) continue;
    for (std::size_t i = 0; i < r.part_count(); ++i) {
      const std::vector<Segment> path = field_path(r.ours, std::nullopt, r.parts[i]);
      fused_fields.insert(path.front().key);
      const auto list =
          std::find_if(path.begin(), path.end(), [](const Segment& s) { return s.is_index; });
      if (list == path.end()) continue;
      const Value* items = value_at(node, path, static_cast<std::size_t>(list - path.begin()));
      if (items != nullptr && (items->is(Value::Kind::List) || items->is(Value::Kind::Dict)))
        count = std::max(count, items->size());
    }
  }
  for (const LayoutRule& r : rules)
    if (r.op == LayoutOp::fused && !r.indexed()) fuse(r, std::nullopt);
  for (std::size_t k = 0; k < count; ++k)
    for (const LayoutRule& r : rules)
      if (r.op == LayoutOp::fused && r.indexed()) fuse(r, k);

  for (const auto& [key, v] : node.pairs()) {
    const std::string field = key_text(key);
    if (fused_fields.count(field) != 0) continue;
    const bool transpose =
        find_rule(rules, LayoutOp::transposed, &LayoutRule::ours, field) != nullptr &&
        v.is(Value::Kind::Tensor);
    const LayoutRule* r = find_rule(rules, LayoutOp::renamed, &LayoutRule::ours, field);
    out.insert(r ? Value::str(std::string(r->torch)) : key,
               transpose ? Value::tensor(transpose2d(v.as_tensor()).contiguous()) : v);
  }
  return out;
}

PermuteAdapter& PermuteAdapter::add(std::string_view pattern, std::vector<std::int64_t> order) {
  std::vector<bool> seen(order.size(), false);
  for (std::int64_t d : order) {
    if (d < 0 || d >= static_cast<std::int64_t>(order.size()) || seen[static_cast<std::size_t>(d)])
      throw Error(ErrorCode::invalid_argument,
                  "permute order " + shape_to_string(order) + " is not a permutation");
    seen[static_cast<std::size_t>(d)] = true;
  }
  Rule r;
  r.match.include(pattern);
  r.order = std::move(order);
  rules_.push_back(std::move(r));
  return *this;
}

Tensor PermuteAdapter::import_tensor(std::string_view path, const Tensor& t) const {
  for (const auto& r : rules_)
    if (r.match.accepts(path)) {
      if (static_cast<std::size_t>(t.dim()) != r.order.size())
        throw Error(ErrorCode::shape_mismatch,
                    "permute order " + shape_to_string(r.order) + " for a tensor of shape " +
                        shape_to_string(t.shape()),
                    std::string(path));
      return t.permute(r.order);
    }
  return t;
}

Tensor PermuteAdapter::export_tensor(std::string_view path, const Tensor& t) const {
  for (const auto& r : rules_)
    if (r.match.accepts(path) && static_cast<std::size_t>(t.dim()) == r.order.size()) {
      std::vector<std::int64_t> inverse(r.order.size());
      for (std::size_t i = 0; i < r.order.size(); ++i)
        inverse[static_cast<std::size_t>(r.order[i])] = static_cast<std::int64_t>(i);
      return t.permute(inverse).contiguous();
    }
  return t;
}

}  // namespace torchport
