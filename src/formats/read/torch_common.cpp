#include "formats/read/torch_common.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "formats/read/numpy.hpp"
#include "formats/read/quantized.hpp"
#include "formats/read/sparse.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::formats {

DType storage_class_dtype(const Value& storage_type, int* packed_bits) {
  if (!storage_type.is(Value::Kind::Global))
    throw Error(ErrorCode::corrupt,
                "storage type is a " + std::string(storage_type.kind_name()) + ", not a class");
  const Global& g = storage_type.as_global();
  // torch 1.13 pickles the untyped storage class as torch.storage.UntypedStorage.
  if (g.is("torch.storage", "UntypedStorage")) return DType::U8;
  if (g.module == "torch" || g.module == "torch.cuda") {
    if (g.name == "UntypedStorage") return DType::U8;
    if (auto d = dtype_from_storage_class(g.name)) return *d;
    if (auto d = quantized::storage_dtype(g.name)) return *d;  // a quantized tensor's integers
    if (auto bits = quantized::packed_storage_bits(g.name)) {
      if (packed_bits == nullptr)
        throw Error(ErrorCode::unsupported, "storage class " + g.qualified() +
                                                " (a packed quantized storage) in this format "
                                                "(torch wrote those only to zip and legacy files)");
      *packed_bits = *bits;
      return DType::U8;  // a byte per element as torch counts them: the packed bytes
    }
  }
  throw Error(ErrorCode::unsupported, "storage class " + g.qualified() +
                                          " (quantized and other special storages are not read)");
}

namespace {

std::string text_of(const Value& v, const char* what) {
  // Python 2 pickles may carry these as bytes.
  if (v.is(Value::Kind::Str) || v.is(Value::Kind::Bytes))
    return v.is(Value::Kind::Str) ? v.as_str() : v.as_bytes();
  if (v.is(Value::Kind::Int)) return std::to_string(v.as_int());
  throw Error(ErrorCode::corrupt,
              std::string(what) + " is a " + std::string(v.kind_name()) + ", not a string");
}

std::uint64_t count_of(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Int) || v.as_int() < 0)
    throw Error(ErrorCode::corrupt,
                std::string(what) + " is " + v.repr(3) + ", not a non-negative integer");
  return static_cast<std::uint64_t>(v.as_int());
}

}  // namespace

StorageRef parse_storage_ref(const Value& pid) {
  if (pid.is(Value::Kind::Str))
    throw Error(ErrorCode::unsupported,
                "the storage reference \"" + pid.as_str().substr(0, 48) +
                    "...\" is text: the file was saved with pickle protocol 0, which turns torch's "
                    "persistent ids into strings; torch.load cannot read such files either (it "
                    "fails with an AssertionError)");
  // torch.load's persistent_load takes such tuples only ("saved_id must be
  // a tuple"; torch's weights_only unpickler refuses any id but a tuple or,
  // from 2.9, an int, before persistent_load sees it).
  if (!pid.is(Value::Kind::Tuple) || pid.size() < 5 || pid.size() > 6)
    throw Error(ErrorCode::corrupt,
                "persistent id " + pid.repr(6) +
                    " is not a ('storage', type, key, location, numel) tuple; torch.load "
                    "refuses it too");
  const auto& a = pid.items();
  const bool storage_tag = (a[0].is(Value::Kind::Str) && a[0].as_str() == "storage") ||
                           (a[0].is(Value::Kind::Bytes) && a[0].as_bytes() == "storage");
  if (!storage_tag) {
    const std::string tag = text_of(a[0], "persistent id tag");
    throw Error(ErrorCode::unsupported,
                "persistent id of kind '" + tag +
                    "' (only storages are read; torch's default torch.load refuses it too: "
                    "\"Only persistent_load of storage is allowed\")");
  }
  StorageRef r;
  r.dtype = storage_class_dtype(a[1], &r.packed_bits);
  r.key = text_of(a[2], "storage key");
  r.location = text_of(a[3], "storage location");
  r.numel = count_of(a[4], "storage size");
  if (!detail::mul_ok(r.numel, dtype_size(r.dtype), r.nbytes))
    throw Error(ErrorCode::corrupt, "storage '" + r.key + "' declares " + std::to_string(r.numel) +
                                        " elements, more bytes than fit in 64 bits");
  if (pid.size() == 6 && !a[5].is_none()) {
    const Value& vm = a[5];
    if (!vm.is(Value::Kind::Tuple) || vm.size() != 3)
      throw Error(ErrorCode::corrupt,
                  "storage view metadata " + vm.repr(4) + " is not (key, offset, size)");
    if (r.packed_bits != 0)
      throw Error(ErrorCode::unsupported,
                  "a storage view of a packed quantized storage (torch never wrote one)");
    r.view =
        StorageRef::View{text_of(vm.items()[0], "view key"), count_of(vm.items()[1], "view offset"),
                         count_of(vm.items()[2], "view size")};
  }
  return r;
}

Value storage_value(DType dtype, std::uint64_t numel, std::shared_ptr<Storage> storage,
                    int packed_bits) {
  if (packed_bits != 0) {
    // A QUInt4x2Storage of n bytes: its 8 / bits × n values, unpacked when
    // read, packed as the file_storage(); only _rebuild_qtensor takes it.
    auto q = std::make_shared<Quantization>();
    q->bits = packed_bits;
    return Value::storage(Tensor::packed_quantized(
        std::move(storage), {static_cast<std::int64_t>(numel) * (8 / packed_bits)}, std::move(q)));
  }
  return Value::storage(
      Tensor(dtype, {static_cast<std::int64_t>(numel)}, {1}, 0, std::move(storage)));
}

