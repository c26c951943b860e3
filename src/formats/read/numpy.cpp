// numpy arrays and scalars in pickles, after numpy's own pickling
// (numpy/core/src/multiarray/methods.c: array_reduce, array_reduce_ex,
// array_setstate; descriptor.c: arraydescr_reduce, arraydescr_setstate;
// scalartypes.c: gentype_reduce):
//
//   array, protocols 2-4 (and any array numpy cannot hand out as a buffer):
//     _reconstruct(ndarray, (0,), b'b') BUILD (1, shape, dtype, is_fortran, raw)
//     raw: the elements as bytes, in Fortran order when is_fortran; a list
//     of the elements for object arrays.
//   array, protocol 5: _frombuffer(PickleBuffer, dtype, shape, 'C' | 'F'),
//     the buffer pickled in band as BYTEARRAY8 (or bytes when read-only).
//   dtype: numpy.dtype('f8', False, True) BUILD (3, '<', subdescr, names,
//     fields, elsize, alignment, flags[, metadata]).
//   scalar: scalar(dtype, raw) with raw the element's bytes.

#include "formats/read/numpy.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "torchport/core/error.hpp"
#include "torchport/core/half.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::formats::numpy {
namespace {

// numpy 1.x spells the core modules numpy.core.*, numpy 2 numpy._core.*.
bool core_module(std::string_view module, std::string_view sub) {
  for (std::string_view root : {"numpy.core.", "numpy._core."})
    if (module.size() == root.size() + sub.size() && module.starts_with(root) &&
        module.ends_with(sub))
      return true;
  return false;
}

bool is_reconstruct(const Global& g) {
  return g.name == "_reconstruct" && core_module(g.module, "multiarray");
}
bool is_frombuffer(const Global& g) {
  return g.name == "_frombuffer" && core_module(g.module, "numeric");
}
bool is_scalar(const Global& g) {
  return g.name == "scalar" && core_module(g.module, "multiarray");
}
bool is_dtype(const Global& g) {
  return g.is("numpy", "dtype");
}

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorCode::corrupt, "numpy " + what);
}

// What a pickled numpy.dtype describes.
struct Dtype {
  enum class Kind { numeric, object, other };
  Kind kind = Kind::other;
  DType dtype = DType::U8;
  bool big_endian = false;
  std::string code;  // "f8", for messages
};

std::string text(const Value& v) {
  if (v.is(Value::Kind::Str)) return v.as_str();
  if (v.is(Value::Kind::Bytes)) return v.as_bytes();  // Python 2 pickles
  corrupt("dtype code " + v.repr(2) + " is not a string");
}

// Element types by numpy kind character and item size.
std::optional<DType> numeric_dtype(char kind, int size) {
  switch (kind) {
    case 'b':
      return size == 1 ? std::optional(DType::BOOL) : std::nullopt;
    case 'i':
      return size == 1   ? std::optional(DType::I8)
             : size == 2 ? std::optional(DType::I16)
             : size == 4 ? std::optional(DType::I32)
             : size == 8 ? std::optional(DType::I64)
                         : std::nullopt;
    case 'u':
      return size == 1   ? std::optional(DType::U8)
             : size == 2 ? std::optional(DType::U16)
             : size == 4 ? std::optional(DType::U32)
             : size == 8 ? std::optional(DType::U64)
                         : std::nullopt;
    case 'f':
      return size == 2   ? std::optional(DType::F16)
             : size == 4 ? std::optional(DType::F32)
             : size == 8 ? std::optional(DType::F64)
                         : std::nullopt;
    case 'c':
      return size == 8    ? std::optional(DType::C64)
             : size == 16 ? std::optional(DType::C128)
                          : std::nullopt;
    default:
      return std::nullopt;
  }
}

