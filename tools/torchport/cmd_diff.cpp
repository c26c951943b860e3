// torchport diff A B [--atol X] [--rtol Y] [--json] [--top-level-key K]
//                    [--remap PATTERN REPLACEMENT]...
//
// Exit status: 0 when A and B hold the same tensor names, shapes and values
// (bitwise, and the same dtypes, when both tolerances are 0, the default;
// else every element within atol + rtol * |b|), 1 when they differ, 2 on
// usage errors and inputs that cannot be read.

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "progress.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/compare.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/transform.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/remap.hpp"

namespace torchport::cli {
namespace {

struct DiffArgs {
  std::string a, b;
  double atol = 0, rtol = 0;
  bool json = false;
  bool quiet = false;
  std::string top_level_key;
  std::vector<std::pair<std::string, std::string>> remaps;
  Trust trust;
};

// Why a pair's elements were not compared.
std::string_view not_compared(ValueCheck c) {
  switch (c) {
    case ValueCheck::shape_differs:
      return "shapes differ";
    case ValueCheck::complex_real:
      return "complex against real";
    case ValueCheck::no_data:
      return "a meta tensor has no values";
    case ValueCheck::raw_bits:
      return "raw bits against numbers or other bits";
    case ValueCheck::compared:
      break;
  }
  return "not comparable";
}

nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// The C-order index `flat` of a tensor of `shape`, one entry per dimension.
std::vector<std::uint64_t> index_of(std::uint64_t flat, const Shape& shape) {
  std::vector<std::uint64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const auto n = static_cast<std::uint64_t>(shape[d]);
    idx[d] = n == 0 ? 0 : flat % n;
    flat = n == 0 ? 0 : flat / n;
  }
  return idx;
}

// An element as diff prints it: nan, inf, -inf or %.9g; complex as (re, im).
std::string element(const std::array<double, 2>& v, bool complex) {
  const auto one = [](double x) {
    return std::isnan(x) ? std::string("nan") : fmt::format("{:.9g}", x);
  };
  return complex ? "(" + one(v[0]) + ", " + one(v[1]) + ")" : one(v[0]);
}

void print_json(const DiffArgs& args, const Comparison& c) {
  nlohmann::ordered_json out;
  out["equal"] = c.equal;
  out["a"] = args.a;
  out["b"] = args.b;
  out["atol"] = c.options.atol;
  out["rtol"] = c.options.rtol;
  out["only_in_a"] = c.only_in_a;
  out["only_in_b"] = c.only_in_b;
  auto& list = out["tensors"] = nlohmann::ordered_json::array();
  for (const auto& d : c.tensors) {
    nlohmann::ordered_json j;
    j["name"] = d.name;
    j["equal"] = d.equal;
    j["dtype_a"] = std::string(dtype_name(d.a.dtype));
    j["dtype_b"] = std::string(dtype_name(d.b.dtype));
    j["shape_a"] = d.a.shape;
    j["shape_b"] = d.b.shape;
    if (d.comparable()) {
      j["mismatched"] = d.mismatched;
      j["numel"] = d.numel;
      j["max_abs"] = number(d.max_abs);
      j["max_rel"] = number(d.max_rel);
      j["nan_a"] = d.a.nans;
      j["nan_b"] = d.b.nans;
      j["inf_a"] = d.a.infinities;
      j["inf_b"] = d.b.infinities;
      if (d.first_mismatch) {
        const bool cplx = is_complex(d.a.dtype) || is_complex(d.b.dtype);
        j["first_mismatch"] = {{"index", index_of(*d.first_mismatch, d.a.shape)},
                               {"a", element(d.first_a, cplx)},
                               {"b", element(d.first_b, cplx)}};
      }
    }
    list.push_back(std::move(j));
  }
  fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

void print_text(const Comparison& c) {
  const bool exact = c.options.exact();
  const bool colour = colour_enabled(1);
  for (const auto& n : c.only_in_a) fmt::print("only in A: {}\n", n);
  for (const auto& n : c.only_in_b) fmt::print("only in B: {}\n", n);
  // With a tolerance, the tensors within it are not listed one by one: one
  // line says how many, how close, and which dtype changes they carry.
  std::uint64_t within = 0;
  double within_abs = 0, within_rel = 0;
  std::map<std::pair<DType, DType>, std::uint64_t> within_dtypes;
  for (const auto& d : c.tensors) {
    if (!d.comparable()) {
      if (d.equal) continue;  // two meta tensors of one shape
      fmt::print("{}: {} vs {}: not compared ({})\n", d.name, d.a.description(), d.b.description(),
                 not_compared(d.check));
      continue;
    }
    if (d.equal && !exact) {
      ++within;
      within_abs = std::max(within_abs, d.max_abs);
      within_rel = std::max(within_rel, d.max_rel);
      if (d.dtype_differs()) ++within_dtypes[{d.a.dtype, d.b.dtype}];
      continue;
    }
    if (d.equal && !d.dtype_differs()) continue;
    std::string line = fmt::format("{}: ", d.name);
    if (d.dtype_differs())
      line += fmt::format("dtype {} vs {}; ", dtype_name(d.a.dtype), dtype_name(d.b.dtype));
    if (d.mismatched > 0)
      line += fmt::format("{} of {} elements differ", d.mismatched, d.numel);
    else
      line += exact ? "values equal" : "values within tolerance";
    if (d.first_mismatch) {
      const bool cplx = is_complex(d.a.dtype) || is_complex(d.b.dtype);
      line += fmt::format(" (first at [{}]: {} vs {})",
                          fmt::join(index_of(*d.first_mismatch, d.a.shape), ", "),
                          element(d.first_a, cplx), element(d.first_b, cplx));
    }
    if (!is_bits(d.a.dtype))  // raw bits have no magnitude
      line += fmt::format(", max abs {:.3g}, max rel {:.3g}", d.max_abs, d.max_rel);
    if (d.a.nans + d.b.nans > 0) line += fmt::format("; NaN: {} in A, {} in B", d.a.nans, d.b.nans);
    if (d.a.infinities + d.b.infinities > 0)
      line += fmt::format("; inf: {} in A, {} in B", d.a.infinities, d.b.infinities);
    fmt::print("{}\n", d.mismatched > 0 ? styled(line, Style::red, colour) : line);
  }
  if (within > 0) {
    std::string line = fmt::format("{} within tolerance (max abs {:.3g}, max rel {:.3g})",
                                   counted(within, "tensor"), within_abs, within_rel);
    for (const auto& [dtypes, n] : within_dtypes)
      line += fmt::format("; dtype {} vs {} in {}", dtype_name(dtypes.first),
                          dtype_name(dtypes.second), n);
    fmt::print("{}; --json lists each\n", line);
  }
  fmt::print("{}: {} of {} common tensors {}; {} only in A, {} only in B\n",
             styled(c.equal ? "equal" : "different", c.equal ? Style::green : Style::red, colour),
             c.tensors.size() - c.unequal, c.tensors.size(),
             exact ? "identical" : "within tolerance", c.only_in_a.size(), c.only_in_b.size());
}

int run_diff(const DiffArgs& args) {
  CompareOptions options;
  options.atol = args.atol;
  options.rtol = args.rtol;
  try {
    options.validate();  // before any input is read: a usage error
  } catch (const Error& e) {
    throw UsageError(e.message());
  }
  if (is_stdin(args.a) && is_stdin(args.b))
    throw UsageError("only one input can be '-' (standard input is read once)");
  // The same names on both sides, as convert and load make them: the
  // tensors under --top-level-key (in each input that has it), renamed by
  // the --remap rules (a DataParallel 'module.' prefix, say).
  TransformOptions t;
  usage_checked([&] {
    auto remap = std::make_shared<KeyRemap>();
    for (const auto& [pattern, replacement] : args.remaps) remap->add(pattern, replacement);
    if (!remap->empty()) t.rename = [remap](std::string_view k) { return remap->apply(k); };
  });
  // A record of a module is compared in PyTorch's names and layout, as
  // convert writes it (bn.weight, not bn.gamma), so it compares with the
  // checkpoint it was loaded from.
  const auto as_torch = [](TensorCatalog cat) {
    try {
      return to_pytorch_layout(cat);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::unsupported) throw;
      return cat;  // a record that cannot say: compared as it is
    }
  };
  OpenOptions open_options;
  apply_trust(args.trust, open_options);
  TensorCatalog a = as_torch(open_input(args.a, open_options)),
                b = as_torch(open_input(args.b, open_options));
  if (!args.top_level_key.empty()) {
    const bool in_a = a.root().find(args.top_level_key) != nullptr;
    const bool in_b = b.root().find(args.top_level_key) != nullptr;
    if (!in_a && !in_b)
      throw Error(ErrorCode::missing_key,
                  "neither input has '" + args.top_level_key +
                      "' at the top (torchport inspect --tree --depth 1 shows what they have)",
                  {}, std::nullopt, display_name(args.a));
    for (auto [cat, has, path] : {std::tuple{&a, in_a, &args.a}, std::tuple{&b, in_b, &args.b}}) {
      if (has)
        *cat = cat->select(args.top_level_key);
      else if (!args.quiet)
        fmt::print(stderr, "torchport: {}: no '{}' at the top: compared whole\n",
                   display_name(*path), args.top_level_key);
    }
  }
  if (t.rename) {
    a = transform(a, t);
    b = transform(b, t);
  }
  ProgressBar bar("comparing");  // on a terminal, once the work takes more than a second
  if (!args.quiet)
    options.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  const Comparison c = compare(a, b, options);
  bar.finish();
  if (args.quiet) return c.equal ? 0 : 1;
  if (args.json)
    print_json(args, c);
  else
    print_text(c);
  return c.equal ? 0 : 1;
}

}  // namespace