std::shared_ptr<Storage> record_storage(const Source& source, std::uint64_t offset,
                                        std::uint64_t nbytes, DType dtype, bool big_endian) {
  if (offset > source.size() || nbytes > source.size() - offset)
    throw Error(ErrorCode::truncated,
                "record [" + std::to_string(offset) + ", +" + std::to_string(nbytes) +
                    ") lies outside the " + std::to_string(source.size()) + " bytes of " +
                    source.name(),
                {}, offset, source.name());
  if (!source.contiguous()) {
    // Read when used, straight into where a copy puts it (a remote file).
    auto ranged = source.storage(offset, nbytes);
    if (!big_endian) return ranged;
    const std::size_t unit = is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
    return Storage::deferred(nbytes, [ranged, unit] {
      auto out = Storage::allocate(ranged->nbytes());
      auto dst = out->mutable_bytes();
      ranged->read_into(0, dst);
      if (unit > 1)
        for (std::size_t i = 0; i + unit <= dst.size(); i += unit)
          for (std::size_t a = 0, b = unit - 1; a < b; ++a, --b) std::swap(dst[i + a], dst[i + b]);
      return out;
    });
  }
  const std::span<const std::byte> rec =
      source.bytes().subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(nbytes));
  const auto addr = reinterpret_cast<std::uintptr_t>(rec.data());
  if (!big_endian) {
    if (addr % dtype_alignment(dtype) == 0)
      return Storage::borrow(rec, source.owner(), source.file());
    // Unaligned (legacy records follow an 8-byte count): an aligned copy
    // when the bytes are asked for, but copies elsewhere (materialize, a
    // typed load) read the file straight into their destination.
    return Storage::deferred_copy(rec, source.owner(), source.file());
  }
  // Big-endian: copy into aligned memory on first use, swapping each
  // element (each component of a complex number).
  const std::size_t unit = is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
  std::shared_ptr<const void> owner = source.owner();
  return Storage::deferred(nbytes, [rec, owner, unit] {
    auto out = Storage::allocate(rec.size());
    auto dst = out->mutable_bytes();
    if (!dst.empty()) std::memcpy(dst.data(), rec.data(), dst.size());
    if (unit > 1)
      for (std::size_t i = 0; i + unit <= dst.size(); i += unit)
        for (std::size_t a = 0, b = unit - 1; a < b; ++a, --b) std::swap(dst[i + a], dst[i + b]);
    return out;
  });
}

namespace {

const Value& arg(const Global& g, const Value& args, std::size_t i) {
  const auto& a = args.items();
  if (i >= a.size())
    throw Error(ErrorCode::corrupt, g.qualified() + " called with " + std::to_string(a.size()) +
                                        " arguments, needs at least " + std::to_string(i + 1));
  return a[i];
}

// Python raises TypeError for a call with another number of arguments.
void arity(const Global& g, const Value& args, std::size_t lo, std::size_t hi) {
  if (args.size() < lo || args.size() > hi)
    throw Error(
        ErrorCode::corrupt,
        g.qualified() + " called with " + std::to_string(args.size()) + " arguments; it takes " +
            (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)));
}

Shape int_list(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Tuple) && !v.is(Value::Kind::List))
    throw Error(ErrorCode::corrupt, std::string(what) + " is " + v.repr(3) + ", not a tuple");
  Shape out;
  out.reserve(v.size());
  for (const auto& i : v.items()) {
    if (!i.is(Value::Kind::Int))
      throw Error(ErrorCode::corrupt, std::string(what) + " " + v.repr(8) + " holds a non-integer");
    out.push_back(i.as_int());
  }
  return out;
}

std::int64_t int_arg(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Int))
    throw Error(ErrorCode::corrupt, std::string(what) + " is " + v.repr(3) + ", not an int");
  return v.as_int();
}

// torch's sub-byte shell dtypes (torch.uint1..uint7, int1..int7, and
// torch.bit, which is uint1): no arithmetic, a byte an element. torch 2.14
// cannot save one ("dtype torch.uint4 is not recognized"), though its
// loader views a hand-made file's bytes as one; not read.
bool shell_dtype(std::string_view name) {
  if (name == "bit") return true;
  const std::string_view stem = name.starts_with("uint")  ? name.substr(4)
                                : name.starts_with("int") ? name.substr(3)
                                                          : std::string_view();
  return stem.size() == 1 && stem[0] >= '1' && stem[0] <= '7';
}

// The dtype a rebuild names: a global torch.<dtype> of ours, else refused
// by its name (never guessed from its size).
DType dtype_global(const Value& v) {
  if (v.is(Value::Kind::Global) && v.as_global().module == "torch") {
    const std::string& name = v.as_global().name;
    if (auto d = dtype_from_torch_name(name)) return *d;
    if (shell_dtype(name))
      throw Error(ErrorCode::unsupported,
                  "tensor dtype torch." + name +
                      ", a sub-byte shell dtype torch 2.14 cannot save (\"dtype torch." + name +
                      " is not recognized\"); not read");
  }
  throw Error(ErrorCode::unsupported, "tensor dtype " + v.repr(2) + " is not one torchport reads");
}

Tensor as_tensor(const Value& v) {
  if (!v.is(Value::Kind::Tensor))
    throw Error(ErrorCode::corrupt,
                "parameter data is a " + std::string(v.kind_name()) + ", not a tensor");
  return v.as_tensor();
}

