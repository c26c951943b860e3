// torchport inspect FILE [--json | --tree [--depth N]] [--top-level-key K]

#include <algorithm>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "torchport/formats/open.hpp"

namespace torchport::cli {
namespace {

struct InspectArgs {
  std::string file;
  bool json = false;
  bool tree = false;
  int depth = 0;
  std::string top_level_key;
};

// The names unflattened at their dots: the nested module structure, each
// subtree with its parameter count and bytes, children in file order.
struct Node {
  std::string name;
  std::uint64_t params = 0;
  std::uint64_t bytes = 0;
  const Tensor* tensor = nullptr;  // leaves
  std::vector<std::unique_ptr<Node>> children;
  std::unordered_map<std::string, std::size_t> index;

  Node& child(std::string_view part) {
    const auto [it, fresh] = index.try_emplace(std::string(part), children.size());
    if (fresh) {
      children.push_back(std::make_unique<Node>());
      children.back()->name = std::string(part);
    }
    return *children[it->second];
  }
};

Node build_tree(const TensorCatalog& cat) {
  Node root;
  for (const auto& [name, t] : cat.tensors()) {
    Node* n = &root;
    const auto numel = static_cast<std::uint64_t>(t.numel());
    root.params += numel;
    root.bytes += t.nbytes();
    std::size_t start = 0;
    for (;;) {
      const std::size_t dot = name.find('.', start);
      n = &n->child(std::string_view(name).substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      n->params += numel;
      n->bytes += t.nbytes();
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    n->tensor = &t;
  }
  return root;
}

struct TreeLine {
  std::string label;  // prefix + name
  const Node* node;
};

void collect(const Node& n, const std::string& prefix, int level, int max_depth, std::vector<TreeLine>& out) {
  for (std::size_t i = 0; i < n.children.size(); ++i) {
    const Node& c = *n.children[i];
    const bool last = i + 1 == n.children.size();
    out.push_back({prefix + (last ? "└─ " : "├─ ") + c.name, &c});
    if (max_depth == 0 || level + 1 < max_depth) collect(c, prefix + (last ? "   " : "│  "), level + 1, max_depth, out);
  }
}

// Display width of UTF-8 text (the box-drawing characters are one column).
std::size_t columns(std::string_view s) {
  std::size_t n = 0;
  for (const char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

void print_tree(const TensorCatalog& cat, int max_depth) {
  const bool colour = colour_enabled(1);
  const Node root = build_tree(cat);
  std::vector<TreeLine> lines;
  collect(root, "", 0, max_depth, lines);
  std::size_t width = 5;  // "(all)"
  for (const auto& l : lines) width = std::max(width, columns(l.label));
  fmt::print("\n{}{}  {:>14}  {:>10}\n", styled("(all)", Style::bold, colour), std::string(width - 5, ' '),
             grouped(root.params), human_bytes(root.bytes));
  for (const auto& l : lines) {
    const Node& n = *l.node;
    std::string label = l.label;
    if (n.tensor == nullptr) {
      const auto cut = label.size() - n.name.size();
      label = label.substr(0, cut) + styled(n.name, Style::bold, colour);
    }
    std::string detail;
    if (n.tensor != nullptr)
      detail = fmt::format("  {} {}", dtype_name(n.tensor->dtype()), shape_to_string(n.tensor->shape()));
    fmt::print("{}{}  {:>14}  {:>10}{}\n", label, std::string(width - columns(l.label), ' '), grouped(n.params),
               human_bytes(n.bytes), styled(detail, Style::dim, colour));
  }
}

// The dtype column: torch's quantized dtype ("qint8") for a quantized
// tensor, whose elements are that dtype's integers.
std::string dtype_label(const Tensor& t) {
  if (t.is_sparse())
    return std::string(dtype_name(t.dtype())) + " " +
           std::string(SparseParts::layout_name(t.sparse()->layout)).substr(7);  // "F32 coo"
  return t.is_quantized() ? std::string(Quantization::qdtype_name(t.dtype()))
                          : std::string(dtype_name(t.dtype()));
}

// A quantized tensor's quantizer, for --json.
nlohmann::ordered_json quantizer_json(const Tensor& t) {
  const Quantization& q = *t.quantization();
  nlohmann::ordered_json j = {{"qdtype", Quantization::qdtype_name(t.dtype())},
                              {"scheme", Quantization::scheme_name(q.scheme)}};
  if (q.scheme == Quantization::Scheme::per_tensor_affine) {
    j["scale"] = q.scale;
    j["zero_point"] = q.zero_point;
  } else {
    j["axis"] = q.axis;
    j["channels"] = q.scales.numel();
  }
  return j;
}

int run_inspect(const InspectArgs& a) {
  TensorCatalog cat = open(a.file);
  if (!a.top_level_key.empty()) cat = cat.select(a.top_level_key);

  if (a.json) {
    nlohmann::ordered_json out;
    out["format"] = cat.format();
    auto& list = out["tensors"] = nlohmann::ordered_json::array();
    for (const auto& [name, t] : cat.tensors()) {
      list.push_back({{"name", name}, {"dtype", std::string(dtype_name(t.dtype()))},
                      {"shape", t.shape()}, {"bytes", t.nbytes()}});
      if (t.is_quantized()) list.back()["quantized"] = quantizer_json(t);
      if (t.is_sparse())
        list.back()["sparse"] = {
            {"layout", SparseParts::layout_name(t.sparse()->layout)},
            {"nnz", t.sparse()->values.dim() ? t.sparse()->values.size(0) : 0}};
    }
    const Value values = cat.values();
    out["values"] = nlohmann::ordered_json::parse(to_json(values.is_none() ? Value::dict() : values));
    if (!cat.metadata().empty()) out["metadata"] = cat.metadata();
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    return 0;
  }

  std::uint64_t params = 0;
  for (const auto& t : cat.tensors()) params += static_cast<std::uint64_t>(t.tensor.numel());
  fmt::print("{}: {}, {} tensors, {} ({} elements)\n", a.file, cat.format(), cat.size(),
             human_bytes(cat.total_bytes()), grouped(params));
  if (a.tree) {
    print_tree(cat, a.depth);
    return 0;
  }
  std::size_t wname = 4, wshape = 5;
  for (const auto& [name, t] : cat.tensors()) {
    wname = std::max(wname, name.size());
    wshape = std::max(wshape, shape_to_string(t.shape()).size());
  }
  wname = std::min<std::size_t>(wname, 80);
  if (!cat.empty()) {
    fmt::print("\n{:<{}}  {:<11}  {:<{}}  {:>12}\n", "name", wname, "dtype", "shape", wshape, "bytes");
    for (const auto& [name, t] : cat.tensors())
      fmt::print("{:<{}}  {:<11}  {:<{}}  {:>12}\n", name, wname, dtype_label(t),
                 shape_to_string(t.shape()), wshape, grouped(t.nbytes()));
  }
  const Value values = cat.values();
  if (!values.is_none() && !(values.is(Value::Kind::Dict) && values.size() == 0))
    fmt::print("\nvalues: {}\n", values.repr(16));
  for (const auto& [k, v] : cat.metadata()) fmt::print("metadata {}: {}\n", k, v);
  return 0;
}

}  // namespace

Command add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "List the tensors and values of a checkpoint");
  sub->add_option("file", args->file, "Checkpoint file (any format torchport reads)")
      ->required()
      ->check(CLI::ExistingPath);
  sub->add_flag("--json", args->json,
                "Print one JSON object: {format, tensors: [{name, dtype, shape, bytes}], values}");
  sub->add_flag("--tree", args->tree,
                "Show the nested module structure (names split at their dots) with each subtree's "
                "parameter count and bytes");
  sub->add_option("--depth", args->depth, "With --tree: show this many levels (default 0: all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--top-level-key", args->top_level_key,
                  "Show only what lies under this key (e.g. state_dict)");
  sub->footer(
      "Examples:\n  torchport inspect resnet18.pt --top-level-key state_dict\n"
      "  torchport inspect resnet18.pt --tree --depth 2");
  return {sub, [args] { return run_inspect(*args); }};
}

}  // namespace torchport::cli
