#include "formats/read/quantized.hpp"

#include <map>
#include <memory>
#include <string>

#include "torchport/core/error.hpp"
#include "torchport/formats/quantize.hpp"

namespace torchport::formats::quantized {
namespace {

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorCode::corrupt, "torch._utils._rebuild_qtensor: " + what);
}

Shape ints(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Tuple) && !v.is(Value::Kind::List))
    corrupt(std::string(what) + " is " + v.repr(3));
  Shape out;
  for (const auto& i : v.items()) {
    if (!i.is(Value::Kind::Int))
      corrupt(std::string(what) + " " + v.repr(8) + " holds a non-integer");
    out.push_back(i.as_int());
  }
  return out;
}

Tensor tensor_arg(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Tensor))
    corrupt(std::string(what) + " is a " + std::string(v.kind_name()) + ", not a tensor");
  return v.as_tensor();
}

}  // namespace

std::optional<DType> storage_dtype(std::string_view storage_class) noexcept {
  if (storage_class == "QInt8Storage") return DType::I8;
  if (storage_class == "QUInt8Storage") return DType::U8;
  if (storage_class == "QInt32Storage") return DType::I32;
  return std::nullopt;
}

std::optional<int> packed_storage_bits(std::string_view storage_class) noexcept {
  if (storage_class == "QUInt4x2Storage") return 4;
  if (storage_class == "QUInt2x4Storage") return 2;
  return std::nullopt;
}

Tensor rebuild(const Value& args, const std::function<Value(const Value&)>& inner) {
  if (!args.is(Value::Kind::Tuple) || args.size() < 5)
    corrupt("called with " + args.repr(3) +
            ", not (storage, offset, size, stride, quantizer_params, ...)");
  const auto& a = args.items();
  const Tensor storage = tensor_arg(inner(a[0]), "storage");
  if (!a[1].is(Value::Kind::Int)) corrupt("storage offset " + a[1].repr(2));
  const DType d = storage.dtype();
  if (Quantization::qdtype_name(d).empty())
    corrupt("storage of " + std::string(dtype_name(d)) + " (a quantized storage class is needed)");
  // A packed storage (quint4x2, quint2x4): torch makes these tensors only
  // contiguous from the storage's start (its quantizer packs a whole
  // tensor), and its set_ does not check them against the storage, so any
  // other view would read past it or between values.
  const int bits = storage.is_quantized() ? storage.quantization()->bits : 8;
  Shape size = ints(a[2], "size"), stride = ints(a[3], "stride");
  if (bits != 8 && (a[1].as_int() != 0 || stride != contiguous_strides(size)))
    throw Error(ErrorCode::unsupported,
                "a " + std::string(Quantization::qdtype_name(d, bits)) + " view at offset " +
                    a[1].repr(2) + " with strides " + a[3].repr(8) + " of sizes " + a[2].repr(8) +
                    " (torch packs these tensors contiguous from the storage's start)");
  Tensor t = bits != 8 ? Tensor() : Tensor(d, size, stride, a[1].as_int(), storage.storage());
  const Value& params = a[4];
  if (!params.is(Value::Kind::Tuple) || params.size() < 1 ||
      !params.items()[0].is(Value::Kind::Global))
    corrupt("quantizer parameters " + params.repr(4));
  const auto& p = params.items();
  const Global& scheme = p[0].as_global();
  auto q = std::make_shared<Quantization>();
  if (scheme.is("torch", "per_tensor_affine")) {
    if (p.size() != 3 || !(p[1].is(Value::Kind::Float) || p[1].is(Value::Kind::Int)) ||
        !p[2].is(Value::Kind::Int))
      corrupt("per-tensor quantizer parameters " + params.repr(4) +
              " are not (scheme, scale, zero_point)");
    q->scheme = Quantization::Scheme::per_tensor_affine;
    q->scale = p[1].as_float();
    q->zero_point = p[2].as_int();
  } else if (scheme.is("torch", "per_channel_affine") ||
             scheme.is("torch", "per_channel_affine_float_qparams")) {
    if (p.size() != 4 || !p[3].is(Value::Kind::Int))
      corrupt("per-channel quantizer parameters " + params.repr(4) +
              " are not (scheme, scales, zero_points, axis)");
    q->scales = tensor_arg(inner(p[1]), "scales");
    q->zero_points = tensor_arg(inner(p[2]), "zero points");
    q->axis = p[3].as_int();
    // torch writes per_channel_affine for both per-channel schemes; its
    // _empty_per_channel_affine_quantized picks the quantizer by the zero
    // points' dtype (make_per_channel_affine_quantizer): float or half zero
    // points are float qparams, any other is converted to integers.
    const DType zd = q->zero_points.dtype();
    q->scheme = zd == DType::F32 || zd == DType::F16
                    ? Quantization::Scheme::per_channel_affine_float_qparams
                    : Quantization::Scheme::per_channel_affine;
    if (bits != 8 && q->scheme != Quantization::Scheme::per_channel_affine_float_qparams)
      throw Error(ErrorCode::unsupported,
                  "a " + std::string(Quantization::qdtype_name(d, bits)) +
                      " tensor with integer per-channel zero points (torch quantizes those per "
                      "tensor or per channel with float zero points only)");
  } else {
    throw Error(ErrorCode::unsupported, "quantizer scheme " + scheme.qualified() +
                                            " (per-tensor and per-channel affine are read)");
  }
  q->bits = bits;
  try {
    if (bits != 8)
      return Tensor::packed_quantized(storage.file_storage(), std::move(size), std::move(q));
    return t.with_quantization(std::move(q));
  } catch (const Error& e) {
    corrupt(e.message());
  }
}

}  // namespace torchport::formats::quantized