// `tensor.requires_grad = v`: a bool, and True only for floating and
// complex dtypes (torch raises otherwise).
void requires_grad(const Value& v, DType dtype, const char* where) {
  if (!v.is(Value::Kind::Bool))
    throw Error(ErrorCode::corrupt,
                std::string(where) + ": requires_grad is " + v.repr(2) + ", not a bool");
  if (v.as_bool() && !is_floating(dtype) && !is_complex(dtype))
    throw Error(ErrorCode::corrupt,
                std::string(where) + ": requires_grad=True on a " + std::string(dtype_name(dtype)) +
                    " tensor, which torch refuses (only floating and complex tensors "
                    "can require gradients)");
}

// `tensor._backward_hooks = v`: torch writes an empty OrderedDict (or None).
void backward_hooks(const Value& v, const char* where) {
  if (!v.is_none() && !v.is(Value::Kind::Dict))
    throw Error(ErrorCode::corrupt,
                std::string(where) + ": backward hooks are " + v.repr(2) + ", not a dict");
}

// Tensor attributes that Python's setattr does not just store: assigning
// them changes the tensor (data, real, imag, grad, requires_grad, ...) or
// fails. These are torch 1.13's data descriptors of torch.Tensor and
// nn.Parameter; an object state naming one is refused, every other
// attribute is a plain Python attribute the catalogue does not keep.
constexpr std::string_view kTensorDescriptors[] = {
    "H",
    "T",
    "__cuda_array_interface__",
    "_backward_hooks",
    "_base",
    "_cdata",
    "_grad",
    "_grad_fn",
    "_has_symbolic_sizes_strides",
    "_python_dispatch",
    "_version",
    "data",
    "device",
    "dtype",
    "grad",
    "grad_fn",
    "imag",
    "is_cpu",
    "is_cuda",
    "is_ipu",
    "is_leaf",
    "is_meta",
    "is_mkldnn",
    "is_mps",
    "is_nested",
    "is_ort",
    "is_quantized",
    "is_sparse",
    "is_sparse_csr",
    "is_vulkan",
    "is_xpu",
    "layout",
    "mH",
    "mT",
    "name",
    "names",
    "ndim",
    "output_nr",
    "real",
    "requires_grad",
    "retains_grad",
    "shape",
    "volatile",
    "itemsize",
    "nbytes",
};

void attribute_dict(const Value& d, const char* where) {
  if (d.is_none()) return;  // Python 3.11 pickles an absent __dict__ as None
  if (!d.is(Value::Kind::Dict))
    throw Error(ErrorCode::unsupported, std::string(where) + ": object state " + d.repr(3) +
                                            " is not a dict of attributes (the form torch writes)");
  for (const auto& [k, v] : d.pairs()) {
    if (!k.is(Value::Kind::Str))
      throw Error(ErrorCode::corrupt,
                  std::string(where) + ": attribute name " + k.repr(2) + " is not a string");
    const std::string& name = k.as_str();
    if (name.starts_with("__") ||
        std::find(std::begin(kTensorDescriptors), std::end(kTensorDescriptors), name) !=
            std::end(kTensorDescriptors))
      throw Error(ErrorCode::unsupported,
                  std::string(where) + ": the state sets the tensor attribute '" + name +
                      "', which would change the tensor itself; torch never writes such a state");
  }
}

// torch._utils._set_obj_state(obj, state): a dict of attributes, or a
// (dict, slots dict) pair. The attributes are Python-level extras (a
// Parameter's custom fields): checked, not kept.
void obj_state(const Value& state, const char* where) {
  if (state.is(Value::Kind::Tuple)) {
    if (state.size() != 2)
      throw Error(ErrorCode::corrupt, std::string(where) + ": invalid serialized state " +
                                          state.repr(3) + " (a tuple state is (dict, slots))");
    attribute_dict(state.items()[0], where);
    attribute_dict(state.items()[1], where);
    return;
  }
  attribute_dict(state, where);
}

// The functions torch's tensor reductions name, beyond the dense ones.
std::string not_read(const Global& g, const Value& args) {
  const std::string& n = g.name;
  if (n == "_rebuild_sparse_tensor" || n == "_rebuild_sparse_csr_tensor") {
    std::string layout = n == "_rebuild_sparse_tensor" ? "sparse" : "sparse CSR";
    if (args.size() > 0 && args.items()[0].is(Value::Kind::Object)) {
      const Object& o = args.items()[0].as_object();
      if (o.cls.is("torch.serialization", "_get_layout") && o.args.size() == 1 &&
          o.args.items()[0].is(Value::Kind::Str))
        layout = "sparse (layout " + o.args.items()[0].as_str() + ")";
    }
    return g.qualified() + ": a " + layout + " tensor; sparse tensors are not read yet";
  }
  if (n == "_rebuild_qtensor")
    return g.qualified() + ": a quantized tensor; quantized tensors are not read yet";
  if (n == "_rebuild_wrapper_subclass")
    return g.qualified() +
           ": a tensor without storage of its own (an XLA or other device tensor, a fake or "
           "functional tensor); its data is not in the file as torch.load reads it, and such "
           "tensors are not read";
  if (n == "_rebuild_device_tensor_from_numpy" || n == "_rebuild_device_tensor_from_cpu_tensor" ||
      n == "_rebuild_xla_tensor" || n == "_rebuild_mps_tensor")
    return g.qualified() +
           ": a tensor of a device other than the CPU saved without a storage; not read";
  return g.qualified() + ": a tensor rebuild function torchport does not read";
}

