// torchport diff A B [--atol X] [--rtol Y] [--json]
//
// Exit status: 0 when A and B hold the same tensor names, shapes and values
// (bitwise, and the same dtypes, when both tolerances are 0, the default;
// else every element within atol + rtol * |b|), 1 when they differ, 2 on
// usage errors.

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
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

namespace torchport::cli {
namespace {

struct DiffArgs {
  std::string a, b;
  double atol = 0, rtol = 0;
  bool json = false;
  bool quiet = false;
};

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
  for (const auto& d : c.tensors) {
    if (!d.comparable()) {
      if (d.equal) continue;  // two meta tensors of one shape
      fmt::print("{}: {} vs {}: not comparable\n", d.name, d.a.description(), d.b.description());
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
    line += fmt::format(", max abs {:.3g}, max rel {:.3g}", d.max_abs, d.max_rel);
    if (d.a.nans + d.b.nans > 0) line += fmt::format("; NaN: {} in A, {} in B", d.a.nans, d.b.nans);
    if (d.a.infinities + d.b.infinities > 0)
      line += fmt::format("; inf: {} in A, {} in B", d.a.infinities, d.b.infinities);
    fmt::print("{}\n", d.mismatched > 0 ? styled(line, Style::red, colour) : line);
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
  const TensorCatalog a = open_input(args.a), b = open_input(args.b);
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
  sub->add_option("a", args->a, "First checkpoint (any format torchport reads)")
      ->required()
      ->check(existing_path_or_stdin());
  sub->add_option("b", args->b, "Second checkpoint ('-': standard input)")
      ->required()
      ->check(existing_path_or_stdin());
  sub->add_option("--atol", args->atol, "Absolute tolerance (default 0: compare bitwise)");
  sub->add_option("--rtol", args->rtol, "Relative tolerance, times |b| (default 0)");
  sub->add_flag("--json", args->json, "Print one JSON object instead of text");
  sub->add_flag("-q,--quiet", args->quiet, "Print nothing but errors: the exit status answers");
  sub->footer(
      "With both tolerances 0, tensors are equal when dtype, shape and every bit match.\n"
      "Otherwise values are compared in f64: |a - b| <= atol + rtol * |b|; a dtype change is\n"
      "reported but only the values decide. NaN equals NaN only bitwise.\n"
      "Example:\n  torchport diff model.pt model.safetensors\n"
      "  torchport diff model.pt model-bf16.safetensors --atol 1e-2 --rtol 1e-2");
  return {sub, [args] { return run_diff(*args); }};
}

}  // namespace torchport::cli
