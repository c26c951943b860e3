#pragma once
/// \file
/// Python's `ast.literal_eval` (internal): what numpy's .npy headers are read
/// with. Implemented beside the pickle layer's other Python text codecs
/// (src/pickle/literal_eval.cpp); not installed.

#include <string_view>

#include "torchport/core/value.hpp"

namespace torchport::detail {

/// `ast.literal_eval(text)` as CPython 3.11 evaluates it (literal_eval.cpp
/// says what that accepts): str, bytes, numbers, True, False, None, tuples,
/// lists, sets and dicts with string keys. `text` is UTF-8.
/// `drop_long_suffix` drops a Python 2 long suffix ("3L") as numpy's
/// _filter_header does. Throws Error(corrupt) naming the character where
/// Python's parser or literal_eval would refuse, Error(unsupported) for
/// what this reader does not read (\N{...}, a lone surrogate, keys that
/// are not strings).
Value literal_eval(std::string_view text, bool drop_long_suffix = false);

}  // namespace torchport::detail