// The storage a rebuild reads: a value persistent_load gave (torch's
// _rebuild_tensor asks for the storage's untyped bytes, which a tensor has
// not).
const Tensor& storage_arg(const Value& v, const char* where) {
  if (!v.is_storage())
    throw Error(ErrorCode::corrupt,
                std::string(where) + " from a " +
                    std::string(v.is(Value::Kind::Tensor) ? "tensor" : v.kind_name()) +
                    " instead of a storage (torch.load fails on it)");
  const Tensor& st = v.as_tensor();
  if (st.is_quantized())  // a packed storage: its tensor is unpacked values
    throw Error(ErrorCode::unsupported,
                std::string(where) + " from a packed quantized storage (" +
                    std::string(Quantization::qdtype_name(st.dtype(), st.quantization()->bits)) +
                    "): torch rebuilds those with _rebuild_qtensor only");
  return st;
}

const detail::StringViewSet& layout_names() {
  static const detail::StringViewSet names = {
      "torch.strided",    "torch.sparse_coo", "torch.sparse_csr", "torch.sparse_csc",
      "torch.sparse_bsr", "torch.sparse_bsc", "torch._mkldnn",    "torch.jagged",
  };
  return names;
}

// The tensor a call of `g` with `args` describes, or nothing when it
// describes none. Values nested in the call (a parameter's data) go through
// `inner`: the rebuild walk rebuilds them, the call hook (which sees inner
// calls before outer ones) takes them as they are. Each form is checked as
// torch's function would check it (argument counts and kinds, requires_grad
// on integer tensors, views inside their storage).
template <class Inner>
std::optional<Tensor> tensor_of_call(const Global& g, const Value& args, Inner&& inner) {
  const bool utils = g.module == "torch._utils";
  if (utils && (g.name == "_rebuild_tensor" || g.name == "_rebuild_tensor_v2" ||
                g.name == "_rebuild_tensor_v3")) {
    // _rebuild_tensor(storage, offset, size, stride)
    // _rebuild_tensor_v2(..., requires_grad, backward_hooks[, metadata])
    // _rebuild_tensor_v3(..., requires_grad, backward_hooks, dtype[, metadata])
    const bool v1 = g.name == "_rebuild_tensor", v3 = g.name == "_rebuild_tensor_v3";
    if (v1)
      arity(g, args, 4, 4);
    else if (v3)
      arity(g, args, 7, 8);
    else
      arity(g, args, 6, 7);
    const Tensor& st = storage_arg(arg(g, args, 0), "tensor rebuilt");
    const std::int64_t offset = int_arg(arg(g, args, 1), "storage offset");
    Shape size = int_list(arg(g, args, 2), "size");
    Shape stride = int_list(arg(g, args, 3), "stride");
    const DType dtype = v3 ? dtype_global(arg(g, args, 6)) : st.dtype();
    bool conj = false, neg = false;
    if (!v1) {
      requires_grad(arg(g, args, 4), dtype, g.name.c_str());
      backward_hooks(arg(g, args, 5), g.name.c_str());
      const std::size_t meta = v3 ? 7 : 6;
      // torch._utils.set_tensor_metadata: {'conj': True} and {'neg': True}
      // (torch._C._set_tensor_metadata reads those two keys); anything
      // else is not read.
      if (args.size() > meta && !args.items()[meta].is_none()) {
        const Value& m = args.items()[meta];
        bool known = m.is(Value::Kind::Dict);
        if (known)
          for (const auto& [k, v] : m.pairs()) {
            if (!k.is(Value::Kind::Str) || !v.is(Value::Kind::Bool) ||
                (k.as_str() != "conj" && k.as_str() != "neg")) {
              known = false;
              break;
            }
            (k.as_str() == "conj" ? conj : neg) = v.as_bool();
          }
        if (!known)
          throw Error(ErrorCode::unsupported,
                      g.qualified() + " with tensor metadata " + m.repr(3) + " (not read)");
      }
    }
    Tensor t(dtype, std::move(size), std::move(stride), offset, st.storage());
    if (conj || neg) return t.with_view_bits(conj, neg);
    return t;
  }
  if (utils && (g.name == "_rebuild_parameter" || g.name == "_rebuild_parameter_with_state")) {
    // (data, requires_grad, backward_hooks[, state]): Parameter(data, requires_grad)
    const bool with_state = g.name == "_rebuild_parameter_with_state";
    arity(g, args, with_state ? 4 : 3, with_state ? 4 : 3);
    Tensor t = as_tensor(inner(arg(g, args, 0)));
    requires_grad(arg(g, args, 1), t.dtype(), g.name.c_str());
    backward_hooks(arg(g, args, 2), g.name.c_str());
    if (with_state) obj_state(arg(g, args, 3), g.name.c_str());
    return t;
  }
  if (g.module == "torch._tensor" && g.name == "_rebuild_from_type_v2") {
    // (func, new_type, args, state): func(*args), made a new_type, with the
    // state set as attributes. torch writes it around its own rebuild
    // functions only (Tensor._reduce_ex_internal).
    arity(g, args, 4, 4);
    const Value& fn = arg(g, args, 0);
    const Value& type = arg(g, args, 1);
    if (!fn.is(Value::Kind::Global) || fn.as_global().module != "torch._utils" ||
        !fn.as_global().name.starts_with("_rebuild_") ||
        fn.as_global().name.starts_with("_rebuild_parameter"))
      throw Error(ErrorCode::unsupported,
                  "_rebuild_from_type_v2 of " + fn.repr(2) +
                      ": torch writes it only around its tensor rebuild functions");
    if (!type.is(Value::Kind::Global))
      throw Error(ErrorCode::corrupt,
                  "_rebuild_from_type_v2 with type " + type.repr(2) + ", not a class");
    const Value& inner_args = arg(g, args, 2);
    if (!inner_args.is(Value::Kind::Tuple))
      throw Error(ErrorCode::corrupt,
                  "_rebuild_from_type_v2 with arguments " + inner_args.repr(2) + ", not a tuple");
    obj_state(arg(g, args, 3), "_rebuild_from_type_v2");
    if (auto t = tensor_of_call(fn.as_global(), inner_args, inner)) return t;
    throw Error(ErrorCode::unsupported, not_read(fn.as_global(), inner_args));
  }
  if (g.module == "torch.nn.parameter" && g.name == "Parameter") {
    // Parameter(data=None, requires_grad=True); no data is torch.empty(0).
    arity(g, args, 0, 2);
    Tensor t = args.size() == 0 || args.items()[0].is_none() ? Tensor::empty(DType::F32, {0})
                                                             : as_tensor(inner(args.items()[0]));
    if (args.size() == 2)
      requires_grad(args.items()[1], t.dtype(), "Parameter");
    else
      requires_grad(Value::boolean(true), t.dtype(), "Parameter");
    return t;
  }
  if (g.module == "torch.serialization" && g.name == "_get_layout") {
    // torch.strided and the sparse layouts pickle as _get_layout("torch.strided"):
    // a value, kept inert. An unknown name makes torch raise KeyError.
    arity(g, args, 1, 1);
    const Value& n = args.items()[0];
    if (!n.is(Value::Kind::Str) || !layout_names().count(n.as_str()))
      throw Error(ErrorCode::corrupt, "_get_layout(" + n.repr(2) + "): not a layout torch has");
    return std::nullopt;
  }
  if (utils && g.name == "_rebuild_meta_tensor_no_storage") {
    // (dtype, size, stride, requires_grad): torch.empty_strided on device
    // "meta", which torch >= 1.12 writes for a tensor of that device (a
    // model built on "meta" and saved before its weights were loaded).
    arity(g, args, 4, 4);
    const DType dtype = dtype_global(arg(g, args, 0));
    requires_grad(arg(g, args, 3), dtype, g.name.c_str());
    return Tensor::meta(dtype, int_list(arg(g, args, 1), "size"),
                        int_list(arg(g, args, 2), "stride"));
  }
  if (utils && g.name == "_rebuild_qtensor")
    return quantized::rebuild(args, [&](const Value& v) -> Value { return inner(v); });
  if (utils && (g.name == "_rebuild_sparse_tensor" || g.name == "_rebuild_sparse_csr_tensor"))
    return sparse::rebuild(args, [&](const Value& v) -> Value { return inner(v); });
  if (utils && g.name.starts_with("_rebuild_"))
    throw Error(ErrorCode::unsupported, not_read(g, args));
  return sparse::legacy_constructor(g, args, [&](const Value& v) -> Value { return inner(v); });
}

