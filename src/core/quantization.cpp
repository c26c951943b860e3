// Quantized tensors: the affine quantizer attached to a tensor's integer
// representation, and dequantize() as torch computes it
// (aten/src/ATen/native/quantized/cpu: per tensor in float, per channel in
// double rounded to float; checked against torch 1.13 by tests/core).

#include <cstring>

#include "torchport/core/error.hpp"
#include "torchport/core/tensor.hpp"

namespace torchport {
namespace {

bool int_repr_dtype(DType d) {
  return d == DType::I8 || d == DType::U8 || d == DType::I32;
}

// The integer at element i of a contiguous tensor of I8, U8 or I32.
std::int64_t int_at(const std::byte* p, DType d, std::size_t i) {
  switch (d) {
    case DType::I8:
      return static_cast<std::int8_t>(p[i]);
    case DType::U8:
      return static_cast<std::uint8_t>(p[i]);
    default: {
      std::int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
  }
}

}  // namespace

std::string_view Quantization::qdtype_name(DType int_dtype) noexcept {
  switch (int_dtype) {
    case DType::I8:
      return "qint8";
    case DType::U8:
      return "quint8";
    case DType::I32:
      return "qint32";
    default:
      return "";
  }
}

std::string_view Quantization::scheme_name(Scheme s) noexcept {
  switch (s) {
    case Scheme::per_tensor_affine:
      return "per_tensor_affine";
    case Scheme::per_channel_affine:
      return "per_channel_affine";
    case Scheme::per_channel_affine_float_qparams:
      return "per_channel_affine_float_qparams";
  }
  return "?";
}

Tensor Tensor::with_quantization(std::shared_ptr<const Quantization> q) const {
  Tensor t = *this;
  if (q) {
    if (!int_repr_dtype(dtype_))
      throw Error(ErrorCode::invalid_argument,
                  "a quantized tensor's integer representation is I8, U8 or I32, not " +
                      std::string(dtype_name(dtype_)));
    if (q->scheme != Quantization::Scheme::per_tensor_affine) {
      if (q->axis < 0 || q->axis >= dim())
        throw Error(ErrorCode::invalid_argument, "per-channel quantizer axis " +
                                                     std::to_string(q->axis) + " of a tensor of " +
                                                     std::to_string(dim()) + " dimensions");
      const std::int64_t n = shape_[static_cast<std::size_t>(q->axis)];
      if (!q->scales.defined() || !q->zero_points.defined() || q->scales.dim() != 1 ||
          q->zero_points.dim() != 1 || q->scales.numel() != n || q->zero_points.numel() != n)
        throw Error(ErrorCode::invalid_argument,
                    "per-channel quantizer needs " + std::to_string(n) +
                        " scales and zero points (axis " + std::to_string(q->axis) + " of " +
                        shape_to_string(shape_) + ")");
    }
  }
  t.quant_ = std::move(q);
  return t;
}

Tensor Tensor::dequantize() const {
  if (!quant_)
    throw Error(ErrorCode::invalid_argument, "dequantize() of a tensor that is not quantized");
  const Quantization& q = *quant_;
  const Tensor src = contiguous();
  Tensor out = empty(DType::F32, shape_);
  const auto in = src.bytes();
  float* o = out.mutable_data<float>();
  const std::size_t n = static_cast<std::size_t>(numel_);
  if (q.scheme == Quantization::Scheme::per_tensor_affine) {
    const float scale = static_cast<float>(q.scale);
    for (std::size_t i = 0; i < n; ++i)
      o[i] = static_cast<float>(int_at(in.data(), dtype_, i) - q.zero_point) * scale;
    return out;
  }
  const auto axis = static_cast<std::size_t>(q.axis);
  std::size_t inner = 1;
  for (std::size_t d = axis + 1; d < shape_.size(); ++d)
    inner *= static_cast<std::size_t>(shape_[d]);
  const std::size_t channels = static_cast<std::size_t>(shape_[axis]);
  const Tensor scales = q.scales.to(DType::F64);
  const auto s = scales.span<double>();
  if (q.scheme == Quantization::Scheme::per_channel_affine_float_qparams) {
    const Tensor zps = q.zero_points.to(DType::F64);
    const auto z = zps.span<double>();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = (i / inner) % channels;
      o[i] = (static_cast<float>(int_at(in.data(), dtype_, i)) - static_cast<float>(z[c])) *
             static_cast<float>(s[c]);
    }
    return out;
  }
  const Tensor zps = q.zero_points.to(DType::I64);
  const auto z = zps.span<std::int64_t>();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = (i / inner) % channels;
    o[i] = static_cast<float>(static_cast<double>(int_at(in.data(), dtype_, i) - z[c]) * s[c]);
  }
  return out;
}

}  // namespace torchport
