// torchport inspect FILE [--json | --tree [--depth N]] [--top-level-key K]
//                        [--shard RANK/WORLD --plan FILE]

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/module_tree.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/record/shard_plan.hpp"
#include "torchport/record/shard_reads.hpp"

namespace torchport::cli {
namespace {

struct InspectArgs {
  std::string file;
  bool json = false;
  bool tree = false;
  int depth = 0;
  std::string top_level_key;
  std::string shard;  // "RANK/WORLD"
  std::string plan;   // the plan file
  bool quiet = false;
  bool verify = false;
  Trust trust;
};

struct TreeLine {
  std::string label;  // prefix + name
  std::size_t node;
};

void collect(const ModuleTree& tree, std::size_t node, const std::string& prefix, int level,
             int max_depth, std::vector<TreeLine>& out) {
  const auto& children = tree.nodes[node].children;
  for (std::size_t i = 0; i < children.size(); ++i) {
    const std::size_t c = children[i];
    const bool last = i + 1 == children.size();
    out.push_back({prefix + (last ? "└─ " : "├─ ") + tree.nodes[c].name, c});
    if (max_depth == 0 || level + 1 < max_depth)
      collect(tree, c, prefix + (last ? "   " : "│  "), level + 1, max_depth, out);
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
  const ModuleTree tree = module_tree(cat);
  std::vector<TreeLine> lines;
  collect(tree, 0, "", 0, max_depth, lines);
  std::size_t width = 5;  // "(all)"
  for (const auto& l : lines) width = std::max(width, columns(l.label));
  fmt::print("\n{}{}  {:>14}  {:>10}\n", styled("(all)", Style::bold, colour),
             std::string(width - 5, ' '), grouped(tree.root().params),
             human_bytes(tree.root().bytes));
  for (const auto& l : lines) {
    const ModuleTree::Node& n = tree.nodes[l.node];
    const Tensor* t = n.tensor == ModuleTree::npos ? nullptr : &cat.tensors()[n.tensor].tensor;
    std::string label = l.label;
    if (t == nullptr) {
      const auto cut = label.size() - n.name.size();
      label = label.substr(0, cut) + styled(n.name, Style::bold, colour);
    }
    std::string detail;
    if (t != nullptr)
      detail = fmt::format("  {} {}", dtype_name(t->dtype()), shape_to_string(t->shape()));
    fmt::print("{}{}  {:>14}  {:>10}{}\n", label, std::string(width - columns(l.label), ' '),
               grouped(n.params), human_bytes(n.bytes), styled(detail, Style::dim, colour));
  }
}

// --shard RANK/WORLD --plan FILE: what each tensor's rule gives the rank,
// and the bytes every rank reads (a tensor no rule matches is read whole).
std::pair<int, int> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  int rank = -1, world = 0;
  try {
    if (slash != std::string::npos) {
      std::size_t n1 = 0, n2 = 0;
      rank = std::stoi(s.substr(0, slash), &n1);
      world = std::stoi(s.substr(slash + 1), &n2);
      if (n1 != slash || n2 != s.size() - slash - 1) world = 0;
    }
  } catch (const std::exception&) {
    world = 0;
  }
  if (world < 1 || rank < 0 || rank >= world)
    throw UsageError("--shard takes RANK/WORLD with 0 <= RANK < WORLD, not '" + s + "'");
  return {rank, world};
}

int run_shard(const TensorCatalog& cat, const InspectArgs& a) {
  const auto [rank, world] = parse_shard(a.shard);
  note_input(a.plan);
  const ShardPlan plan = ShardPlan::read_file(a.plan);
  const ShardReads reads = shard_reads(cat, plan, rank, world);
  const std::vector<LoadReport::ShardRead>& lines = reads.reads;
  const std::vector<std::uint64_t>& per_rank = reads.bytes_per_rank;
  const std::uint64_t total = cat.total_bytes();
  if (a.json) {
    nlohmann::ordered_json out;
    out["format"] = cat.format_name();
    out["rank"] = rank;
    out["world"] = world;
    auto& list = out["tensors"] = nlohmann::ordered_json::array();
    for (const auto& l : lines)
      list.push_back({{"name", l.key},
                      {"kind", l.kind},
                      {"rule", l.rule},
                      {"shape", l.file_shape},
                      {"part", l.shape},
                      {"bytes", l.bytes},
                      {"file_bytes", l.file_bytes}});
    out["bytes"] = reads.bytes();
    out["total_bytes"] = total;
    out["bytes_per_rank"] = per_rank;
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    return 0;
  }
  fmt::print("{}: {}, {}, {}; rank {} of {} by {} ({})\n", display_name(a.file), cat.format_name(),
             counted(cat.size(), "tensor"), human_bytes(total), rank, world, a.plan,
             counted(plan.rules().size(), "rule"));
  std::size_t wname = 4, wshape = 5;
  for (const auto& l : lines) {
    wname = std::max(wname, l.key.size());
    wshape = std::max(wshape,
                      shape_to_string(l.file_shape).size() + 4 + shape_to_string(l.shape).size());
  }
  wname = std::min<std::size_t>(wname, 80);
  if (!lines.empty()) {
    fmt::print("\n{:<{}}  {:<9}  {:<{}}  {:>12}  {}\n", "name", wname, "split",
               "shape -> rank's part", wshape, "bytes read", "rule");
    for (const auto& l : lines)
      fmt::print("{:<{}}  {:<9}  {:<{}}  {:>12}  {}\n", l.key, wname, l.kind,
                 shape_to_string(l.file_shape) + " -> " + shape_to_string(l.shape), wshape,
                 grouped(l.bytes), l.rule.empty() ? "(no rule: whole)" : l.rule);
  }
  const std::uint64_t mine = reads.bytes();
  fmt::print("\nrank {} reads {} of {} ({:.1f}%)\n", rank, human_bytes(mine), human_bytes(total),
             total ? 100.0 * static_cast<double>(mine) / static_cast<double>(total) : 0.0);
  fmt::print("bytes per rank:");
  for (int r = 0; r < world; ++r)
    fmt::print(" {}={}", r, grouped(per_rank[static_cast<std::size_t>(r)]));
  fmt::print("\n");
  return 0;
}

// The dtype column: torch's quantized dtype ("qint8") for a quantized
// tensor, whose elements are that dtype's integers.
std::string dtype_label(const Tensor& t) {
  if (t.is_meta()) return std::string(dtype_name(t.dtype())) + " meta";  // no data
  if (t.is_sparse())
    return std::string(dtype_name(t.dtype())) + " " +
           std::string(SparseParts::layout_name(t.sparse()->layout)).substr(7);  // "F32 coo"
  if (t.is_quantized())
    return std::string(Quantization::qdtype_name(t.dtype(), t.quantization()->bits));
  return std::string(dtype_name(t.dtype())) + (t.is_conj() ? " conj" : "") +
         (t.is_neg() ? " neg" : "");  // listed with torch's bits, read resolved
}

// A quantized tensor's quantizer, for --json.
nlohmann::ordered_json quantizer_json(const Tensor& t) {
  const Quantization& q = *t.quantization();
  nlohmann::ordered_json j = {
      {"qdtype", Quantization::qdtype_name(t.dtype(), t.quantization()->bits)},
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

// The values line: a training checkpoint's epoch, args and optimizer
// settings in full; at most kValuesChars characters of anything larger,
// saying how to see the rest. A whole pickled nn.Module is named, not
// printed: its tensors are the listing, and its attributes (hooks, flags,
// submodules) run to tens of thousands of characters.
constexpr std::size_t kValuesChars = 1000;
std::string values_line(const Value& values) {
  if (values.is(Value::Kind::Object)) {
    const Value& state = values.as_object().state;
    if (state.is(Value::Kind::Dict) && state.find("_parameters") && state.find("_modules"))
      return "a pickled torch.nn module, " + values.as_object().cls.qualified() +
             " (its tensors are listed above; --json shows its attributes)";
  }
  std::string text = values.repr(16, kValuesChars);
  if (text.size() >= kValuesChars || text.find("...") != std::string::npos)
    text += " (shortened; --json shows every value)";
  return text;
}

int run_inspect(const InspectArgs& a) {
  // The command line first: a usage error before any input is read.
  if (!a.shard.empty() || !a.plan.empty()) {
    if (a.shard.empty()) throw UsageError("--plan needs --shard RANK/WORLD");
    if (a.plan.empty()) throw UsageError("--shard needs --plan FILE");
    (void)parse_shard(a.shard);
  }
  OpenOptions options;
  options.verify_crc = a.verify;
  apply_trust(a.trust, options);
  TensorCatalog cat = open_input(a.file, options);
  if (!a.top_level_key.empty()) cat = cat.select(a.top_level_key);
  if (a.quiet) return 0;  // it reads: the exit status says so
  if (!a.shard.empty()) return run_shard(cat, a);

  if (a.json) {
    nlohmann::ordered_json out;
    out["format"] = cat.format_name();
    auto& list = out["tensors"] = nlohmann::ordered_json::array();
    for (const auto& [name, t] : cat.tensors()) {
      list.push_back({{"name", name},
                      {"dtype", std::string(dtype_name(t.dtype()))},
                      {"shape", t.shape()},
                      {"bytes", t.nbytes()}});
      if (t.is_quantized()) list.back()["quantized"] = quantizer_json(t);
      if (t.is_meta()) list.back()["meta"] = true;
      if (t.is_conj()) list.back()["conj"] = true;
      if (t.is_neg()) list.back()["neg"] = true;
      if (t.is_sparse())
        list.back()["sparse"] = {
            {"layout", SparseParts::layout_name(t.sparse()->layout)},
            {"nnz", t.sparse()->values.dim() ? t.sparse()->values.size(0) : 0}};
    }
    // The values are printed by to_json and spliced in as text, after the
    // tensors and before the metadata: parsing them back into an
    // ordered_json (whose object lookup is a linear search) made a dict of
    // n keys cost n^2. A raw newline never occurs inside a JSON string, so
    // indenting every line break by two spaces nests the text.
    out["values"] = nullptr;
    if (!cat.metadata().empty()) out["metadata"] = cat.metadata();
    const std::string text =
        out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    const std::string_view marker = "\n  \"values\": null";
    const std::size_t at = text.find(marker);  // the first top-level key after the tensors
    const Value values = cat.values();
    std::string nested = to_json(values.is_none() ? Value::dict() : values, 2);
    std::string shifted;
    shifted.reserve(nested.size() + nested.size() / 8);
    for (const char c : nested) {
      shifted += c;
      if (c == '\n') shifted += "  ";
    }
    fmt::print("{}{}{}\n", std::string_view(text).substr(0, at + marker.size() - 4), shifted,
               std::string_view(text).substr(at + marker.size()));
    return 0;
  }

  std::uint64_t params = 0;
  for (const auto& t : cat.tensors()) params += static_cast<std::uint64_t>(t.tensor.numel());
  fmt::print("{}: {}, {}, {} ({} {})\n", display_name(a.file), cat.format_name(),
             counted(cat.size(), "tensor"), human_bytes(cat.total_bytes()), grouped(params),
             params == 1 ? "element" : "elements");
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
    fmt::print("\n{:<{}}  {:<11}  {:<{}}  {:>12}\n", "name", wname, "dtype", "shape", wshape,
               "bytes");
    for (const auto& [name, t] : cat.tensors())
      fmt::print("{:<{}}  {:<11}  {:<{}}  {:>12}\n", name, wname, dtype_label(t),
                 shape_to_string(t.shape()), wshape, grouped(t.nbytes()));
  }
  const Value values = cat.values();
  if (!values.is_none() && !(values.is(Value::Kind::Dict) && values.size() == 0))
    fmt::print("\nvalues: {}\n", values_line(values));
  for (const auto& [k, v] : cat.metadata()) fmt::print("metadata {}: {}\n", k, v);
  return 0;
}

}  // namespace

Command add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "List the tensors and values of a checkpoint");
  sub->add_option("file", args->file,
                  "Checkpoint file (any format torchport reads; '-': standard input)")
      ->required();
  sub->add_flag("--verify", args->verify,
                "Check every zip entry's CRC-32 (torch's zip files carry them); a mismatch names "
                "the entries");
  sub->add_flag("-q,--quiet", args->quiet,
                "Print nothing but errors: the exit status says whether the file reads");
  sub->add_flag("--json", args->json,
                "Print one JSON object: {format, tensors: [{name, dtype, shape, bytes}], values}");
  sub->add_flag("--tree", args->tree,
                "Show the nested module structure (names split at their dots) with each subtree's "
                "parameter count and bytes");
  sub->add_option("--depth", args->depth, "With --tree: show this many levels (default 0: all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--top-level-key", args->top_level_key,
                  "Show only what lies under this key (e.g. state_dict)");
  sub->add_option(
      "--shard", args->shard,
      "RANK/WORLD: with --plan, show what this rank of a tensor-parallel model reads of each "
      "tensor, and the bytes every rank reads");
  sub->add_option(
      "--plan", args->plan,
      "Sharding plan file: one rule a line, 'REGEX -> column(DIM) | row(DIM) | replicate' "
      "(see docs/guide/11-tensor-parallel.md)");
  add_trust_options(sub, args->trust);
  sub->footer(
      "Examples:\n  torchport inspect resnet18.pt --top-level-key state_dict\n"
      "  torchport inspect resnet18.pt --tree --depth 2\n"
      "  torchport inspect llama/ --shard 1/4 --plan llama.plan");
  return {sub, [args] { return run_inspect(*args); }};
}

}  // namespace torchport::cli
