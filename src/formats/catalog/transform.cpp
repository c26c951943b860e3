#include "torchport/formats/transform.hpp"

#include <functional>
#include <unordered_map>

#include "formats/write/write_common.hpp"
#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport {
namespace {

// A storage of `nbytes` holding `src` converted to `to`, made when first
// needed; the source's mapped pages are dropped once read if `release`.
std::shared_ptr<Storage> deferred_cast(std::uint64_t nbytes, Tensor src, DType to, bool release) {
  return Storage::deferred(nbytes, [src = std::move(src), to, release] {
    Tensor cast = src.to(to);
    if (release) formats::release_view_pages(src);
    return cast.storage();
  });
}

}  // namespace

TensorCatalog transform(const TensorCatalog& catalog, const TransformOptions& options) try {
  if (options.dtype) {
    const DType d = *options.dtype;
    if (!is_floating(d) || !convertible(DType::F32, d))
      throw Error(
          ErrorCode::invalid_argument,
          "cannot cast floating-point tensors to " + std::string(dtype_name(d)) +
              (d == DType::F4 ? " (float4_e2m1fn_x2 packs two values a byte; torch cannot "
                                "convert to it either)"
                              : " (only floating dtypes are cast targets: F16, BF16, F32, F64 "
                                "and the float8 kinds)"));
  }
  const TensorCatalog selected =
      options.top_level_key.empty() ? catalog : catalog.select(options.top_level_key);

  std::vector<NamedTensor> out;
  out.reserve(selected.size());
  detail::StringMap<std::string> origin;  // new name -> old name
  for (const auto& [name, t] : selected.tensors()) {
    if (options.keep && !options.keep(name)) continue;
    // A catalogue's names are unique: only a rename can make two meet.
    if (!options.rename) {
      out.push_back({name, t});
      continue;
    }
    std::string renamed = options.rename(name);
    if (renamed.empty())
      throw Error(ErrorCode::invalid_argument, "renaming gives this tensor an empty name", name);
    auto [it, fresh] = origin.emplace(renamed, name);
    if (!fresh)
      throw Error(ErrorCode::invalid_argument,
                  "both '" + it->second + "' and '" + name + "' are renamed to '" + renamed +
                      "'; make the rename rules keep them apart",
                  name);
    out.push_back({std::move(renamed), t});
  }

  if (options.dtype) {
    const DType to = *options.dtype;
    auto casts = [&](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != to; };
    // Views that share a storage share one cast of the whole storage, so
    // tied weights stay tied; a storage must then be viewed under one dtype
    // and hold whole elements of it.
    struct Use {
      DType dtype;
      std::size_t views = 0;
      bool uniform = true;
    };
    std::unordered_map<const Storage*, Use> uses;
    for (const auto& [name, t] : out) {
      if (!casts(t)) continue;
      auto [it, fresh] = uses.emplace(t.storage().get(), Use{t.dtype()});
      it->second.views++;
      if (it->second.dtype != t.dtype()) it->second.uniform = false;
    }
    std::unordered_map<const Storage*, std::shared_ptr<Storage>> shared_cast;
    for (auto& [name, t] : out) {
      if (!casts(t)) continue;
      const Use& u = uses.at(t.storage().get());
      const std::size_t in = dtype_size(t.dtype()), outsz = dtype_size(to);
      if (u.views > 1 && u.uniform && t.storage()->nbytes() % in == 0) {
        auto& cast = shared_cast[t.storage().get()];
        if (!cast) {
          const std::int64_t n = static_cast<std::int64_t>(t.storage()->nbytes() / in);
          const Tensor whole(t.dtype(), {n}, {1}, 0, t.storage());
          cast = deferred_cast(static_cast<std::uint64_t>(n) * outsz, whole, to,
                               options.release_pages);
        }
        t = Tensor(to, t.shape(), t.strides(), t.storage_offset(), cast);
      } else {
        const Tensor src = t;
        Shape strides = contiguous_strides(src.shape());
        t = Tensor(to, src.shape(), std::move(strides), 0,
                   deferred_cast(static_cast<std::uint64_t>(src.numel()) * outsz, src, to,
                                 options.release_pages));
      }
    }
  }
  return selected.with_tensors(std::move(out), selected.metadata());
} catch (...) {
  rethrow_as_error("transform");  // no bare std:: exception leaves the library
}

}  // namespace torchport