Dtype parse_dtype(const Value& v) {
  if (!v.is(Value::Kind::Object) || !is_dtype(v.as_object().cls))
    corrupt("array dtype is " + v.repr(2) + ", not a numpy.dtype");
  const Object& o = v.as_object();
  if (!o.args.is(Value::Kind::Tuple) || o.args.size() < 1)
    corrupt("dtype made with arguments " + o.args.repr(3));
  Dtype d;
  std::string code = text(o.args.items()[0]);
  char order = '=';
  if (!code.empty() && std::strchr("<>|=", code[0]) != nullptr) {
    order = code[0];
    code.erase(0, 1);
  }
  d.code = code;
  // The state's byte order wins (it is what numpy's setstate applies).
  if (o.state.is(Value::Kind::Tuple)) {
    const auto& s = o.state.items();
    if (s.size() < 8 || !s[0].is(Value::Kind::Int))
      corrupt("dtype '" + code + "' has state " + o.state.repr(4));
    const std::string e = text(s[1]);
    if (e.size() != 1 || std::strchr("<>|=", e[0]) == nullptr)
      corrupt("dtype '" + code + "' has byte order '" + e + "'");
    order = e[0];
    if (!s[3].is_none()) {  // structured: named fields
      d.kind = Dtype::Kind::other;
      return d;
    }
  } else if (!o.state.is_none()) {
    corrupt("dtype '" + code + "' has state " + o.state.repr(3));
  }
  d.big_endian = order == '>';
  if (code.empty()) corrupt("dtype with an empty code");
  const char kind = code[0];
  const std::string_view digits = std::string_view(code).substr(1);
  int size = 0;
  bool sized =
      !digits.empty() && digits.size() <= 4 &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (sized) size = std::stoi(std::string(digits));
  if (std::strchr("biufc", kind) != nullptr && sized) {
    if (auto t = numeric_dtype(kind, size)) {
      d.kind = Dtype::Kind::numeric;
      d.dtype = *t;
      return d;
    }
    if ((kind == 'f' && (size == 12 || size == 16)) || (kind == 'c' && (size == 24 || size == 32)))
      throw Error(ErrorCode::unsupported,
                  "numpy dtype '" + code + "' (extended precision) has no torchport element type");
    corrupt("dtype code '" + code + "' names no numpy type");
  }
  if (kind == 'O' && (code == "O" || code == "O8" || code == "O4")) {
    d.kind = Dtype::Kind::object;
    return d;
  }
  // Strings, bytes, void records, datetimes and timedeltas: kept inert.
  if ((std::strchr("USVa", kind) != nullptr && (digits.empty() || sized)) ||
      ((kind == 'M' || kind == 'm') && (digits.empty() || digits == "8")))
    return d;
  corrupt("dtype code '" + code + "' names no numpy type");
}

// The element bytes of an array or scalar. Protocol 2 pickles an empty
// bytes object as the call `bytes()`.
const std::string& raw_bytes(const Value& v, const Dtype& d, const char* what) {
  static const std::string kEmpty;
  if (d.kind == Dtype::Kind::object)
    corrupt(std::string(what) + " of object dtype holds a " + std::string(v.kind_name()) +
            " where element bytes are needed");
  if (v.is(Value::Kind::Bytes)) return v.as_bytes();
  if (v.is(Value::Kind::Object) && v.as_object().args.size() == 0 &&
      (v.as_object().cls.is("builtins", "bytes") || v.as_object().cls.is("__builtin__", "bytes")))
    return kEmpty;
  corrupt(std::string(what) + " data is a " + std::string(v.kind_name()) + ", not bytes");
}

void swap_elements(std::span<std::byte> b, DType dtype) {
  const std::size_t unit = is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
  if (unit < 2) return;
  for (std::size_t i = 0; i + unit <= b.size(); i += unit)
    std::reverse(b.begin() + i, b.begin() + i + unit);
}

Shape shape_of(const Value& v) {
  if (!v.is(Value::Kind::Tuple) && !v.is(Value::Kind::List))
    corrupt("array shape is " + v.repr(3) + ", not a tuple");
  Shape s;
  for (const auto& x : v.items()) {
    if (!x.is(Value::Kind::Int) || x.as_int() < 0)
      corrupt("array shape " + v.repr(8) + " holds " + x.repr(2));
    s.push_back(x.as_int());
  }
  return s;
}

// `module`: the global that made it, whose spelling of numpy's core module
// (numpy 2's numpy._core, numpy 1's numpy.core) a writer keeps.
Value make_array(const Dtype& d, Shape shape, bool fortran, const std::string& raw,
                 std::string_view module) {
  const std::int64_t numel = shape_numel(shape);
  std::uint64_t nbytes = 0;
  if (!detail::mul_ok(static_cast<std::uint64_t>(numel), dtype_size(d.dtype), nbytes) ||
      nbytes != raw.size())
    corrupt("array of dtype '" + d.code + "' and shape " + shape_to_string(shape) + " needs " +
            std::to_string(numel) + " x " + std::to_string(dtype_size(d.dtype)) +
            " bytes, its data holds " + std::to_string(raw.size()));
  auto storage = Storage::allocate(nbytes);
  auto out = storage->mutable_bytes();
  if (nbytes) std::memcpy(out.data(), raw.data(), nbytes);
  if (d.big_endian) swap_elements(out, d.dtype);
  Shape strides(shape.size(), 1);
  if (fortran) {
    std::int64_t s = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      strides[i] = s;
      s *= std::max<std::int64_t>(shape[i], 1);
    }
  } else {
    strides = contiguous_strides(shape);
  }
  return Value::numpy_array(
      Tensor(d.dtype, std::move(shape), std::move(strides), 0, std::move(storage)),
      module.starts_with("numpy._core."));
}

