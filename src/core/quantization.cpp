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

std::string_view Quantization::qdtype_name(DType int_dtype, int bits) noexcept {
  if (bits != 8)
    return int_dtype != DType::U8 ? "" : bits == 4 ? "quint4x2" : bits == 2 ? "quint2x4" : "";
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

namespace {

// ceil(numel / values-per-byte), without numel × bits (a file's sizes can
// make that overflow, and a storage of a few bytes would pass the check).
std::uint64_t packed_bytes(std::int64_t numel, int bits) {
  const auto per = static_cast<std::uint64_t>(8 / bits);
  const auto n = static_cast<std::uint64_t>(numel);
  return n / per + (n % per != 0 ? 1 : 0);
}

// torch's packing (aten quantize_tensor_per_tensor_affine_sub_byte): value i
// in byte i / (8 / bits), at bit (i % (8 / bits)) * bits.
std::shared_ptr<Storage> unpacked(std::shared_ptr<Storage> packed, std::int64_t numel, int bits) {
  const auto n = static_cast<std::uint64_t>(numel);
  return Storage::deferred(n, [packed = std::move(packed), n, bits] {
    auto out = Storage::allocate(n);
    const auto in = packed->bytes();
    auto o = out->mutable_bytes();
    const unsigned per = 8u / static_cast<unsigned>(bits), mask = (1u << bits) - 1u;
    for (std::uint64_t i = 0; i < n; ++i)
      o[i] = static_cast<std::byte>(
          (static_cast<unsigned>(in[i / per]) >> ((i % per) * static_cast<unsigned>(bits))) & mask);
    return out;
  });
}

std::shared_ptr<Storage> packed(std::shared_ptr<Storage> values, std::int64_t numel, int bits) {
  const auto n = static_cast<std::uint64_t>(numel);
  return Storage::deferred(packed_bytes(numel, bits), [values = std::move(values), n, bits] {
    auto out = Storage::allocate(packed_bytes(static_cast<std::int64_t>(n), bits));
    const auto in = values->bytes();
    auto o = out->mutable_bytes();
    std::fill(o.begin(), o.end(), std::byte{0});
    const unsigned per = 8u / static_cast<unsigned>(bits), mask = (1u << bits) - 1u;
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto v = static_cast<unsigned>(in[i]);
      if (v > mask)
        throw Error(ErrorCode::invalid_argument,
                    "value " + std::to_string(v) + " at element " + std::to_string(i) +
                        " does not fit a " + std::to_string(bits) + "-bit quantized tensor");
      o[i / per] |= static_cast<std::byte>(v << ((i % per) * static_cast<unsigned>(bits)));
    }
    return out;
  });
}

}  // namespace

Tensor Tensor::packed_quantized(std::shared_ptr<Storage> packed, Shape shape,
                                std::shared_ptr<const Quantization> q) {
  if (!q || (q->bits != 4 && q->bits != 2))
    throw Error(ErrorCode::invalid_argument, "a packed quantized tensor has 4 or 2 bits per value");
  const std::int64_t numel = shape_numel(shape);
  if (numel < 0 || packed->nbytes() < packed_bytes(numel, q->bits))
    throw Error(ErrorCode::corrupt,
                std::string(Quantization::qdtype_name(DType::U8, q->bits)) + " tensor of sizes " +
                    shape_to_string(shape) + " needs " +
                    std::to_string(packed_bytes(std::max<std::int64_t>(numel, 0), q->bits)) +
                    " bytes; its storage holds " + std::to_string(packed->nbytes()));
  Shape strides = contiguous_strides(shape);
  Tensor t(DType::U8, std::move(shape), std::move(strides), 0, unpacked(packed, numel, q->bits));
  Tensor out = t.with_quantization(std::move(q));
  out.set_file_storage(std::move(packed));
  return out;
}

