#include "torch_common.hpp"

#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>

#include "numpy.hpp"
#include "quantized.hpp"
#include "sparse.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::formats {

DType storage_class_dtype(const Value& storage_type) {
  if (!storage_type.is(Value::Kind::Global))
    throw Error(ErrorCode::corrupt,
                "storage type is a " + std::string(storage_type.kind_name()) + ", not a class");
  const Global& g = storage_type.as_global();
  if (g.module == "torch" || g.module == "torch.cuda") {
    if (g.name == "UntypedStorage") return DType::U8;
    if (auto d = dtype_from_storage_class(g.name)) return *d;
    if (auto d = quantized::storage_dtype(g.name)) return *d;  // a quantized tensor's integers
  }
  throw Error(ErrorCode::unsupported,
              "storage class " + g.qualified() +
                  " (quantized and other special storages are not read)");
}

namespace {

std::string text_of(const Value& v, const char* what) {
  // Python 2 pickles may carry these as bytes.
  if (v.is(Value::Kind::Str) || v.is(Value::Kind::Bytes))
    return v.is(Value::Kind::Str) ? v.as_str() : v.as_bytes();
  if (v.is(Value::Kind::Int)) return std::to_string(v.as_int());
  throw Error(ErrorCode::corrupt, std::string(what) + " is a " + std::string(v.kind_name()) +
                                      ", not a string");
}

std::uint64_t count_of(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Int) || v.as_int() < 0)
    throw Error(ErrorCode::corrupt, std::string(what) + " is " + v.repr(3) +
                                        ", not a non-negative integer");
  return static_cast<std::uint64_t>(v.as_int());
}

}  // namespace

StorageRef parse_storage_ref(const Value& pid) {
  if (!pid.is(Value::Kind::Tuple) || pid.size() < 5 || pid.size() > 6)
    throw Error(ErrorCode::corrupt, "persistent id " + pid.repr(6) +
                                        " is not a ('storage', type, key, location, numel) tuple");
  const auto& a = pid.items();
  const std::string tag = text_of(a[0], "persistent id tag");
  if (tag != "storage")
    throw Error(ErrorCode::unsupported, "persistent id of kind '" + tag + "' (only storages are read)");
  StorageRef r;
  r.dtype = storage_class_dtype(a[1]);
  r.key = text_of(a[2], "storage key");
  r.location = text_of(a[3], "storage location");
  r.numel = count_of(a[4], "storage size");
  if (!detail::mul_ok(r.numel, dtype_size(r.dtype), r.nbytes))
    throw Error(ErrorCode::corrupt, "storage '" + r.key + "' declares " + std::to_string(r.numel) +
                                        " elements, more bytes than fit in 64 bits");
  if (pid.size() == 6 && !a[5].is_none()) {
    const Value& vm = a[5];
    if (!vm.is(Value::Kind::Tuple) || vm.size() != 3)
      throw Error(ErrorCode::corrupt, "storage view metadata " + vm.repr(4) + " is not (key, offset, size)");
    r.view = StorageRef::View{text_of(vm.items()[0], "view key"),
                              count_of(vm.items()[1], "view offset"),
                              count_of(vm.items()[2], "view size")};
  }
  return r;
}

Value storage_value(DType dtype, std::uint64_t numel, std::shared_ptr<Storage> storage) {
  return Value::tensor(Tensor(dtype, {static_cast<std::int64_t>(numel)}, {1}, 0, std::move(storage)));
}

