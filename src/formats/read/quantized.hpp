#pragma once
// Quantized tensors in torch pickles (torch/_tensor.py `_reduce_ex_internal`,
// torch/_utils.py `_rebuild_qtensor`):
//
//   _rebuild_qtensor(storage, offset, size, stride, quantizer_params,
//                    requires_grad, backward_hooks)
//   storage: ('storage', torch.QInt8Storage | QUInt8Storage | QInt32Storage
//             | QUInt4x2Storage | QUInt2x4Storage, ...), the last two packed
//             (two or four values a byte, numel counting bytes)
//   quantizer_params: (torch.per_tensor_affine, scale, zero_point) or
//     (torch.per_channel_affine[_float_qparams], scales, zero_points, axis)
//     with scales and zero_points tensors.

#include <functional>
#include <optional>
#include <string_view>

#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"

namespace torchport::formats::quantized {

/// The integer representation of a quantized storage class
/// (`QInt8Storage` -> I8, `QUInt8Storage` -> U8, `QInt32Storage` -> I32).
std::optional<DType> storage_dtype(std::string_view storage_class) noexcept;

/// Bits per value of a packed quantized storage class (`QUInt4x2Storage` ->
/// 4, `QUInt2x4Storage` -> 2).
std::optional<int> packed_storage_bits(std::string_view storage_class) noexcept;

/// The quantized tensor `_rebuild_qtensor(args)` describes. `inner` turns
/// a nested value (the per-channel scales) into what it stands for.
/// \throws Error(corrupt) for malformed arguments, Error(unsupported) for
///         other quantizer schemes.
Tensor rebuild(const Value& args, const std::function<Value(const Value&)>& inner);

}  // namespace torchport::formats::quantized