// torch._tensor._rebuild_from_type_v2(torch._utils._rebuild_wrapper_subclass,
// cls, (cls, dtype, size, stride, storage_offset, layout, device,
// requires_grad), state): what torch.Tensor._reduce_ex_internal writes for a
// tensor subclass made by _make_wrapper_subclass, which has no storage of
// its own; its data are the tensors among its attributes (`state`, which
// torch sets with _set_obj_state or the class's own __setstate__): torchao's
// Int8Tensor holds `qdata`, `scale`, `zero_point`. Read, when `allow` trusts
// the class (a user's allow pattern; its Python code runs when torch builds
// it), as an object of _rebuild_from_type_v2 whose args are the function,
// the class and its arguments and whose state is the attribute dict: the
// catalogue lists the tensors as NAME.ATTR, never one densified tensor, and
// the .pt writer writes the call back. Each argument is checked as
// _make_wrapper_subclass checks it.
template <class Inner>
std::optional<Value> subclass_of_call(const Global& g, const Value& args, Inner&& inner,
                                      std::span<const std::string> allow) {
  if (g.module != "torch._tensor" || g.name != "_rebuild_from_type_v2" || args.size() != 4 ||
      !args.items()[0].is(Value::Kind::Global) ||
      !args.items()[0].as_global().is("torch._utils", "_rebuild_wrapper_subclass"))
    return std::nullopt;
  const Value& type = args.items()[1];
  const Value& a = args.items()[2];
  if (!type.is(Value::Kind::Global))
    throw Error(ErrorCode::corrupt,
                "_rebuild_from_type_v2 with type " + type.repr(2) + ", not a class");
  const Global& cls = type.as_global();
  const auto bad = [&](const std::string& why) {
    return Error(ErrorCode::corrupt, "tensor subclass " + cls.qualified() + ": " + why);
  };
  // torch._utils._rebuild_wrapper_subclass(cls, dtype, size, stride,
  // storage_offset, layout, device, requires_grad)
  if (!a.is(Value::Kind::Tuple) || a.size() != 8)
    throw bad("_rebuild_wrapper_subclass takes 8 arguments, given " + a.repr(2));
  const auto& w = a.items();
  if (!w[0].is(Value::Kind::Global) || w[0].as_global().qualified() != cls.qualified())
    throw Error(ErrorCode::unsupported,
                "tensor subclass " + cls.qualified() + " rebuilt as " + w[0].repr(2) +
                    ", another class (torch writes the class itself; not read)");
  const DType dtype = dtype_global(w[1]);
  const Shape size = int_list(w[2], "size");
  const Shape stride = int_list(w[3], "stride");
  if (stride.size() != size.size())
    throw bad("a stride of " + std::to_string(stride.size()) + " dimensions for a size of " +
              std::to_string(size.size()));
  if (int_arg(w[4], "storage offset") < 0) throw bad("a negative storage offset");
  const Value& layout = w[5];
  if (!layout.is(Value::Kind::Object) ||
      !layout.as_object().cls.is("torch.serialization", "_get_layout") ||
      layout.as_object().args.size() != 1 ||
      !layout.as_object().args.items()[0].is(Value::Kind::Str) ||
      layout.as_object().args.items()[0].as_str() != "torch.strided")
    throw Error(ErrorCode::unsupported, "tensor subclass " + cls.qualified() + " of layout " +
                                            layout.repr(2) + " (only torch.strided is read)");
  requires_grad(w[7], dtype, "_rebuild_wrapper_subclass");
  if (pickle::classify_global(cls.module, cls.name, allow) != pickle::GlobalClass::allowed)
    throw Error(ErrorCode::unsupported,
                "a tensor subclass " + cls.qualified() +
                    " (no storage of its own; its data are tensors among its attributes), "
                    "whose class is not allowed: torch.load runs that class's Python code to "
                    "build it. Trust it (--allow " +
                    cls.qualified() + ", OpenOptions::allow) to read its component tensors");
  Value state = inner(args.items()[3]);
  if (!state.is(Value::Kind::Dict))
    throw Error(ErrorCode::unsupported, "tensor subclass " + cls.qualified() + " with state " +
                                            state.repr(2) +
                                            " (torch writes a dict of attributes; not read)");
  attribute_dict(state, "tensor subclass");
  // Its tensors, or tensor subclasses of its own (read before it).
  if (std::none_of(state.pairs().begin(), state.pairs().end(), [](const auto& kv) {
        return kv.second.is(Value::Kind::Tensor) ||
               (kv.second.is(Value::Kind::Object) &&
                kv.second.as_object().cls.is("torch._tensor", "_rebuild_from_type_v2"));
      }))
    throw Error(ErrorCode::unsupported,
                "tensor subclass " + cls.qualified() +
                    " holds no tensor among its attributes: its data is not in the file as "
                    "torch.load reads it (not read)");
  Value out = Value::object(g, Value::tuple({args.items()[0], type, a}));
  out.set_state(std::move(state));
  return out;
}