bool flag(const Value& v, const char* what) {
  if (v.is(Value::Kind::Bool) || v.is(Value::Kind::Int)) return v.as_int() != 0;
  corrupt(std::string(what) + " is " + v.repr(2) + ", not a bool");
}

// _reconstruct(ndarray, (0,), b'b') with BUILD state
// (version, shape, dtype, is_fortran, raw) or, before versions, (shape, dtype, is_fortran, raw).
std::optional<Value> reconstructed(const Object& o) {
  const auto& a = o.args.items();
  if (a.empty() || !a[0].is(Value::Kind::Global) || !a[0].as_global().is("numpy", "ndarray"))
    return std::nullopt;                       // a subclass (numpy.matrix, ...): inert
  if (o.state.is_none()) return std::nullopt;  // never built: an empty placeholder, inert
  if (!o.state.is(Value::Kind::Tuple) || (o.state.size() != 4 && o.state.size() != 5))
    corrupt("array state " + o.state.repr(4) + " is not (version, shape, dtype, is_fortran, data)");
  const auto& s = o.state.items();
  const std::size_t b = s.size() == 5 ? 1 : 0;
  if (b == 1 && (!s[0].is(Value::Kind::Int) || s[0].as_int() != 1))
    corrupt("array state version " + s[0].repr(2) + " (1 is read)");
  Shape shape = shape_of(s[b]);
  const Dtype d = parse_dtype(s[b + 1]);
  const bool fortran = flag(s[b + 2], "array is_fortran");
  if (d.kind == Dtype::Kind::object) {
    if (s[b + 3].is(Value::Kind::List)) return std::nullopt;  // object array: inert
    raw_bytes(s[b + 3], d, "array");                          // throws
  }
  if (d.kind != Dtype::Kind::numeric) return std::nullopt;
  return make_array(d, std::move(shape), fortran, raw_bytes(s[b + 3], d, "array"), o.cls.module);
}

// _frombuffer(buffer, dtype, shape, order)
std::optional<Value> from_buffer(const Object& o) {
  const auto& a = o.args.items();
  if (a.size() != 4)
    corrupt("_frombuffer called with " + o.args.repr(3) + ", not (buffer, dtype, shape, order)");
  const Dtype d = parse_dtype(a[1]);
  Shape shape = shape_of(a[2]);
  const std::string order = a[3].is(Value::Kind::Str) ? a[3].as_str() : std::string();
  if (order != "C" && order != "F") corrupt("_frombuffer order " + a[3].repr(2) + " (C or F)");
  if (d.kind == Dtype::Kind::object)
    raw_bytes(Value(), d, "array");  // throws: numpy pickles these by value
  if (d.kind != Dtype::Kind::numeric) return std::nullopt;
  return make_array(d, std::move(shape), order == "F", raw_bytes(a[0], d, "array"), o.cls.module);
}

template <class T>
T load(const std::string& raw, bool big_endian) {
  T v;
  std::byte b[sizeof(T)];
  std::memcpy(b, raw.data(), sizeof(T));
  if (big_endian) std::reverse(std::begin(b), std::end(b));
  std::memcpy(&v, b, sizeof(T));
  return v;
}