namespace torchport {

TensorCatalog dequantize_tensors(const TensorCatalog& catalog) {
  std::vector<NamedTensor> out;
  out.reserve(catalog.size());
  for (const auto& t : catalog.tensors()) {
    if (!t.tensor.is_quantized()) {
      out.push_back(t);
      continue;
    }
    try {
      out.push_back({t.name, t.tensor.dequantize()});
    } catch (const Error& e) {
      throw e.at_key(t.name);
    }
  }
  return catalog.with_tensors(std::move(out), catalog.metadata());
}

TensorCatalog split_quantized(const TensorCatalog& catalog) {
  std::vector<NamedTensor> out;
  std::map<std::string, std::string> meta = catalog.metadata();
  for (const auto& t : catalog.tensors()) {
    if (!t.tensor.is_quantized()) {
      out.push_back(t);
      continue;
    }
    const Quantization& q = *t.tensor.quantization();
    out.push_back({t.name, t.tensor.with_quantization(nullptr)});
    if (q.scheme == Quantization::Scheme::per_tensor_affine) {
      out.push_back({t.name + ".q_scale", Tensor::scalar(q.scale)});
      out.push_back({t.name + ".q_zero_point", Tensor::scalar(q.zero_point)});
    } else {
      out.push_back({t.name + ".q_per_channel_scales", q.scales});
      out.push_back({t.name + ".q_per_channel_zero_points", q.zero_points});
      out.push_back({t.name + ".q_per_channel_axis", Tensor::scalar(q.axis)});
    }
    meta["torchport.quantized." + t.name] =
        std::string(Quantization::qdtype_name(t.tensor.dtype(), t.tensor.quantization()->bits)) +
        " " + std::string(Quantization::scheme_name(q.scheme));
  }
  try {
    return catalog.with_tensors(std::move(out), std::move(meta));
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument,
                "splitting quantized tensors: a name it makes is taken (" + e.message() + ")",
                e.key());
  }
}

void refuse_quantized(const TensorCatalog& catalog, std::string_view target) {
  for (const auto& t : catalog.tensors())
    if (t.tensor.is_quantized())
      throw Error(
          ErrorCode::invalid_argument,
          "tensor is quantized (" +
              std::string(
                  Quantization::qdtype_name(t.tensor.dtype(), t.tensor.quantization()->bits)) +
              ", " + std::string(Quantization::scheme_name(t.tensor.quantization()->scheme)) +
              ") and " + std::string(target) +
              " has no quantized type: pass --dequantize (write F32, dequantize_tensors) or "
              "--keep-quantized (integers plus q_scale/q_zero_point tensors, split_quantized)",
          t.name);
}

}  // namespace torchport
