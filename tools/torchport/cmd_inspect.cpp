// torchport inspect FILE [--json] [--top-level-key K]

#include <algorithm>
#include <memory>

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
  std::string top_level_key;
};

int run_inspect(const InspectArgs& a) {
  TensorCatalog cat = open(a.file);
  if (!a.top_level_key.empty()) cat = cat.select(a.top_level_key);

  if (a.json) {
    nlohmann::ordered_json out;
    out["format"] = cat.format();
    auto& list = out["tensors"] = nlohmann::ordered_json::array();
    for (const auto& [name, t] : cat.tensors())
      list.push_back({{"name", name}, {"dtype", std::string(dtype_name(t.dtype()))},
                      {"shape", t.shape()}, {"bytes", t.nbytes()}});
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
  std::size_t wname = 4, wshape = 5;
  for (const auto& [name, t] : cat.tensors()) {
    wname = std::max(wname, name.size());
    wshape = std::max(wshape, shape_to_string(t.shape()).size());
  }
  wname = std::min<std::size_t>(wname, 80);
  if (!cat.empty()) {
    fmt::print("\n{:<{}}  {:<11}  {:<{}}  {:>12}\n", "name", wname, "dtype", "shape", wshape, "bytes");
    for (const auto& [name, t] : cat.tensors())
      fmt::print("{:<{}}  {:<11}  {:<{}}  {:>12}\n", name, wname, dtype_name(t.dtype()),
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
  sub->add_option("--top-level-key", args->top_level_key,
                  "Show only what lies under this key (e.g. state_dict)");
  sub->footer("Example:\n  torchport inspect resnet18.pt --top-level-key state_dict");
  return {sub, [args] { return run_inspect(*args); }};
}

}  // namespace torchport::cli
