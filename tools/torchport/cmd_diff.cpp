// torchport diff A B [--atol X] [--rtol Y] [--json]
//
// Exit status: 0 when A and B hold the same tensor names, shapes and values
// (bitwise, and the same dtypes, when both tolerances are 0, the default;
// else every element within atol + rtol * |b|), 1 when they differ, 2 on
// usage errors.

#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"

namespace torchport::cli {
namespace {

struct DiffArgs {
  std::string a, b;
  double atol = 0, rtol = 0;
  bool json = false;
};

struct TensorDiff {
  std::string name;
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  bool comparable = false;   // same shape and both real or both complex
  bool equal = false;
  std::uint64_t mismatched = 0;
  double max_abs = 0, max_rel = 0;
};

bool same_bits(double x, double y) { return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y); }

// Compares element by element in f64 (complex: both components), a chunk
// at a time so no tensor is ever copied whole.
void compare_values(TensorDiff& d, const DiffArgs& args, bool exact) {
  const Tensor a = d.a->contiguous(), b = d.b->contiguous();
  const bool cplx = is_complex(a.dtype());
  const DType wide = cplx ? DType::C128 : DType::F64;
  const std::size_t lanes = cplx ? 2 : 1;
  const std::size_t n = static_cast<std::size_t>(a.numel());
  const auto ab = a.bytes(), bb = b.bytes();
  const std::size_t sa = dtype_size(a.dtype()), sb = dtype_size(b.dtype());
  const bool same_dtype = a.dtype() == b.dtype();
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<double> x(kChunk * lanes), y(kChunk * lanes);
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    convert_elements(ab.data() + i * sa, a.dtype(), reinterpret_cast<std::byte*>(x.data()), wide, m);
    convert_elements(bb.data() + i * sb, b.dtype(), reinterpret_cast<std::byte*>(y.data()), wide, m);
    for (std::size_t e = 0; e < m; ++e) {
      bool ok = true;
      double abs_err = 0, mag = 0;
      for (std::size_t l = 0; l < lanes; ++l) {
        const double xv = x[e * lanes + l], yv = y[e * lanes + l];
        if (std::isnan(xv) || std::isnan(yv)) {
          // NaN equals NaN only bitwise (after the exact f64 widening).
          if (!same_bits(xv, yv)) ok = false;
          continue;
        }
        const double diff = xv == yv ? 0.0 : std::fabs(xv - yv);  // inf - inf would be NaN
        abs_err = lanes == 1 ? diff : std::hypot(abs_err, diff);
        mag = lanes == 1 ? std::fabs(yv) : std::hypot(mag, yv);
      }
      if (exact && same_dtype) {
        // Bitwise: -0 and +0 differ too.
        ok = ok && std::memcmp(ab.data() + (i + e) * sa, bb.data() + (i + e) * sb, sa) == 0;
      } else if (exact) {
        // Different dtypes (already a difference): count the elements whose
        // widened values differ.
        for (std::size_t l = 0; l < lanes; ++l) ok = ok && same_bits(x[e * lanes + l], y[e * lanes + l]);
      } else if (ok && abs_err > 0) {
        ok = abs_err <= args.atol + args.rtol * mag;
      }
      const double rel = abs_err == 0 ? 0.0 : mag == 0 ? std::numeric_limits<double>::infinity() : abs_err / mag;
      d.max_abs = std::max(d.max_abs, std::isnan(abs_err) ? std::numeric_limits<double>::infinity() : abs_err);
      d.max_rel = std::max(d.max_rel, std::isnan(rel) ? std::numeric_limits<double>::infinity() : rel);
      if (!ok) ++d.mismatched;
    }
  }
  d.equal = d.mismatched == 0;
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string describe(const Tensor& t) { return t.description(); }

int run_diff(const DiffArgs& args) {
  if (args.atol < 0 || args.rtol < 0 || std::isnan(args.atol) || std::isnan(args.rtol))
    throw UsageError("tolerances must be non-negative numbers");
  const bool exact = args.atol == 0 && args.rtol == 0;
  const TensorCatalog ca = open(args.a), cb = open(args.b);

  std::vector<std::string> only_a, only_b;
  std::vector<TensorDiff> diffs;
  // Quantized tensors compare by their real values (dequantize()): a
  // changed scale is a difference; sparse ones by to_dense(). A deque
  // keeps the pointers stable.
  std::deque<Tensor> real;
  auto values = [&real](const Tensor& t) -> const Tensor* {
    if (!t.is_quantized() && !t.is_sparse()) return &t;
    real.push_back(t.is_sparse() ? t.to_dense() : t.dequantize());
    return &real.back();
  };
  for (const auto& [name, t] : ca.tensors()) {
    const Tensor* other = cb.find(name);
    if (other == nullptr) {
      only_a.push_back(name);
      continue;
    }
    TensorDiff d;
    d.name = name;
    d.a = values(t);
    d.b = values(*other);
    d.comparable = t.shape() == other->shape() && is_complex(t.dtype()) == is_complex(other->dtype());
    diffs.push_back(std::move(d));
  }
  for (const auto& [name, t] : cb.tensors())
    if (ca.find(name) == nullptr) only_b.push_back(name);

  std::size_t unequal = 0;
  for (auto& d : diffs) {
    if (d.comparable) {
      try {
        compare_values(d, args, exact);
      } catch (const Error& e) {
        throw e.at_key(d.name);
      }
    }
    // A dtype change is a difference when comparing exactly; with a
    // tolerance it is reported and the values decide.
    if (exact && d.a->dtype() != d.b->dtype()) d.equal = false;
    if (!d.equal) ++unequal;
  }
  const bool equal = only_a.empty() && only_b.empty() && unequal == 0;

  if (args.json) {
    nlohmann::ordered_json out;
    out["equal"] = equal;
    out["a"] = args.a;
    out["b"] = args.b;
    out["atol"] = args.atol;
    out["rtol"] = args.rtol;
    out["only_in_a"] = only_a;
    out["only_in_b"] = only_b;
    auto& list = out["tensors"] = nlohmann::ordered_json::array();
    for (const auto& d : diffs) {
      nlohmann::ordered_json j;
      j["name"] = d.name;
      j["equal"] = d.equal;
      j["dtype_a"] = std::string(dtype_name(d.a->dtype()));
      j["dtype_b"] = std::string(dtype_name(d.b->dtype()));
      j["shape_a"] = d.a->shape();
      j["shape_b"] = d.b->shape();
      if (d.comparable) {
        j["mismatched"] = d.mismatched;
        j["numel"] = d.a->numel();
        j["max_abs"] = number(d.max_abs);
        j["max_rel"] = number(d.max_rel);
      }
      list.push_back(std::move(j));
    }
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    return equal ? 0 : 1;
  }

  const bool colour = colour_enabled(1);
  for (const auto& n : only_a) fmt::print("only in A: {}\n", n);
  for (const auto& n : only_b) fmt::print("only in B: {}\n", n);
  for (const auto& d : diffs) {
    if (!d.comparable) {
      fmt::print("{}: {} vs {}: not comparable\n", d.name, describe(*d.a), describe(*d.b));
      continue;
    }
    const bool dtype_changed = d.a->dtype() != d.b->dtype();
    if (d.equal && !dtype_changed) continue;
    std::string line = fmt::format("{}: ", d.name);
    if (dtype_changed) line += fmt::format("dtype {} vs {}; ", dtype_name(d.a->dtype()), dtype_name(d.b->dtype()));
    if (d.mismatched > 0)
      line += fmt::format("{} of {} elements differ", d.mismatched, d.a->numel());
    else
      line += exact ? "values equal" : "values within tolerance";
    line += fmt::format(", max abs {:.3g}, max rel {:.3g}", d.max_abs, d.max_rel);
    fmt::print("{}\n", d.mismatched > 0 ? styled(line, Style::red, colour) : line);
  }
  fmt::print("{}: {} of {} common tensors {}; {} only in A, {} only in B\n",
             styled(equal ? "equal" : "different", equal ? Style::green : Style::red, colour),
             diffs.size() - unequal, diffs.size(), exact ? "identical" : "within tolerance", only_a.size(),
             only_b.size());
  return equal ? 0 : 1;
}

}  // namespace

Command add_diff(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* sub = app.add_subcommand("diff", "Compare the tensors of two checkpoints (exit 0 equal, 1 different)");
  sub->add_option("a", args->a, "First checkpoint (any format torchport reads)")->required()->check(CLI::ExistingPath);
  sub->add_option("b", args->b, "Second checkpoint")->required()->check(CLI::ExistingPath);
  sub->add_option("--atol", args->atol, "Absolute tolerance (default 0: compare bitwise)");
  sub->add_option("--rtol", args->rtol, "Relative tolerance, times |b| (default 0)");
  sub->add_flag("--json", args->json, "Print one JSON object instead of text");
  sub->footer(
      "With both tolerances 0, tensors are equal when dtype, shape and every bit match.\n"
      "Otherwise values are compared in f64: |a - b| <= atol + rtol * |b|; a dtype change is\n"
      "reported but only the values decide. NaN equals NaN only bitwise.\n"
      "Example:\n  torchport diff model.pt model.safetensors\n"
      "  torchport diff model.pt model-bf16.safetensors --atol 1e-2 --rtol 1e-2");
  return {sub, [args] { return run_diff(*args); }};
}

}  // namespace torchport::cli
