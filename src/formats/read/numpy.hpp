#pragma once
// numpy values in pickles, read without numpy: arrays
// (`numpy.core.multiarray._reconstruct` + BUILD with the ndarray state,
// protocol 5's `numpy.core.numeric._frombuffer`) become tensors, scalars
// (`numpy.core.multiarray.scalar`) become numbers. numpy 2's `numpy._core`
// spellings are read too. Nothing is imported or run: the dtype, shape and
// bytes are taken from the pickled arguments and checked against each other
// as numpy's `array_setstate` checks them.

#include <cstdint>
#include <optional>

#include "pickle/unpickler.hpp"
#include "torchport/core/value.hpp"

namespace torchport::formats::numpy {

/// True when the pickle referenced a numpy global this reader turns into
/// data (so the tree needs a pass that converts them).
bool referenced(const pickle::Stats& stats);

/// The value the inert numpy object `o` stands for: a tensor for a numeric
/// or bool array, a number for a numeric scalar; nothing for what stays an
/// inert object (object, string, datetime and structured arrays, ndarray
/// subclasses, a `numpy.dtype` itself, calls of other globals).
/// \throws Error(corrupt) for a state numpy would refuse (shape and byte
///         count disagree, an unknown dtype code, object dtype where bytes
///         are needed, a malformed tuple), Error(unsupported) for a numeric
///         dtype torchport has no element type for (float128).
std::optional<Value> value_of(const Object& o);
/// True when `o` is a numpy array of object dtype (`_reconstruct` with an
/// `'O'` dtype, or `_frombuffer` of one): its elements are Python objects
/// the pickle makes, which `open()` keeps inert and `scan` names.
bool is_object_array(const Object& o) noexcept;

/// The element layout of a pickled `numpy.dtype` (`Object` of numpy.dtype
/// with its BUILD state), as numpy sets it: the item size, and whether the
/// elements are Python objects (hasobject). Numeric, bool, object, bytes
/// ('S'), str ('U'), void ('V'), datetime and timedelta dtypes; nothing for
/// what this reader cannot tell exactly (structured dtypes, subarrays, a
/// flexible dtype without a size). What joblib needs to know how many raw
/// bytes follow a NumpyArrayWrapper.
struct ElementLayout {
  std::uint64_t itemsize = 0;
  bool has_object = false;
};
std::optional<ElementLayout> element_layout(const Value& dtype) noexcept;

}  // namespace torchport::formats::numpy