// torch._utils._rebuild_nested_tensor(buffer, sizes, strides, offsets),
// which is torch._nested_view_from_buffer: a nested tensor whose i-th
// component views the 1-D `buffer` with sizes[i], strides[i] (rows of two
// int64 matrices) at element offsets[i]. Read as an object of that
// function whose state is the list of its components, so the catalogue
// lists them as NAME.0, NAME.1, ... and the .pt writer can write them back
// as one nested tensor. Each component must lie inside the buffer (torch's
// view would read past it).
template <class Inner>
std::optional<Value> nested_of_call(const Global& g, const Value& args, Inner&& inner) {
  if (g.module != "torch._utils" || g.name != "_rebuild_nested_tensor") return std::nullopt;
  arity(g, args, 4, 4);
  const Tensor buffer = as_tensor(inner(arg(g, args, 0)));
  const Tensor sizes = as_tensor(inner(arg(g, args, 1)));
  const Tensor strides = as_tensor(inner(arg(g, args, 2)));
  const Tensor offsets = as_tensor(inner(arg(g, args, 3)));
  const auto bad = [&](const std::string& why) {
    return Error(ErrorCode::corrupt, g.qualified() + ": " + why);
  };
  if (buffer.dim() != 1 || !buffer.is_contiguous() || buffer.is_meta() || buffer.is_sparse() ||
      buffer.is_quantized())
    throw bad("the buffer is not a 1-D contiguous tensor");
  if (sizes.dtype() != DType::I64 || strides.dtype() != DType::I64 ||
      offsets.dtype() != DType::I64 || sizes.dim() != 2 || strides.shape() != sizes.shape() ||
      offsets.dim() != 1 || offsets.size(0) != sizes.size(0))
    throw bad(
        "sizes and strides must be int64 matrices of one shape, offsets an int64 vector "
        "of one entry per component");
  const Tensor sz = sizes.contiguous(), st = strides.contiguous(), off = offsets.contiguous();
  const auto szv = sz.span<std::int64_t>(), stv = st.span<std::int64_t>();
  const auto offv = off.span<std::int64_t>();
  const auto n = static_cast<std::size_t>(sizes.size(0));
  const auto dims = static_cast<std::size_t>(sizes.size(1));
  Value out = Value::list();
  for (std::size_t i = 0; i < n; ++i) {
    Shape shape(szv.begin() + static_cast<std::ptrdiff_t>(i * dims),
                szv.begin() + static_cast<std::ptrdiff_t>((i + 1) * dims));
    Shape stride(stv.begin() + static_cast<std::ptrdiff_t>(i * dims),
                 stv.begin() + static_cast<std::ptrdiff_t>((i + 1) * dims));
    // The component's extent, inside [0, buffer.numel()).
    std::int64_t last = offv[i], numel = 1;
    bool ok = offv[i] >= 0;
    for (std::size_t k = 0; ok && k < dims; ++k) {
      std::int64_t step;
      ok = shape[k] >= 0 && stride[k] >= 0 && detail::mul_ok(numel, shape[k], numel);
      if (ok && shape[k] > 0)
        ok = detail::mul_ok(shape[k] - 1, stride[k], step) && detail::add_ok(last, step, last);
    }
    if (!ok || (numel > 0 && last >= buffer.numel()))
      throw bad("component " + std::to_string(i) + " does not lie inside the buffer of " +
                std::to_string(buffer.numel()) + " elements");
    out.append(Value::tensor(Tensor(buffer.dtype(), std::move(shape), std::move(stride),
                                    buffer.storage_offset() + offv[i], buffer.storage())));
  }
  Value nested = Value::object(g, Value::tuple({}));
  nested.set_state(std::move(out));
  return nested;
}

