#pragma once
/// \file
/// `compare()`: two catalogues (or two tensors) compared name by name,
/// exactly or within a tolerance, as `torchport diff` reports them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/catalog.hpp"

namespace torchport {

/// How a NaN compares with another value. Every rule treats a NaN and a
/// number as different.
enum class NanEquality {
  /// A NaN equals a NaN of the same bits (after the exact widening to f64;
  /// in an exact comparison of one dtype, the same stored bits). The default.
  bitwise,
  /// Every NaN equals every NaN, whatever its payload (numpy's `equal_nan=True`).
  any,
  /// A NaN equals nothing, not even itself (IEEE 754; `torch.equal`).
  never,
};

/// What `compare()` counts as equal.
///
/// With both tolerances 0 (the default) the comparison is exact: two
/// tensors are equal when their dtypes are the same and every element has
/// the same bits (so -0 and +0 differ). Otherwise values are compared in
/// f64 (complex ones by the modulus of their difference):
/// `|a - b| <= atol + rtol * |b|`; a dtype change is reported but only the
/// values decide.
struct CompareOptions {
  double atol = 0;                         ///< absolute tolerance, >= 0
  double rtol = 0;                         ///< relative tolerance, times |b|, >= 0
  NanEquality nan = NanEquality::bitwise;  ///< how NaNs compare
  /// Called by `compare` before each pair and at the end, with the bytes of
  /// A's tensors compared so far and in all (those B has too).
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;

  /// True when both tolerances are 0: the comparison is bitwise.
  bool exact() const noexcept { return atol == 0 && rtol == 0; }
  /// \throws Error(invalid_argument) when a tolerance is negative or NaN.
  void validate() const;
};

/// Whether the elements of two tensors of one name were compared, or why not.
enum class ValueCheck {
  compared,       ///< same shape, both real or both complex: elements compared
  shape_differs,  ///< the shapes differ
  complex_real,   ///< one is complex, the other is not
  /// one or both are meta tensors (a dtype and shape, no data): two meta
  /// tensors of one shape are equal (no values to differ), a meta tensor
  /// and one with data are not
  no_data,
  /// one holds raw bits (torch's bits dtypes) and the other numbers or bits
  /// of another dtype: no values to compare. (Two tensors of one bits dtype
  /// are `compared`, element by element as bytes, whatever the tolerance.)
  raw_bits,
};

/// One side of a compared pair: the tensor as stored and the values compared.
struct ComparedTensor {
  /// The dtype of the values compared: F32 for a quantized tensor (its
  /// `dequantize()`), the stored dtype otherwise (a sparse tensor's values').
  DType dtype = DType::F32;
  Shape shape;  ///< the (dense) shape
  /// The dtype as stored: a quantized tensor's integers (I8, U8, I32), a
  /// sparse tensor's values.
  DType stored_dtype = DType::F32;
  bool quantized = false;  ///< compared by its real values (`dequantize()`)
  bool sparse = false;     ///< compared by its dense values (`to_dense()`)
  bool meta = false;       ///< a meta tensor: no values to compare
  /// Elements with a NaN (any component, for complex ones); counted when the
  /// values were compared, else 0.
  std::uint64_t nans = 0;
  /// Elements with an infinite component; counted when the values were compared, else 0.
  std::uint64_t infinities = 0;

  /// "F32[3, 4]": the dtype of the values compared and the shape ("F32[3, 4]
  /// meta" for a meta tensor).
  std::string description() const;
};

/// The comparison of the two tensors of one name.
struct TensorComparison {
  std::string name;                         ///< the tensor's name (in both catalogues)
  ComparedTensor a;                         ///< the first catalogue's tensor
  ComparedTensor b;                         ///< the second catalogue's tensor
  ValueCheck check = ValueCheck::compared;  ///< whether the elements were compared
  /// The verdict. Exact: same dtype, elements compared and none differs.
  /// With a tolerance: elements compared and every one within it. False
  /// when the elements could not be compared, except for two meta tensors of
  /// one shape (and, exactly, one dtype), which have no values to differ.
  bool equal = false;
  std::uint64_t numel = 0;       ///< elements compared (0 when not compared)
  std::uint64_t mismatched = 0;  ///< elements that differ (exactly, or beyond the tolerance)
  /// The C-order index of the first element that differs, if one does.
  std::optional<std::uint64_t> first_mismatch;
  /// The first tensor's element at `first_mismatch`, widened to f64:
  /// (real, imaginary; 0 for real dtypes).
  std::array<double, 2> first_a{};
  /// The second tensor's element at `first_mismatch`, as `first_a`.
  std::array<double, 2> first_b{};
  /// The largest |a - b| (complex: modulus); infinity when an infinity
  /// meets another value. NaN elements are left out (they count in `mismatched`).
  double max_abs = 0;
  /// The largest |a - b| / |b|; infinity where b is 0 and a is not.
  double max_rel = 0;

  /// True when the elements were compared (`check == ValueCheck::compared`).
  bool comparable() const noexcept { return check == ValueCheck::compared; }
  /// True when the dtypes of the values compared differ.
  bool dtype_differs() const noexcept { return a.dtype != b.dtype; }
};

/// The comparison of two catalogues by tensor name.
struct Comparison {
  CompareOptions options;              ///< what was counted as equal
  std::vector<std::string> only_in_a;  ///< names only the first has, in its order
  std::vector<std::string> only_in_b;  ///< names only the second has, in its order
  /// The names both have, in the first catalogue's order.
  std::vector<TensorComparison> tensors;
  std::size_t unequal = 0;  ///< entries of `tensors` that are not `equal`
  /// The verdict: the same names, and every common tensor equal.
  bool equal = false;
};

/// Compares two tensors under `options` (`name` is used in the result and
/// in errors). A quantized tensor is compared by its real values
/// (`dequantize()`: a changed scale is a difference, a changed integer
/// dtype with the same real values is not), a sparse one by `to_dense()`
/// (any layout equals a dense tensor of the same values). Elements are
/// widened a chunk at a time; only the real values of a quantized tensor,
/// the dense values of a sparse one and a non-contiguous view are made whole.
/// \throws Error(invalid_argument) for invalid options; the Error of a
/// tensor whose bytes cannot be read, with `name` as its key.
TensorComparison compare_tensors(std::string name, const Tensor& a, const Tensor& b,
                                 const CompareOptions& options = {});

/// Compares two catalogues: the names only one has, and `compare_tensors`
/// for each name both have. Reads every common tensor's bytes, one pair at
/// a time. Non-tensor values and metadata are not compared.
/// \throws as `compare_tensors`.
Comparison compare(const TensorCatalog& a, const TensorCatalog& b,
                   const CompareOptions& options = {});

}  // namespace torchport