Command add_diff(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Compare the tensors of two checkpoints (exit 0 equal, 1 different)");
  sub->add_option("a", args->a, "First checkpoint (any format torchport reads)")->required();
  sub->add_option("b", args->b, "Second checkpoint ('-': standard input)")->required();
  sub->add_option("--atol", args->atol, "Absolute tolerance (default 0: compare bitwise)");
  sub->add_option("--rtol", args->rtol, "Relative tolerance, times |b| (default 0)");
  sub->add_flag("--json", args->json, "Print one JSON object instead of text");
  sub->add_option("--top-level-key", args->top_level_key,
                  "Compare what lies under this key (e.g. model_state_dict) in each input that "
                  "has it; an input without it is compared whole");
  sub->add_option("--remap", args->remaps,
                  "Rename the keys of both inputs before comparing: PCRE2 PATTERN and "
                  "REPLACEMENT, as convert's (e.g. '^module\\.' '' for a DataParallel "
                  "checkpoint)")
      ->type_size(2)
      ->allow_extra_args(false);
  sub->add_flag("-q,--quiet", args->quiet, "Print nothing but errors: the exit status answers");
  add_trust_options(sub, args->trust);
  sub->footer(
      "With both tolerances 0, tensors are equal when dtype, shape and every bit match.\n"
      "Otherwise values are compared in f64: |a - b| <= atol + rtol * |b|; a dtype change is\n"
      "reported but only the values decide. NaN equals NaN only bitwise. Raw bits (torch's bits\n"
      "dtypes) compare byte for byte.\n"
      "Example:\n  torchport diff model.pt model.safetensors\n"
      "  torchport diff model.pt model-bf16.safetensors --atol 1e-2 --rtol 1e-2\n"
      "  torchport diff ddp_checkpoint.pt model.pt --top-level-key state_dict --remap '^module\\.' "
      "''");
  return {sub, [args] { return run_diff(*args); }};
}

}  // namespace torchport::cli
