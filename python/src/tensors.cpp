// Tensors to numpy arrays and torch tensors, as views of their storage.

#include <optional>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "binding.hpp"

namespace torchport::python {
namespace {

namespace dl = nb::dlpack;

[[noreturn]] void unsupported(const std::string& key, const std::string& message) {
  throw Error(ErrorCode::unsupported, message, key);
}

// The numpy dtype of `d`, when numpy has one.
std::optional<dl::dtype> numpy_dtype(DType d) {
  const auto bits = static_cast<std::uint8_t>(dtype_size(d) * 8);
  switch (d) {
    case DType::BOOL:
      return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::Bool), 8, 1};
    case DType::U8:
    case DType::U16:
    case DType::U32:
    case DType::U64:
      return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::UInt), bits, 1};
    case DType::I8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::Int), bits, 1};
    case DType::F16:
    case DType::F32:
    case DType::F64:
      return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::Float), bits, 1};
    case DType::C64:
    case DType::C128:
      return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::Complex), bits, 1};
    default:
      return std::nullopt;
  }
}

// The unsigned integer of the element's width: how the raw bits travel.
dl::dtype raw_dtype(DType d) {
  return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::UInt),
                   static_cast<std::uint8_t>(dtype_size(d) * 8), 1};
}

// A capsule holding a copy of `t` (its storage, and what keeps the storage's
// bytes alive: the mapped file, the arena), released with the last view.
nb::capsule owner_of(const Tensor& t) {
  return nb::capsule(new Tensor(t), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
}

template <class Framework_, bool ReadOnly>
nb::object view_as(const Tensor& t, dl::dtype dtype) {
  using Array = std::conditional_t<ReadOnly, nb::ndarray<Framework_, const std::uint8_t>,
                                   nb::ndarray<Framework_, std::uint8_t>>;
  const auto bytes = t.storage()->bytes();  // makes a deferred storage's bytes
  const std::byte* data =
      bytes.data() + static_cast<std::uint64_t>(t.storage_offset()) * dtype_size(t.dtype());
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<std::int64_t> strides(t.strides().begin(), t.strides().end());
  Array a(const_cast<std::byte*>(data), shape.size(), shape.data(), owner_of(t), strides.data(),
          dtype);
  return a.cast();
}

nb::object numpy_view(const Tensor& t, dl::dtype dtype, bool writable) {
  return writable ? view_as<nb::numpy, false>(t, dtype) : view_as<nb::numpy, true>(t, dtype);
}

nb::module_ torch_module(const std::string& key) {
  try {
    return nb::module_::import_("torch");
  } catch (nb::python_error&) {
    unsupported(key, "framework='torch' needs torch, which cannot be imported here");
  }
}

nb::object torch_dtype(const nb::module_& torch, DType d, const std::string& key) {
  const std::string name(dtype_torch_name(d));
  if (!nb::hasattr(torch, name.c_str()))
    unsupported(key,
                "this torch has no dtype torch." + name + " (" + std::string(dtype_name(d)) + ")");
  return torch.attr(name.c_str());
}

// A torch tensor over the storage (zero copy): the storage's bytes go to
// torch once, through DLPack, as a 1-D uint8 tensor (the one dtype every
// torch's DLPack reads), which torch views as the dtype and strides
// (`view(dtype)`, `as_strided`): tensors that share a storage in the file
// share one torch storage, as torch.load gives them. torch cannot mark a
// tensor read-only, so its memory must accept writes: torchport maps files
// copy-on-write for Python (MapOptions::copy_on_write); owned storages are
// memory.
nb::object torch_view(const Tensor& t, const std::string& key, TorchBases* bases) {
  nb::module_ torch = torch_module(key);
  const std::shared_ptr<Storage>& storage = t.storage();
  nb::object base;
  if (bases != nullptr) {
    auto it = bases->find(storage.get());
    if (it != bases->end()) base = it->second;
  }
  if (!base.is_valid()) {
    const auto bytes = storage->bytes();  // makes a deferred storage's bytes
    const std::size_t n = bytes.size();
    nb::capsule owner(new std::shared_ptr<Storage>(storage),
                      [](void* p) noexcept { delete static_cast<std::shared_ptr<Storage>*>(p); });
    nb::ndarray<nb::pytorch, std::uint8_t> a(const_cast<std::byte*>(bytes.data()), 1, &n, owner);
    base = a.cast();
    if (bases != nullptr) bases->emplace(storage.get(), base);
  }
  const std::size_t width = dtype_size(t.dtype());
  nb::object typed = base;
  if (t.dtype() != DType::U8) {
    const std::uint64_t whole = storage->nbytes() / width * width;
    if (whole != storage->nbytes()) typed = base.attr("narrow")(0, 0, whole);
    typed = typed.attr("view")(torch_dtype(torch, t.dtype(), key));
  }
  return typed.attr("as_strided")(nb::cast(std::vector<std::int64_t>(t.shape())),
                                  nb::cast(std::vector<std::int64_t>(t.strides())),
                                  t.storage_offset());
}

nb::object torch_quantized(const Tensor& t, const std::string& key, TorchBases* bases) {
  const Quantization& q = *t.quantization();
  if (q.bits != 8 && q.bits != 32)
    unsupported(key, "a " + std::string(Quantization::qdtype_name(t.dtype(), q.bits)) +
                         " tensor (values packed " + std::to_string(8 / q.bits) +
                         " a byte): torchport gives its unpacked integers only "
                         "(torchport.open(...).get_raw(name))");
  nb::module_ torch = torch_module(key);
  Tensor plain(t.dtype(), t.shape(), t.strides(), t.storage_offset(), t.storage());
  nb::object ints = torch_view(plain, key, bases);
  if (q.scheme == Quantization::Scheme::per_tensor_affine)
    return torch.attr("_make_per_tensor_quantized_tensor")(ints, q.scale, q.zero_point);
  nb::object scales = torch_view(q.scales.contiguous(), key, nullptr);
  nb::object zero_points = torch_view(q.zero_points.contiguous(), key, nullptr);
  return torch.attr("_make_per_channel_quantized_tensor")(ints, scales, zero_points, q.axis);
}

nb::object torch_sparse(const Tensor& t, const std::string& key, TorchBases* bases) {
  nb::module_ torch = torch_module(key);
  const SparseParts& p = *t.sparse();
  const auto part = [&](const Tensor& x) { return torch_view(x, key, bases); };
  nb::object size = nb::cast(std::vector<std::int64_t>(p.size));
  nb::object values = tensor_to_python(p.values, Framework::torch, true, key, bases);
  switch (p.layout) {
    case SparseParts::Layout::coo:
      return torch.attr("sparse_coo_tensor")(part(p.indices), values, size);
    case SparseParts::Layout::csr:
      return torch.attr("sparse_csr_tensor")(part(p.compressed_indices), part(p.plain_indices),
                                             values, size);
    case SparseParts::Layout::csc:
      return torch.attr("sparse_csc_tensor")(part(p.compressed_indices), part(p.plain_indices),
                                             values, size);
    case SparseParts::Layout::bsr:
      return torch.attr("sparse_bsr_tensor")(part(p.compressed_indices), part(p.plain_indices),
                                             values, size);
    case SparseParts::Layout::bsc:
      return torch.attr("sparse_bsc_tensor")(part(p.compressed_indices), part(p.plain_indices),
                                             values, size);
  }
  unsupported(key, "a sparse layout this binding does not know");
}

}  // namespace