// Whether the tensor a rebuild call makes requires grad (a leaf that torch's
// in-place set_ then refuses to re-view). The call was checked already.
bool call_requires_grad(const Global& g, const Value& args) {
  const auto flag = [&](std::size_t i, bool otherwise) {
    return i < args.size() && args.items()[i].is(Value::Kind::Bool) ? args.items()[i].as_bool()
                                                                    : otherwise;
  };
  if (g.module == "torch._utils" &&
      (g.name == "_rebuild_tensor_v2" || g.name == "_rebuild_tensor_v3"))
    return flag(4, false);
  if (g.module == "torch._utils" && g.name.starts_with("_rebuild_parameter")) return flag(1, false);
  if (g.module == "torch.nn.parameter" && g.name == "Parameter") return flag(1, true);
  if (g.module == "torch._tensor" && g.name == "_rebuild_from_type_v2" && args.size() == 4 &&
      args.items()[0].is(Value::Kind::Global) && args.items()[2].is(Value::Kind::Tuple))
    return call_requires_grad(args.items()[0].as_global(), args.items()[2]);
  return false;
}

// Tensor.__setstate__(state), which Python's BUILD calls on a tensor:
//   4 items: set_(storage, offset, size, stride)   (legacy Tensor)
//   5 items: data = state[0], then (state[3], _, state[2]) (legacy Variable)
//   3 items: requires_grad, _, _backward_hooks = state
// Any other state makes torch raise. The view must lie inside its storage.
Tensor set_state(const Tensor& target, const Value& target_value, const Value& state,
                 bool target_requires_grad) {
  if (target_value.is_storage())
    throw Error(ErrorCode::unsupported, "BUILD on a storage, which torch never writes");
  if (!state.is(Value::Kind::Tuple) && !state.is(Value::Kind::List))
    throw Error(ErrorCode::unsupported,
                "BUILD on a tensor with a " + std::string(state.kind_name()) +
                    " state; torch's Tensor.__setstate__ takes a tuple of 3, 4 or 5 items");
  const auto& s = state.items();
  if (s.size() == 4) {
    if (target_requires_grad)
      throw Error(ErrorCode::corrupt,
                  "BUILD re-views (set_) a tensor that requires grad: torch refuses it (a leaf "
                  "Variable that requires grad is being used in an in-place operation)");
    const Tensor& st = storage_arg(s[0], "tensor re-viewed by BUILD (set_)");
    if (st.dtype() != target.dtype())
      throw Error(ErrorCode::corrupt, "BUILD re-views a " +
                                          std::string(dtype_name(target.dtype())) +
                                          " tensor over a " + std::string(dtype_name(st.dtype())) +
                                          " storage, which torch's set_ refuses");
    try {
      return Tensor(target.dtype(), int_list(s[2], "size"), int_list(s[3], "stride"),
                    int_arg(s[1], "storage offset"), st.storage());
    } catch (const Error& e) {
      throw Error(e.code(),
                  "BUILD re-views the tensor (Tensor.__setstate__, set_): " + e.message());
    }
  }
  if (s.size() == 5) {
    if (!s[0].is(Value::Kind::Tensor) || s[0].is_storage())
      throw Error(ErrorCode::corrupt,
                  "BUILD sets a tensor's data to " + s[0].repr(2) + ", not a tensor");
    const Tensor data = s[0].as_tensor();
    requires_grad(s[3], data.dtype(), "BUILD");
    backward_hooks(s[2], "BUILD");
    return data;
  }
  if (s.size() == 3) {
    requires_grad(s[0], target.dtype(), "BUILD");
    backward_hooks(s[2], "BUILD");
    return target;
  }
  throw Error(ErrorCode::unsupported, "BUILD on a tensor with a state of " +
                                          std::to_string(s.size()) +
                                          " items; torch's Tensor.__setstate__ takes 3, 4 or 5");
}

// The slow path: a copy of the tree with every inert tensor call replaced
// by its tensor, errors naming the key path.
class Rebuilder {
 public:
  Rebuilder(std::string where, std::span<const std::string> allow)
      : where_(std::move(where)), allow_(allow) {}

  Value walk(const Value& v, const std::string& path) {
    if (!v.is_container()) return v;
    auto it = done_.find(v.identity());
    if (it != done_.end()) return it->second;
    Value out = rebuild(v, path);
    done_.emplace(v.identity(), out);
    return out;
  }

 private:
  static std::string child(const std::string& path, const std::string& k) {
    return path.empty() ? k : path + "." + k;
  }

  Value rebuild(const Value& v, const std::string& path) {
    switch (v.kind()) {
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set: {
        Value out = v.is(Value::Kind::List)    ? Value::list()
                    : v.is(Value::Kind::Tuple) ? Value::tuple()
                                               : Value::set();
        std::size_t i = 0;
        for (const auto& item : v.items()) out.append(walk(item, child(path, std::to_string(i++))));
        return out;
      }
      case Value::Kind::Dict: {
        Value out = v.is_ordered_dict() ? Value::ordered_dict() : Value::dict();
        for (const auto& [k, x] : v.pairs())
          out.insert(k, walk(x, child(path, k.is(Value::Kind::Str) ? k.as_str() : k.repr())));
        return out;
      }
      case Value::Kind::Object: {
        const Object& o = v.as_object();
        if (auto n = nested_call(o, path)) return *n;
        if (auto s = subclass_call(o, path)) return *s;
        if (auto t = tensor_call(o, path)) return Value::tensor(*t);
        if (auto n = numpy_value(o, path)) return *n;
        Value out = Value::object(o.cls, walk(o.args, path), o.offset, o.newobj);
        if (!o.state.is_none()) out.set_state(walk(o.state, path));
        return out;
      }
      default:
        return v;
    }
  }

