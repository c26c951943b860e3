// The PyTorch layouts a record of a module keeps (kPyTorchLayoutKey), and
// to_pytorch_layout: such a record's tree in PyTorch's names and layout,
// module by module through PyTorchAdapter's export.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/export.hpp"

namespace torchport {
namespace {

using json = nlohmann::json;

json rule_json(const LayoutRule& r) {
  const auto names = [](const LayoutNames& n) {
    json a = json::array();
    for (std::string_view s : n)
      if (!s.empty()) a.push_back(std::string(s));
    return a;
  };
  switch (r.op) {
    case LayoutOp::renamed:
      return {"renamed", std::string(r.torch), std::string(r.ours)};
    case LayoutOp::transposed:
      return {"transposed", std::string(r.ours)};
    case LayoutOp::fused:
      return {"fused", std::string(r.torch), std::string(r.ours), names(r.parts),
              names(r.separate)};
  }
  return json::array();
}

// Layouts read back: the rules, with the strings their views point into.
struct ParsedLayouts {
  std::vector<std::unique_ptr<std::string>> strings;  // stable addresses
  std::vector<std::vector<LayoutRule>> layouts;
  std::map<std::string, std::size_t> modules;  // path -> index into layouts

  std::string_view keep(const json& j) {
    if (!j.is_string()) throw Error(ErrorCode::corrupt, "a layout rule's name is not a string");
    strings.push_back(std::make_unique<std::string>(j.get<std::string>()));
    return *strings.back();
  }
  LayoutNames names(const json& j) {
    LayoutNames n{};
    if (!j.is_array() || j.size() > n.size())
      throw Error(ErrorCode::corrupt, "a fused rule's names are not a list of at most 8");
    for (std::size_t i = 0; i < j.size(); ++i) n[i] = keep(j[i]);
    return n;
  }
  LayoutRule rule(const json& j) {
    if (!j.is_array() || j.empty() || !j[0].is_string())
      throw Error(ErrorCode::corrupt, "a layout rule is not [op, names...]");
    const std::string op = j[0].get<std::string>();
    // The makers check each rule as a module's declaration is checked
    // (Error(invalid_argument) naming what is wrong).
    if (op == "renamed" && j.size() == 3) return LayoutRule::renamed(keep(j[1]), keep(j[2]));
    if (op == "transposed" && j.size() == 2) return LayoutRule::transposed(keep(j[1]));
    if (op == "fused" && j.size() == 5)
      return LayoutRule::fused(keep(j[1]), keep(j[2]), names(j[3]), names(j[4]));
    throw Error(ErrorCode::corrupt, "unknown layout rule " + j.dump().substr(0, 80));
  }
};

ParsedLayouts parse(const std::string& text) {
  ParsedLayouts p;
  // The file's text: layouts nest three deep; refuse deeper nesting before
  // the parser (and the tree it builds) sees it.
  int depth = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      if (++depth > 8)
        throw Error(ErrorCode::corrupt, "the record's PyTorch layouts nest too deep");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("layouts") || !j.contains("modules") ||
      !j["layouts"].is_array() || !j["modules"].is_object())
    throw Error(ErrorCode::corrupt, "the record's PyTorch layouts do not parse");
  for (const json& rules : j["layouts"]) {
    if (!rules.is_array()) throw Error(ErrorCode::corrupt, "a layout is not a list of rules");
    std::vector<LayoutRule> list;
    for (const json& r : rules) list.push_back(p.rule(r));
    p.layouts.push_back(std::move(list));
  }
  for (const auto& [path, index] : j["modules"].items()) {
    if (!index.is_number_unsigned() || index.get<std::size_t>() >= p.layouts.size())
      throw Error(ErrorCode::corrupt, "module '" + path + "' names no layout");
    p.modules[path] = index.get<std::size_t>();
  }
  return p;
}

// `v` with every module the layouts name exported to PyTorch's layout,
// children first (as `to_value` exports them); `path` is v's key path.
Value convert(const Value& v, const std::string& path, const ParsedLayouts& p,
              const PyTorchAdapter& adapter, std::size_t& converted) {
  const auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  Value out;
  if (v.is(Value::Kind::Dict)) {
    out = v.is_ordered_dict() ? Value::ordered_dict() : Value::dict();
    for (const auto& [k, x] : v.pairs())
      out.insert(k,
                 k.is(Value::Kind::Str) ? convert(x, child(k.as_str()), p, adapter, converted) : x);
  } else if (v.is(Value::Kind::List)) {
    out = Value::list();
    std::size_t i = 0;
    for (const auto& x : v.items())
      out.append(convert(x, child(std::to_string(i++)), p, adapter, converted));
  } else {
    return v;
  }
  const auto m = p.modules.find(path);
  if (m == p.modules.end()) return out;
  ++converted;
  ModuleInfo info;
  info.pytorch = PyTorchLayout(p.layouts[m->second]);
  try {
    return adapter.export_module(info, out);
  } catch (const Error& e) {
    throw e.at_key(path);
  }
}

// The catalogue's tensors as nested dicts, one level per dot of a name.
Value nest(const TensorCatalog& catalog) {
  struct Node {
    std::vector<std::pair<std::string, std::unique_ptr<Node>>> children;  // in order
    detail::StringMap<std::size_t> index;                                 // name -> child
    std::optional<Tensor> tensor;
  };
  Node root;
  for (const auto& [name, t] : catalog.tensors()) {
    Node* n = &root;
    std::size_t from = 0;
    for (;;) {
      const std::size_t dot = name.find('.', from);
      const std::string part = name.substr(from, dot == std::string::npos ? dot : dot - from);
      auto [it, fresh] = n->index.emplace(part, n->children.size());
      if (fresh) n->children.emplace_back(part, std::make_unique<Node>());
      n = n->children[it->second].second.get();
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    n->tensor = t;
  }
  const std::function<Value(const Node&)> build = [&](const Node& n) {
    if (n.tensor && n.children.empty()) return Value::tensor(*n.tensor);
    Value d = Value::dict();
    for (const auto& [k, c] : n.children) d.insert(Value::str(k), build(*c));
    return d;
  };
  return build(root);
}

}  // namespace

std::string pytorch_layout_text(const std::vector<std::pair<std::string, PyTorchLayout>>& layouts) {
  json out = {{"layouts", json::array()}, {"modules", json::object()}};
  std::map<const LayoutRule*, std::size_t> index;  // one list per module type
  for (const auto& [path, rules] : layouts) {
    auto [it, fresh] = index.emplace(rules.data(), index.size());
    if (fresh) {
      json list = json::array();
      for (const LayoutRule& r : rules) list.push_back(rule_json(r));
      out["layouts"].push_back(std::move(list));
    }
    out["modules"][path] = it->second;
  }
  return out.dump();
}

TensorCatalog to_pytorch_layout(const TensorCatalog& catalog) try {
  const auto& meta = catalog.metadata();
  const auto get = [&](const std::string& k) {
    const auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  // Only our records of a module are in our layout: a file torch wrote,
  // or a record made from one ("torchport.layout": "pytorch"), is PyTorch's.
  if (!has_torchport_layout(catalog.format()) || get("torchport.layout") == "pytorch")
    return catalog;
  const std::string text = get(std::string(kPyTorchLayoutKey));
  if (text.empty()) {
    if (get("torchport.type").empty()) return catalog;  // no module: nothing to lay out
    throw Error(ErrorCode::unsupported,
                "a record of the module '" + get("torchport.type") +
                    "' in torchport's layout (Linear weights [in, out], norms' gamma and beta) "
                    "that does not say where PyTorch's layout differs (written by an earlier "
                    "torchport): load it into its module and save it with "
                    "save(to_pytorch_state_dict(module), ...), or save the record again");
  }
  const ParsedLayouts layouts = parse(text);
  const PyTorchAdapter adapter;
  std::size_t converted = 0;
  // A record written flat (a catalogue's tensors by name) is nested again
  // by its names' dots, as the module's tree had them.
  Value tree = catalog.root();
  bool flat = false;
  if (tree.is(Value::Kind::Dict))
    for (const auto& [k, x] : tree.pairs())
      flat = flat || (k.is(Value::Kind::Str) && k.as_str().find('.') != std::string::npos);
  if (flat) tree = nest(catalog);
  Value root = convert(tree, "", layouts, adapter, converted);
  if (converted != layouts.modules.size())
    throw Error(ErrorCode::unsupported,
                "the record keeps the PyTorch layouts of " +
                    std::to_string(layouts.modules.size()) + " modules but holds " +
                    std::to_string(converted) +
                    " of them where it says (renamed or filtered since it was saved?): convert "
                    "it to PyTorch's layout before renaming");
  std::map<std::string, std::string> out_meta = meta;
  out_meta.erase(std::string(kPyTorchLayoutKey));
  out_meta["torchport.layout"] = "pytorch";
  TensorCatalog out =
      TensorCatalog::from_value(catalog.format(), std::move(root), {}, std::move(out_meta));
  out.set_format_name(std::string(catalog.format_name()));
  return out;
} catch (...) {
  rethrow_as_error("to_pytorch_layout");
}

}  // namespace torchport