std::shared_ptr<Storage> record_storage(const Source& source, std::uint64_t offset,
                                        std::uint64_t nbytes, DType dtype, bool big_endian) {
  if (offset > source.size() || nbytes > source.size() - offset)
    throw Error(ErrorCode::truncated,
                "record [" + std::to_string(offset) + ", +" + std::to_string(nbytes) + ") lies outside the " +
                    std::to_string(source.size()) + " bytes of " + source.name(),
                {}, offset, source.name());
  const std::span<const std::byte> rec =
      source.bytes().subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(nbytes));
  const auto addr = reinterpret_cast<std::uintptr_t>(rec.data());
  if (!big_endian) {
    if (addr % dtype_alignment(dtype) == 0) return Storage::borrow(rec, source.owner(), source.file());
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

DType dtype_global(const Value& v) {
  if (v.is(Value::Kind::Global) && v.as_global().module == "torch")
    if (auto d = dtype_from_torch_name(v.as_global().name)) return *d;
  throw Error(ErrorCode::unsupported, "tensor dtype " + v.repr(2) + " is not one torchport reads");
}

Tensor as_tensor(const Value& v) {
  if (!v.is(Value::Kind::Tensor))
    throw Error(ErrorCode::corrupt, "parameter data is a " + std::string(v.kind_name()) + ", not a tensor");
  return v.as_tensor();
}

// The tensor a call of `g` with `args` describes, or nothing when it
// describes none. Values nested in the call (a parameter's data) go through
// `inner`: the rebuild walk rebuilds them, the call hook (which sees inner
// calls before outer ones) takes them as they are.
template <class Inner>
std::optional<Tensor> tensor_of_call(const Global& g, const Value& args, Inner&& inner) {
  const bool utils = g.module == "torch._utils";
  if (utils && (g.name == "_rebuild_tensor" || g.name == "_rebuild_tensor_v2" || g.name == "_rebuild_tensor_v3")) {
    const Value& storage = arg(g, args, 0);
    if (!storage.is(Value::Kind::Tensor))
      throw Error(ErrorCode::corrupt,
                  "tensor rebuilt from a " + std::string(storage.kind_name()) + " instead of a storage");
    const Tensor& st = storage.as_tensor();
    const std::int64_t offset = arg(g, args, 1).as_int();
    Shape size = int_list(arg(g, args, 2), "size");
    Shape stride = int_list(arg(g, args, 3), "stride");
    const DType dtype = g.name == "_rebuild_tensor_v3" ? dtype_global(arg(g, args, 6)) : st.dtype();
    return Tensor(dtype, std::move(size), std::move(stride), offset, st.storage());
  }
  if (utils && (g.name == "_rebuild_parameter" || g.name == "_rebuild_parameter_with_state"))
    return as_tensor(inner(arg(g, args, 0)));
  if (g.module == "torch._tensor" && g.name == "_rebuild_from_type_v2") {
    // (func, type, args, state): the tensor is func(*args).
    const Value& fn = arg(g, args, 0);
    if (!fn.is(Value::Kind::Global)) throw Error(ErrorCode::corrupt, "_rebuild_from_type_v2 of a non-function");
    if (auto t = tensor_of_call(fn.as_global(), arg(g, args, 2), inner)) return t;
    throw Error(ErrorCode::corrupt, "parameter data is a object, not a tensor");
  }
  if (g.module == "torch.nn.parameter" && g.name == "Parameter") {
    if (args.size() == 0) throw Error(ErrorCode::corrupt, "Parameter without data");
    return as_tensor(inner(arg(g, args, 0)));
  }
  if (utils && g.name == "_rebuild_qtensor")
    return quantized::rebuild(args, [&](const Value& v) -> Value { return inner(v); });
  if (utils && (g.name == "_rebuild_sparse_tensor" || g.name == "_rebuild_sparse_csr_tensor"))
    return sparse::rebuild(args, [&](const Value& v) -> Value { return inner(v); });
  if (utils && g.name.starts_with("_rebuild_"))
    throw Error(ErrorCode::unsupported, g.qualified() + " (sparse, quantized, meta and nested tensors are not read)");
  return std::nullopt;
}

// The slow path: a copy of the tree with every inert tensor call replaced
// by its tensor, errors naming the key path.
class Rebuilder {
 public:
  explicit Rebuilder(std::string where) : where_(std::move(where)) {}

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
        Value out = v.is(Value::Kind::List) ? Value::list() : v.is(Value::Kind::Tuple) ? Value::tuple() : Value::set();
        std::size_t i = 0;
        for (const auto& item : v.items()) out.append(walk(item, child(path, std::to_string(i++))));
        return out;
      }
      case Value::Kind::Dict: {
        Value out = Value::dict();
        for (const auto& [k, x] : v.pairs())
          out.insert(k, walk(x, child(path, k.is(Value::Kind::Str) ? k.as_str() : k.repr())));
        return out;
      }
      case Value::Kind::Object: {
        const Object& o = v.as_object();
        if (auto t = tensor_call(o, path)) return Value::tensor(*t);
        if (auto n = numpy_value(o, path)) return *n;
        Value out = Value::object(o.cls, walk(o.args, path));
        if (!o.state.is_none()) out.set_state(walk(o.state, path));
        return out;
      }
      default: return v;
    }
  }

  std::optional<Tensor> tensor_call(const Object& o, const std::string& path) {
    try {
      return tensor_of_call(o.cls, o.args, [&](const Value& v) { return walk(v, path); });
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
  std::unordered_map<const void*, Value> done_;
};

// The fast path: tensors built as the pickle runs (inner calls reduce
// before outer ones, so a parameter's data is already a tensor). A call it
// cannot build stays inert and is remembered: the slow path then reports it.
class TensorCalls {
 public:
  std::optional<Value> operator()(const Global& g, const Value& args, std::uint64_t) {
    if (g.module != "torch._utils" && g.module != "torch._tensor" && g.module != "torch.nn.parameter")
      return std::nullopt;
    try {
      if (auto t = tensor_of_call(g, args, [](const Value& v) -> const Value& { return v; }))
        return Value::tensor(std::move(*t));
    } catch (const Error&) {
      failed = true;
    }
    return std::nullopt;
  }
  bool failed = false;
};

}  // namespace