  std::optional<Tensor> tensor_call(const Object& o, const std::string& path) {
    try {
      auto t = tensor_of_call(o.cls, o.args, [&](const Value& v) { return walk(v, path); });
      if (t && !o.state.is_none()) {
        const Value as_value = Value::tensor(*t);
        t = set_state(*t, as_value, walk(o.state, path), call_requires_grad(o.cls, o.args));
      }
      return t;
    } catch (const Error& e) {
      throw Error(e.code(), e.message(), e.key().empty() ? path : e.key(),
                  e.offset() ? e.offset() : std::optional<std::uint64_t>(o.offset),
                  e.where().empty() ? where_ : e.where());
    }
  }

  std::optional<Value> nested_call(const Object& o, const std::string& path) {
    try {
      return nested_of_call(o.cls, o.args, [&](const Value& v) { return walk(v, path); });
    } catch (const Error& e) {
      throw Error(e.code(), e.message(), e.key().empty() ? path : e.key(),
                  e.offset() ? e.offset() : std::optional<std::uint64_t>(o.offset),
                  e.where().empty() ? where_ : e.where());
    }
  }

  std::optional<Value> subclass_call(const Object& o, const std::string& path) {
    try {
      return subclass_of_call(
          o.cls, o.args, [&](const Value& v) { return walk(v, path); }, allow_);
    } catch (const Error& e) {
      throw Error(e.code(), e.message(), e.key().empty() ? path : e.key(),
                  e.offset() ? e.offset() : std::optional<std::uint64_t>(o.offset),
                  e.where().empty() ? where_ : e.where());
    }
  }

  // numpy arrays (tensors) and scalars (numbers); see numpy.hpp.
  std::optional<Value> numpy_value(const Object& o, const std::string& path) {
    try {
      return numpy::value_of(o);
    } catch (const Error& e) {
      throw Error(e.code(), e.message(), path, o.offset, where_);
    }
  }

  std::string where_;
  std::span<const std::string> allow_;
  std::unordered_map<const void*, Value> done_;
};

// Values remembered by identity (each kept alive, so that its address is not
// reused by another value while it is remembered).
class ValueSet {
 public:
  bool contains(const Value& v) const {
    return v.identity() != nullptr && ids_.count(v.identity()) != 0;
  }
  void add(const Value& v) {
    if (v.identity() != nullptr && ids_.insert(v.identity()).second) keep_.push_back(v);
  }

 private:
  std::unordered_set<const void*> ids_;
  std::vector<Value> keep_;
};

// The fast path: tensors built as the pickle runs (inner calls reduce
// before outer ones, so a parameter's data is already a tensor). A call it
// cannot build stays inert and is remembered: the slow path then reports it.
class TensorCalls {
 public:
  explicit TensorCalls(std::span<const std::string> allow) : allow_(allow) {}
  std::optional<Value> operator()(const Global& g, const Value& args, std::uint64_t) {
    if (g.module != "torch._utils" && g.module != "torch._tensor" &&
        g.module != "torch.nn.parameter" && g.module != "torch.serialization" &&
        g.module != "torch.sparse" && g.module != "torch.cuda.sparse")
      return std::nullopt;
    try {
      if (auto n = nested_of_call(g, args, [](const Value& v) -> const Value& { return v; }))
        return n;
      if (auto s = subclass_of_call(
              g, args, [](const Value& v) -> const Value& { return v; }, allow_))
        return s;
      if (auto t = tensor_of_call(g, args, [](const Value& v) -> const Value& { return v; })) {
        Value v = Value::tensor(std::move(*t));
        if (call_requires_grad(g, args)) requires_grad.add(v);
        return v;
      }
    } catch (const Error&) {
      failed = true;
    }
    return std::nullopt;
  }
  bool failed = false;
  ValueSet requires_grad;  ///< the tensors made that require grad

 private:
  std::span<const std::string> allow_;
};

}  // namespace

Value rebuild_tensors(const Value& root, std::string_view where,
                      std::span<const std::string> allow) {
  Rebuilder r{std::string(where), allow};
  return r.walk(root, "");
}

Value run_torch_pickle(Walker& walker, std::string_view name, ByteReader& reader,
                       const OpenOptions& options, const pickle::PersistentLoad& persistent) {
  // Storages are what persistent_load gives (storage_value marks them), so
  // that a rebuild or a BUILD can tell a storage from a tensor without
  // keeping each one alive to the end (the tar format's persistent ids also
  // name tensors, which are not storages).
  TensorCalls calls(options.allow);
  pickle::BuildHook build = [&](const Value& target, const Value& state, std::uint64_t) {
    return set_state(target.as_tensor(), target, state, calls.requires_grad.contains(target));
  };
  pickle::Stats stats;
  const ByteReader start = reader;
  Value v = walker.pickle(name, start, stats, [&] {
    return pickle::unpickle(reader, options.limits, persistent, &stats, std::ref(calls), build,
                            options.profiles);
  });
  return calls.failed || numpy::referenced(stats) ? rebuild_tensors(v, reader.what(), options.allow)
                                                  : v;
}

Value run_pickle(Walker& walker, std::string_view name, ByteReader& reader,
                 const OpenOptions& options, const pickle::PersistentLoad& persistent,
                 pickle::Stats* stats) {
  pickle::Stats local;
  pickle::Stats& s = stats ? *stats : local;
  const ByteReader start = reader;
  return walker.pickle(name, start, s, [&] {
    return pickle::unpickle(reader, options.limits, persistent, &s, {}, {}, options.profiles);
  });
}

}  // namespace torchport::formats