Tensor Tensor::with_quantization(std::shared_ptr<const Quantization> q) const {
  Tensor t = *this;
  t.set_file_storage(nullptr);  // a packed storage belongs to its quantizer
  if (q) {
    if (!int_repr_dtype(body().dtype))
      throw Error(ErrorCode::invalid_argument,
                  "a quantized tensor's integer representation is I8, U8 or I32, not " +
                      std::string(dtype_name(body().dtype)));
    if (q->bits != 8) {
      if (body().dtype != DType::U8 || (q->bits != 4 && q->bits != 2))
        throw Error(ErrorCode::invalid_argument,
                    "a sub-byte quantized tensor is U8 with 4 or 2 bits per value (quint4x2, "
                    "quint2x4), not " +
                        std::string(dtype_name(body().dtype)) + " with " + std::to_string(q->bits));
      if (!is_contiguous() || body().offset != 0)
        throw Error(ErrorCode::invalid_argument,
                    "a " + std::string(Quantization::qdtype_name(body().dtype, q->bits)) +
                        " tensor is contiguous from its storage's start (torch packs it so)");
      t.set_file_storage(packed(body().storage, body().numel, q->bits));
    }
    if (q->scheme != Quantization::Scheme::per_tensor_affine) {
      if (q->axis < 0 || q->axis >= dim())
        throw Error(ErrorCode::invalid_argument, "per-channel quantizer axis " +
                                                     std::to_string(q->axis) + " of a tensor of " +
                                                     std::to_string(dim()) + " dimensions");
      const std::int64_t n = body().shape[static_cast<std::size_t>(q->axis)];
      if (!q->scales.defined() || !q->zero_points.defined() || q->scales.dim() != 1 ||
          q->zero_points.dim() != 1 || q->scales.numel() != n || q->zero_points.numel() != n)
        throw Error(ErrorCode::invalid_argument,
                    "per-channel quantizer needs " + std::to_string(n) +
                        " scales and zero points (axis " + std::to_string(q->axis) + " of " +
                        shape_to_string(body().shape) + ")");
    }
  }
  t.set_quantization(std::move(q));
  return t;
}

Tensor Tensor::dequantize() const {
  if (!is_quantized())
    throw Error(ErrorCode::invalid_argument, "dequantize() of a tensor that is not quantized");
  const Quantization& q = *quantization();
  const Tensor src = contiguous();
  Tensor out = empty(DType::F32, body().shape);
  const auto in = src.bytes();
  float* o = out.mutable_data<float>();
  const std::size_t n = static_cast<std::size_t>(body().numel);
  if (q.scheme == Quantization::Scheme::per_tensor_affine) {
    const float scale = static_cast<float>(q.scale);
    for (std::size_t i = 0; i < n; ++i)
      o[i] = static_cast<float>(int_at(in.data(), body().dtype, i) - q.zero_point) * scale;
    return out;
  }
  const auto axis = static_cast<std::size_t>(q.axis);
  std::size_t inner = 1;
  for (std::size_t d = axis + 1; d < body().shape.size(); ++d)
    inner *= static_cast<std::size_t>(body().shape[d]);
  const std::size_t channels = static_cast<std::size_t>(body().shape[axis]);
  const Tensor scales = q.scales.to(DType::F64);
  const auto s = scales.span<double>();
  if (q.scheme == Quantization::Scheme::per_channel_affine_float_qparams) {
    const Tensor zps = q.zero_points.to(DType::F64);
    const auto z = zps.span<double>();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = (i / inner) % channels;
      o[i] = (static_cast<float>(int_at(in.data(), body().dtype, i)) - static_cast<float>(z[c])) *
             static_cast<float>(s[c]);
    }
    return out;
  }
  const Tensor zps = q.zero_points.to(DType::I64);
  const auto z = zps.span<std::int64_t>();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = (i / inner) % channels;
    o[i] =
        static_cast<float>(static_cast<double>(int_at(in.data(), body().dtype, i) - z[c]) * s[c]);
  }
  return out;
}

}  // namespace torchport
