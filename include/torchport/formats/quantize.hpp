#pragma once
/// \file
/// Quantized tensors on their way to formats without quantized types
/// (safetensors, torchport records): refused, dequantized, or split into
/// integer tensors plus their quantizer parameters.

#include <string_view>

#include "torchport/formats/catalog.hpp"

namespace torchport {

/// `catalog` with every quantized tensor replaced by its `dequantize()`
/// (F32, as torch computes it); other tensors as they are. The result's
/// root is a flat dict of the tensors.
TensorCatalog dequantize_tensors(const TensorCatalog& catalog);

/// `catalog` with every quantized tensor `<name>` written as plain tensors
/// named after torch's accessors:
///
/// | name | dtype, shape | torch |
/// |---|---|---|
/// | `<name>` | I8 / U8 / I32, the tensor's shape | `int_repr()` |
/// | `<name>.q_scale` | F64 `[]` | `q_scale()` (per tensor) |
/// | `<name>.q_zero_point` | I64 `[]` | `q_zero_point()` (per tensor) |
/// | `<name>.q_per_channel_scales` | F64 `[C]` | `q_per_channel_scales()` |
/// | `<name>.q_per_channel_zero_points` | I64 `[C]` (F32 for float qparams) |
/// `q_per_channel_zero_points()` | | `<name>.q_per_channel_axis` | I64 `[]` |
/// `q_per_channel_axis()` |
///
/// and the metadata entry `torchport.quantized.<name>` =
/// `"<qdtype> <scheme>"` (e.g. `"qint8 per_channel_affine"`).
/// \throws Error(invalid_argument) when one of those names is taken.
TensorCatalog split_quantized(const TensorCatalog& catalog);

/// \throws Error(invalid_argument) naming the first quantized tensor of
/// `catalog` and the options (`--dequantize`, `--keep-quantized`) when there
/// is one; `target` names the output format ("safetensors").
void refuse_quantized(const TensorCatalog& catalog, std::string_view target);

}  // namespace torchport
