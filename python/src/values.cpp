// Value trees to Python objects, as torch.load(weights_only=True) returns
// them (dicts, OrderedDicts, lists, tuples, sets, numbers, strings, bytes,
// tensors, numpy arrays, torch dtypes and devices), or a named refusal.

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "binding.hpp"

namespace torchport::python {
namespace {

std::string child(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

nb::object big_int(const std::string& le) {
  // Little-endian two's complement, as pickle's LONG1/LONG4 hold it.
  nb::bytes raw(le.data(), le.size());
  nb::object int_type = nb::borrow(reinterpret_cast<PyObject*>(&PyLong_Type));
  nb::kwargs kw;
  kw["signed"] = true;
  return int_type.attr("from_bytes")(raw, "little", **kw);
}

// Names torch's weights_only loader gives back as torch attributes: the
// dtypes, layouts and quantization schemes of its allow-list.
bool torch_attribute(const Global& g) {
  if (g.module != "torch") return false;
  if (dtype_from_torch_name(g.name)) return true;
  static const char* const kOthers[] = {"strided",
                                        "sparse_coo",
                                        "sparse_csr",
                                        "sparse_csc",
                                        "sparse_bsr",
                                        "sparse_bsc",
                                        "_mkldnn",
                                        "per_tensor_affine",
                                        "per_channel_affine",
                                        "per_channel_affine_float_qparams",
                                        "per_tensor_symmetric",
                                        "per_channel_symmetric",
                                        "qint8",
                                        "quint8",
                                        "qint32",
                                        "quint4x2",
                                        "quint2x4"};
  for (const char* n : kOthers)
    if (g.name == n) return true;
  return false;
}

std::string view_key(const Tensor& t) {
  std::string k;
  const Storage* s = t.storage().get();
  const Quantization* q = t.quantization().get();
  const SparseParts* p = t.sparse().get();
  k.append(reinterpret_cast<const char*>(&s), sizeof s);
  k.append(reinterpret_cast<const char*>(&q), sizeof q);
  k.append(reinterpret_cast<const char*>(&p), sizeof p);
  const std::int64_t head[] = {t.storage_offset(), static_cast<std::int64_t>(t.dtype()), t.dim(),
                               t.is_meta() ? 1 : 0};
  k.append(reinterpret_cast<const char*>(head), sizeof head);
  k.append(reinterpret_cast<const char*>(t.shape().data()),
           t.shape().size() * sizeof(std::int64_t));
  k.append(reinterpret_cast<const char*>(t.strides().data()),
           t.strides().size() * sizeof(std::int64_t));
  return k;
}

}  // namespace

void ValueConverter::replace_tensors(const std::vector<NamedTensor>& from,
                                     const std::vector<NamedTensor>& to) {
  if (from.size() != to.size()) return;
  replace_.reserve(from.size());
  for (std::size_t i = 0; i < from.size(); ++i)
    replace_.emplace(view_key(from[i].tensor), to[i].tensor);
}

const Tensor& ValueConverter::replaced(const Tensor& t) const {
  if (replace_.empty()) return t;
  const auto it = replace_.find(view_key(t));
  return it == replace_.end() ? t : it->second;
}

nb::object ValueConverter::convert_global(const Global& g, const std::string& path) {
  if (torch_attribute(g)) {
    if (fw_ == Framework::numpy)
      throw Error(ErrorCode::unsupported,
                  "the torch value " + g.qualified() + " needs framework='torch'", path);
    nb::module_ torch = nb::module_::import_("torch");
    if (!nb::hasattr(torch, g.name.c_str()))
      throw Error(ErrorCode::unsupported, "this torch has no " + g.qualified(), path);
    return torch.attr(g.name.c_str());
  }
  throw Error(ErrorCode::unsupported,
              "the global " + g.qualified() +
                  ", which torch.load(weights_only=True) refuses; torchport.open() lists the "
                  "tensors around it",
              path);
}

nb::object ValueConverter::convert_object(const Object& o, const std::string& path) {
  const bool plain_args = o.args.is(Value::Kind::Tuple) && o.state.is_none();
  if (o.cls.is("torch", "device") && plain_args) {
    if (fw_ == Framework::numpy)
      throw Error(ErrorCode::unsupported, "a torch.device needs framework='torch'", path, o.offset);
    for (const auto& a : o.args.items())
      if (!a.is(Value::Kind::Str) && !a.is(Value::Kind::Int))
        throw Error(ErrorCode::unsupported, "torch.device" + o.args.repr(3), path, o.offset);
    nb::object args = convert(o.args, path);
    return nb::module_::import_("torch").attr("device")(*nb::borrow<nb::tuple>(args));
  }
  if (o.cls.is("torch.serialization", "_get_layout") && plain_args && o.args.size() == 1 &&
      o.args.items()[0].is(Value::Kind::Str)) {
    const std::string& name = o.args.items()[0].as_str();
    if (name.rfind("torch.", 0) == 0) {
      const Global g{"torch", name.substr(6)};
      if (torch_attribute(g)) return convert_global(g, path);
    }
  }
  throw Error(ErrorCode::unsupported,
              "an object of class " + o.cls.qualified() +
                  ", which torch.load(weights_only=True) refuses (torchport keeps it inert: "
                  "torchport.open() lists the tensors in it)",
              path, o.offset);
}

nb::object ValueConverter::convert(const Value& v, const std::string& path) {
  const void* id = v.identity();
  if (id != nullptr) {
    auto it = memo_.find(id);
    if (it != memo_.end()) return it->second;
  }
  nb::object out;
  switch (v.kind()) {
    case Value::Kind::None:
      return nb::none();
    case Value::Kind::Bool:
      return nb::bool_(v.as_bool());
    case Value::Kind::Int:
      return nb::int_(v.as_int());
    case Value::Kind::BigInt:
      out = big_int(v.as_bytes());
      break;
    case Value::Kind::Float:
      return nb::float_(v.as_float());
    case Value::Kind::Complex: {
      const auto [re, im] = v.as_complex();
      return nb::steal(PyComplex_FromDoubles(re, im));
    }
    case Value::Kind::Str:
      out = nb::str(v.as_str().data(), v.as_str().size());
      break;
    case Value::Kind::Bytes:
      out = nb::bytes(v.as_bytes().data(), v.as_bytes().size());
      break;
    case Value::Kind::List: {
      nb::list l;
      std::size_t i = 0;
      for (const auto& x : v.items()) l.append(convert(x, child(path, std::to_string(i++))));
      out = l;
      break;
    }
    case Value::Kind::Tuple: {
      nb::list l;
      std::size_t i = 0;
      for (const auto& x : v.items()) l.append(convert(x, child(path, std::to_string(i++))));
      out = nb::tuple(l);
      break;
    }
    case Value::Kind::Set: {
      nb::set s;
      std::size_t i = 0;
      for (const auto& x : v.items()) {
        nb::object item = convert(x, child(path, std::to_string(i++)));
        if (PySet_Add(s.ptr(), item.ptr()) != 0) {
          PyErr_Clear();
          throw Error(ErrorCode::corrupt, "a set holds an unhashable " + x.repr(2), path);
        }
      }
      out = s;
      break;
    }
    case Value::Kind::Dict: {
      nb::object d = v.is_ordered_dict() ? nb::module_::import_("collections").attr("OrderedDict")()
                                         : nb::dict();
      for (const auto& [k, x] : v.pairs()) {
        const std::string key = k.is(Value::Kind::Str) ? k.as_str() : k.repr(2);
        nb::object pk = convert(k, child(path, key));
        nb::object px = convert(x, child(path, key));
        if (PyObject_SetItem(d.ptr(), pk.ptr(), px.ptr()) != 0) {
          PyErr_Clear();
          throw Error(ErrorCode::corrupt, "a dict key Python cannot hash: " + k.repr(2), path);
        }
      }
      out = d;
      break;
    }
    case Value::Kind::Global:
      out = convert_global(v.as_global(), path);
      break;
    case Value::Kind::Object:
      out = convert_object(v.as_object(), path);
      break;
    case Value::Kind::Tensor:
      if (v.is_storage())
        throw Error(ErrorCode::unsupported,
                    "a bare storage (" + v.as_tensor().description() +
                        "), which this binding does not give as a Python object; "
                        "torchport.open() lists it as a tensor",
                    path);
      // numpy arrays stay numpy arrays whatever the framework, as torch.load gives them.
      out = tensor_to_python(replaced(v.as_tensor()), v.is_numpy_array() ? Framework::numpy : fw_,
                             writable_, path.empty() ? std::string(kRootTensorName) : path, &bases_);
      break;
  }
  if (id != nullptr) memo_.emplace(id, out);
  return out;
}

}  // namespace torchport::python