Value rebuild_tensors(const Value& root, std::string_view where) {
  Rebuilder r{std::string(where)};
  return r.walk(root, "");
}

Value run_torch_pickle(ByteReader& reader, const OpenOptions& options, const pickle::PersistentLoad& persistent) {
  TensorCalls calls;
  pickle::Stats stats;
  Value v;
  try {
    v = pickle::unpickle(reader, options.limits, persistent, &stats, std::ref(calls));
  } catch (const Error&) {
    // A payload often breaks the pickle's grammar after its dangerous global
    // (getattr(__import__('os'), 'system')(...) calls a call's result): the
    // global is what the user must hear about, not the opcode that followed.
    check_globals(stats, options, reader.what());
    throw;
  }
  check_globals(stats, options, reader.what());
  return calls.failed || numpy::referenced(stats) ? rebuild_tensors(v, reader.what()) : v;
}

void check_globals(const pickle::Stats& stats, const OpenOptions& options, std::string_view where) {
  for (const auto& g : stats.globals) {
    const std::string name = g.module + "." + g.name;
    if (g.klass == pickle::GlobalClass::dangerous)
      throw Error(ErrorCode::unsafe_global,
                  "the pickle references '" + name +
                      "', which runs code when Python unpickles it (as torch.load without "
                      "weights_only would); torchport never runs it, and refuses the file. "
                      "`torchport scan` lists everything it references",
                  {}, g.first_offset, std::string(where));
    if (g.klass == pickle::GlobalClass::unknown && !options.allow_unknown_globals)
      throw Error(ErrorCode::unsafe_global,
                  "the pickle references '" + name +
                      "', which is not on the allow-list (OpenOptions::allow_unknown_globals is "
                      "false)",
                  {}, g.first_offset, std::string(where));
  }
}

Value run_pickle(ByteReader& reader, const OpenOptions& options,
                 const pickle::PersistentLoad& persistent, pickle::Stats* stats) {
  pickle::Stats local;
  pickle::Stats& s = stats ? *stats : local;
  Value v;
  try {
    v = pickle::unpickle(reader, options.limits, persistent, &s);
  } catch (const Error&) {
    check_globals(s, options, reader.what());  // as in run_torch_pickle
    throw;
  }
  check_globals(s, options, reader.what());
  return v;
}

}  // namespace torchport::formats
