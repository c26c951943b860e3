// compare(): two catalogues or two tensors, element by element in f64.

#include "torchport/formats/compare.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"

namespace torchport {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_bits(double x, double y) {
  return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
}

// What a side is compared as, read from the tensor without touching its bytes.
ComparedTensor side_of(const Tensor& t) {
  ComparedTensor s;
  s.quantized = t.is_quantized();
  s.sparse = t.is_sparse();
  s.meta = t.is_meta();
  s.stored_dtype = t.dtype();
  s.dtype = s.quantized ? DType::F32 : t.dtype();  // dequantize() gives F32
  s.shape = t.shape();
  return s;
}

// The values compared: a quantized tensor's real values, a sparse one's
// dense values, contiguous.
Tensor values_of(const Tensor& t) {
  if (t.is_sparse()) return t.to_dense();
  if (t.is_quantized()) return t.dequantize();
  return t.contiguous();
}

// Whether the elements of a pair can be compared, or why not. (A kind of
// tensor whose elements cannot be read belongs here too.)
ValueCheck check_of(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return ValueCheck::shape_differs;
  if (a.is_meta() || b.is_meta()) return ValueCheck::no_data;
  if ((is_bits(a.dtype()) || is_bits(b.dtype())) && a.dtype() != b.dtype())
    return ValueCheck::raw_bits;
  if (is_complex(a.dtype()) != is_complex(b.dtype())) return ValueCheck::complex_real;
  return ValueCheck::compared;
}

// Compares element by element in f64 (complex: both components), a chunk
// at a time.
void compare_values(TensorComparison& d, const Tensor& a, const Tensor& b,
                    const CompareOptions& options) {
  const bool exact = options.exact();
  const bool cplx = is_complex(a.dtype());
  const DType wide = cplx ? DType::C128 : DType::F64;
  const std::size_t lanes = cplx ? 2 : 1;
  const std::size_t n = static_cast<std::size_t>(a.numel());
  const auto ab = a.bytes(), bb = b.bytes();
  const std::size_t sa = dtype_size(a.dtype()), sb = dtype_size(b.dtype());
  const std::size_t lane_bytes = sa / lanes;
  const bool same_dtype = a.dtype() == b.dtype();
  d.numel = n;
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<double> x(std::min(kChunk, n) * lanes), y(std::min(kChunk, n) * lanes);
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    convert_elements(ab.data() + i * sa, a.dtype(), reinterpret_cast<std::byte*>(x.data()), wide,
                     m);
    convert_elements(bb.data() + i * sb, b.dtype(), reinterpret_cast<std::byte*>(y.data()), wide,
                     m);
    for (std::size_t e = 0; e < m; ++e) {
      bool ok = true, nan_a = false, nan_b = false, inf_a = false, inf_b = false;
      double abs_err = 0, mag = 0;
      for (std::size_t l = 0; l < lanes; ++l) {
        const double xv = x[e * lanes + l], yv = y[e * lanes + l];
        // Exact and of one dtype: the stored bits decide (-0 and +0 differ).
        const auto stored_equal = [&] {
          return std::memcmp(ab.data() + (i + e) * sa + l * lane_bytes,
                             bb.data() + (i + e) * sb + l * lane_bytes, lane_bytes) == 0;
        };
        inf_a = inf_a || std::isinf(xv);
        inf_b = inf_b || std::isinf(yv);
        if (std::isnan(xv) || std::isnan(yv)) {
          nan_a = nan_a || std::isnan(xv);
          nan_b = nan_b || std::isnan(yv);
          switch (options.nan) {
            case NanEquality::bitwise:
              ok = ok && (exact && same_dtype ? stored_equal() : same_bits(xv, yv));
              break;
            case NanEquality::any:
              ok = ok && std::isnan(xv) && std::isnan(yv);
              break;
            case NanEquality::never:
              ok = false;
              break;
          }
          continue;
        }
        const double diff = xv == yv ? 0.0 : std::fabs(xv - yv);  // inf - inf would be NaN
        abs_err = lanes == 1 ? diff : std::hypot(abs_err, diff);
        mag = lanes == 1 ? std::fabs(yv) : std::hypot(mag, yv);
        // Exact across dtypes (already a difference): the widened values
        // decide, so the elements that differ are counted.
        if (exact) ok = ok && (same_dtype ? stored_equal() : same_bits(xv, yv));
      }
      if (!exact && ok && abs_err > 0) ok = abs_err <= options.atol + options.rtol * mag;
      const double rel = abs_err == 0 ? 0.0 : mag == 0 ? kInf : abs_err / mag;
      d.max_abs = std::max(d.max_abs, std::isnan(abs_err) ? kInf : abs_err);
      d.max_rel = std::max(d.max_rel, std::isnan(rel) ? kInf : rel);
      d.a.nans += nan_a;
      d.b.nans += nan_b;
      d.a.infinities += inf_a;
      d.b.infinities += inf_b;
      if (!ok) {
        if (d.mismatched == 0) {
          d.first_mismatch = i + e;
          d.first_a = {x[e * lanes], lanes == 2 ? x[e * lanes + 1] : 0.0};
          d.first_b = {y[e * lanes], lanes == 2 ? y[e * lanes + 1] : 0.0};
        }
        ++d.mismatched;
      }
    }
  }
}

