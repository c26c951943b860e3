#pragma once
/// \file
/// `transform()`: a catalogue's tensors selected, filtered, renamed and cast,
/// as a new catalogue whose casts happen only when a tensor is used.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "torchport/core/dtype.hpp"
#include "torchport/formats/catalog.hpp"

namespace torchport {

/// What `transform` does, in this order.
struct TransformOptions {
  /// 1. Keep only the tensors under this top-level key, renamed without it
  ///    (`TensorCatalog::select`); empty keeps everything.
  std::string top_level_key;
  /// 2. Keep a tensor only when this returns true for its name (the name
  ///    after step 1, as `torchport inspect --top-level-key` shows it).
  ///    Empty keeps all. A `KeyFilter`'s `accepts` fits here.
  std::function<bool(std::string_view)> keep;
  /// 3. The tensor's new name. Empty keeps names. A `KeyRemap`'s `apply`
  ///    fits here.
  std::function<std::string(std::string_view)> rename;
  /// 4. Cast every floating-point tensor (F16, BF16, F32, F64, F8) to this
  ///    dtype, rounding to nearest even; integer, bool and complex tensors
  ///    keep theirs. nullopt casts nothing.
  std::optional<DType> dtype;
  /// Once a cast has read a tensor that views a mapped file, drop those
  /// pages from the process (see `SaveOptions::release_pages`), so casting a
  /// checkpoint larger than memory stays at about its largest tensor.
  bool release_pages = true;
};

/// The tensors of `catalog` after `options`, in the same order, with the
/// same metadata and format name (the root becomes a flat dict of them).
///
/// Laziness: selecting, filtering and renaming share the tensors (no bytes
/// are read). A cast tensor is a view of a deferred storage that converts
/// when its bytes are first needed, so a writer given the result converts
/// one tensor at a time. Views that share a storage share one cast storage
/// (tied weights stay tied); a tensor alone on its storage casts just its
/// own elements. A cast keeps its source tensor until it is released, so
/// for streaming let nothing else hold the input catalogue while writing:
/// `auto out = transform(open(path), options); save(std::move(out), ...);`
/// (in one expression, `save(transform(open(p), o), ...)`, the opened
/// catalogue would live until `save` returns).
///
/// \throws Error(missing_key) from `select`; Error(invalid_argument) when
/// two tensors get the same name, a name becomes empty, or the dtype is not
/// a floating type torchport can convert to (converting to float8 is not
/// implemented).
TensorCatalog transform(const TensorCatalog& catalog, const TransformOptions& options);

}  // namespace torchport