Framework parse_framework(std::string_view name) {
  if (name == "numpy" || name == "np") return Framework::numpy;
  if (name == "torch" || name == "pt" || name == "pytorch") return Framework::torch;
  throw Error(ErrorCode::invalid_argument,
              "unknown framework '" + std::string(name) + "' (numpy or torch)");
}

nb::object tensor_to_python(const Tensor& t, Framework fw, bool writable, const std::string& key,
                            TorchBases* bases) {
  if (!t.defined()) unsupported(key, "an undefined tensor");
  const char* hint = "; framework='torch' gives torch's own";
  if (t.is_meta()) {
    if (fw == Framework::numpy)
      unsupported(key, "a meta tensor (" + t.description() + ": no data)" + hint);
    nb::module_ torch = torch_module(key);
    nb::kwargs kw;
    kw["dtype"] = torch_dtype(torch, t.dtype(), key);
    kw["device"] = "meta";
    return torch.attr("empty_strided")(nb::cast(std::vector<std::int64_t>(t.shape())),
                                       nb::cast(std::vector<std::int64_t>(t.strides())), **kw);
  }
  if (t.is_sparse()) {
    if (fw == Framework::numpy)
      unsupported(key, "a sparse tensor (" + t.description() + ")" + hint);
    return torch_sparse(t, key, bases);
  }
  if (t.is_quantized()) {
    if (fw == Framework::numpy)
      unsupported(key, "a quantized tensor (" + t.description() + ")" + hint +
                           ", get_raw(name) its integers");
    return torch_quantized(t, key, bases);
  }
  if (fw == Framework::torch) return torch_view(t, key, bases);
  const auto dt = numpy_dtype(t.dtype());
  if (!dt)
    unsupported(key, "numpy has no " + std::string(dtype_name(t.dtype())) +
                         " dtype: framework='torch' gives it as torch." +
                         std::string(dtype_torch_name(t.dtype())) +
                         ", get_raw(name) its bits as unsigned integers");
  return numpy_view(t, *dt, writable);
}

nb::tuple tensor_raw(const Tensor& t, bool writable, const std::string& key) {
  if (!t.defined() || t.is_meta() || t.is_sparse())
    unsupported(key, t.defined() ? "a " + std::string(t.is_meta() ? "meta" : "sparse") +
                                       " tensor has no elements of its own to view"
                                 : "an undefined tensor");
  const auto dt = numpy_dtype(t.dtype());
  return nb::make_tuple(numpy_view(t, dt ? *dt : raw_dtype(t.dtype()), writable),
                        std::string(dtype_name(t.dtype())));
}

}  // namespace torchport::python