// Raw bits of one bits dtype (no arithmetic): each element's bytes, equal
// or not, whatever the tolerance; the differing elements shown as their
// bytes read as an unsigned integer.
void compare_bits(TensorComparison& d, const Tensor& a, const Tensor& b) {
  const auto ab = a.bytes(), bb = b.bytes();
  const std::size_t size = dtype_size(a.dtype());
  const std::size_t n = static_cast<std::size_t>(a.numel());
  d.numel = n;
  const auto word = [size](const std::byte* p) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, std::min<std::size_t>(size, sizeof v));  // little-endian host
    return static_cast<double>(v);
  };
  for (std::size_t e = 0; e < n; ++e) {
    const std::byte* x = ab.data() + e * size;
    const std::byte* y = bb.data() + e * size;
    if (std::memcmp(x, y, size) == 0) continue;
    if (d.mismatched == 0) {
      d.first_mismatch = e;
      d.first_a = {word(x), 0.0};
      d.first_b = {word(y), 0.0};
    }
    ++d.mismatched;
  }
}

}  // namespace

void CompareOptions::validate() const {
  if (atol < 0 || rtol < 0 || std::isnan(atol) || std::isnan(rtol))
    throw Error(ErrorCode::invalid_argument, "tolerances must be non-negative numbers");
}

std::string ComparedTensor::description() const {
  return std::string(dtype_name(dtype)) + shape_to_string(shape) + (meta ? " meta" : "");
}

TensorComparison compare_tensors(std::string name, const Tensor& a, const Tensor& b,
                                 const CompareOptions& options) try {
  options.validate();
  TensorComparison d;
  d.name = std::move(name);
  d.a = side_of(a);
  d.b = side_of(b);
  d.check = check_of(a, b);
  if (d.comparable()) {
    try {
      // One pair at a time: a quantized or sparse tensor's values live
      // only while it is compared.
      if (is_bits(a.dtype()))
        compare_bits(d, a.contiguous(), b.contiguous());
      else
        compare_values(d, values_of(a), values_of(b), options);
    } catch (const Error& e) {
      throw e.at_key(d.name);
    }
    d.equal = d.mismatched == 0;
  }
  if (d.check == ValueCheck::no_data) d.equal = d.a.meta && d.b.meta;  // no values to differ
  // A dtype change is a difference when comparing exactly; with a
  // tolerance it is reported and the values decide.
  if (options.exact() && d.dtype_differs()) d.equal = false;
  return d;
} catch (...) {
  rethrow_as_error("compare");
}

Comparison compare(const TensorCatalog& a, const TensorCatalog& b,
                   const CompareOptions& options) try {
  options.validate();
  Comparison out;
  out.options = options;
  out.options.progress = nullptr;  // the result does not keep the caller's callback
  std::uint64_t total = 0, done = 0;
  if (options.progress)
    for (const auto& [name, t] : a.tensors())
      if (b.find(name) != nullptr) total += t.nbytes();
  for (const auto& [name, t] : a.tensors()) {
    const Tensor* other = b.find(name);
    if (other == nullptr) {
      out.only_in_a.push_back(name);
      continue;
    }
    if (options.progress) {
      options.progress(done, total);
      done += t.nbytes();
    }
    out.tensors.push_back(compare_tensors(name, t, *other, options));
    if (!out.tensors.back().equal) ++out.unequal;
  }
  if (options.progress) options.progress(total, total);
  for (const auto& [name, t] : b.tensors())
    if (a.find(name) == nullptr) out.only_in_b.push_back(name);
  out.equal = out.only_in_a.empty() && out.only_in_b.empty() && out.unequal == 0;
  return out;
} catch (...) {
  rethrow_as_error("compare");
}

}  // namespace torchport