// scalar(dtype, raw): numpy.float64(0.93) and friends, as Python numbers.
std::optional<Value> scalar(const Object& o) {
  const auto& a = o.args.items();
  if (a.size() != 2) corrupt("scalar called with " + o.args.repr(3) + ", not (dtype, data)");
  Dtype d = parse_dtype(a[0]);
  if (d.kind == Dtype::Kind::object)
    raw_bytes(a[1], d, "scalar");  // object scalars are not pickled this way
  if (d.kind != Dtype::Kind::numeric) return std::nullopt;  // numpy.str_ and the like: inert
  const std::string& raw = raw_bytes(a[1], d, "scalar");
  if (raw.size() != dtype_size(d.dtype))
    corrupt("scalar of dtype '" + d.code + "' holds " + std::to_string(raw.size()) +
            " bytes, not " + std::to_string(dtype_size(d.dtype)));
  const bool be = d.big_endian;
  const std::size_t half = dtype_size(d.dtype) / 2;
  switch (d.dtype) {
    case DType::BOOL:
      return Value::boolean(raw[0] != 0);
    case DType::I8:
      return Value::integer(load<std::int8_t>(raw, be));
    case DType::I16:
      return Value::integer(load<std::int16_t>(raw, be));
    case DType::I32:
      return Value::integer(load<std::int32_t>(raw, be));
    case DType::I64:
      return Value::integer(load<std::int64_t>(raw, be));
    case DType::U8:
      return Value::integer(load<std::uint8_t>(raw, be));
    case DType::U16:
      return Value::integer(load<std::uint16_t>(raw, be));
    case DType::U32:
      return Value::integer(load<std::uint32_t>(raw, be));
    case DType::U64: {
      const std::uint64_t u = load<std::uint64_t>(raw, be);
      if (u <= static_cast<std::uint64_t>(INT64_MAX))
        return Value::integer(static_cast<std::int64_t>(u));
      std::string le(9, '\0');  // two's complement needs a zero sign byte
      for (int i = 0; i < 8; ++i)
        le[static_cast<std::size_t>(i)] = static_cast<char>((u >> (8 * i)) & 0xff);
      return Value::big_integer(std::move(le));
    }
    case DType::F16:
      return Value::real(half_to_float(load<std::uint16_t>(raw, be)));
    case DType::F32:
      return Value::real(load<float>(raw, be));
    case DType::F64:
      return Value::real(load<double>(raw, be));
    case DType::C64:
      return Value::complex(load<float>(raw, be), load<float>(raw.substr(half), be));
    case DType::C128:
      return Value::complex(load<double>(raw, be), load<double>(raw.substr(half), be));
    default:
      return std::nullopt;
  }
}

}  // namespace

bool referenced(const pickle::Stats& stats) {
  return std::any_of(stats.globals.begin(), stats.globals.end(), [](const pickle::GlobalUse& g) {
    const Global x{g.module, g.name};
    return is_reconstruct(x) || is_frombuffer(x) || is_scalar(x);
  });
}

std::optional<Value> value_of(const Object& o) {
  if (!o.args.is(Value::Kind::Tuple)) return std::nullopt;
  if (is_reconstruct(o.cls)) return reconstructed(o);
  if (is_frombuffer(o.cls)) return from_buffer(o);
  if (is_scalar(o.cls)) return scalar(o);
  return std::nullopt;
}

std::optional<ElementLayout> element_layout(const Value& v) noexcept try {
  const Dtype d = parse_dtype(v);
  if (d.kind == Dtype::Kind::numeric) return ElementLayout{dtype_size(d.dtype), false};
  if (d.kind == Dtype::Kind::object) return ElementLayout{8, true};
  const Object& o = v.as_object();
  std::int64_t elsize = -1;
  if (o.state.is(Value::Kind::Tuple)) {
    const auto& s = o.state.items();  // (version, order, subarray, names, fields, elsize, ...)
    if (!s[2].is_none() || !s[3].is_none() || !s[4].is_none() || !s[5].is(Value::Kind::Int))
      return std::nullopt;  // a subarray or fields: numpy's own rules, not read here
    elsize = s[5].as_int();
  }
  if (d.code.empty()) return std::nullopt;
  const char kind = d.code[0];
  if (kind == 'M' || kind == 'm') return ElementLayout{8, false};
  // A flexible dtype takes its size from the state (numpy's setstate).
  std::uint64_t n = 0;
  if (elsize >= 0) {
    n = static_cast<std::uint64_t>(elsize);
  } else if (d.code.size() > 1) {
    n = std::stoull(d.code.substr(1)) * (kind == 'U' ? 4 : 1);
  }
  if (n == 0 || std::strchr("SaUV", kind) == nullptr) return std::nullopt;
  return ElementLayout{n, false};
} catch (...) {
  return std::nullopt;
}

bool is_object_array(const Object& o) noexcept {
  try {
    if (!o.args.is(Value::Kind::Tuple)) return false;
    if (is_reconstruct(o.cls)) {
      const auto& a = o.args.items();
      if (a.empty() || !a[0].is(Value::Kind::Global) || !a[0].as_global().is("numpy", "ndarray") ||
          !o.state.is(Value::Kind::Tuple) || (o.state.size() != 4 && o.state.size() != 5))
        return false;
      return parse_dtype(o.state.items()[o.state.size() == 5 ? 2 : 1]).kind == Dtype::Kind::object;
    }
    if (is_frombuffer(o.cls) && o.args.size() == 4)
      return parse_dtype(o.args.items()[1]).kind == Dtype::Kind::object;
  } catch (...) {  // a malformed state is open()'s to report, not this question's
  }
  return false;
}

}  // namespace torchport::formats::numpy
