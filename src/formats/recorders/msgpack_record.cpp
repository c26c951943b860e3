// Named MessagePack records (.mpk), and the MessagePack encoding the compact
// binary format uses for its header. Writing goes through msgpack-cxx's
// packer; reading through its SAX-style parser with our visitor, which
// builds the value tree under the limits and views bin data in place.

#include <msgpack.hpp>

#include "formats/read/torch_common.hpp"
#include "formats/recorders/record_encode.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::record_files {
namespace {

struct PackStream {
  Sink* sink;
  void write(const char* p, std::size_t n) { sink->write(p, n); }
};

void pack_str(msgpack::packer<PackStream>& pk, std::string_view s) {
  if (s.size() > 0xffffffffu)
    throw Error(ErrorCode::invalid_argument, "string longer than 4 GiB in a record");
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_value(const Value& v, msgpack::packer<PackStream>& pk, Sink& sink,
                const std::function<void(const Tensor&, Sink&)>& tensor) {
  switch (v.kind()) {
    case Value::Kind::None:
      pk.pack_nil();
      return;
    case Value::Kind::Bool:
      v.as_bool() ? pk.pack_true() : pk.pack_false();
      return;
    case Value::Kind::Int:
      pk.pack_int64(v.as_int());
      return;
    case Value::Kind::Float:
      pk.pack_double(v.as_float());
      return;
    case Value::Kind::Str:
      pack_str(pk, v.as_str());
      return;
    case Value::Kind::Bytes: {
      // {"__bytes__": bin}: a bare bin is tensor data, read back as a U8 tensor.
      const std::string& b = v.as_bytes();
      pk.pack_map(1);
      pack_str(pk, kBytesKey);
      pk.pack_bin(static_cast<std::uint32_t>(b.size()));
      pk.pack_bin_body(b.data(), static_cast<std::uint32_t>(b.size()));
      return;
    }
    case Value::Kind::List:
    case Value::Kind::Tuple:
      pk.pack_array(static_cast<std::uint32_t>(v.size()));
      for (const auto& x : v.items()) pack_value(x, pk, sink, tensor);
      return;
    case Value::Kind::Dict:
      pk.pack_map(static_cast<std::uint32_t>(v.size()));
      for (const auto& [k, x] : v.pairs()) {
        pack_str(pk, k.as_str());
        pack_value(x, pk, sink, tensor);
      }
      return;
    case Value::Kind::Tensor:
      tensor(v.as_tensor(), sink);
      return;
    default:
      throw Error(ErrorCode::invalid_argument,
                  "a record cannot hold a " + std::string(v.kind_name()));
  }
}

// Builds a Value tree from parser events.
class Builder {
 public:
  Builder(const Source& source, const Limits& limits,
          const std::function<Tensor(const Value&)>& make_tensor)
      : source_(source), limits_(limits), make_tensor_(make_tensor) {}

  bool visit_nil() { return deliver(Value()); }
  bool visit_boolean(bool v) { return deliver(Value::boolean(v)); }
  bool visit_positive_integer(std::uint64_t v) {
    if (v > static_cast<std::uint64_t>(INT64_MAX))
      return fail(ErrorCode::unsupported, "integer above 2^63 - 1");
    return deliver(Value::integer(static_cast<std::int64_t>(v)));
  }
  bool visit_negative_integer(std::int64_t v) { return deliver(Value::integer(v)); }
  bool visit_float32(float v) { return deliver(Value::real(v)); }
  bool visit_float64(double v) { return deliver(Value::real(v)); }
  bool visit_str(const char* p, std::uint32_t n) {
    if (n > limits_.max_string_bytes)
      return fail(ErrorCode::limit_exceeded, "string exceeds Limits::max_string_bytes");
    return deliver(Value::str(std::string(p, n)));
  }
  bool visit_bin(const char* p, std::uint32_t n) {
    // A view of the source, not a copy: tensor data is most of a record.
    const auto offset = static_cast<std::uint64_t>(p - reinterpret_cast<const char*>(src_base()));
    return deliver(formats::storage_value(DType::U8, n, source_.storage(offset, n)));
  }
  bool visit_ext(const char*, std::uint32_t) {
    return fail(ErrorCode::unsupported, "MessagePack extension types");
  }
  bool start_array(std::uint32_t) { return open(Value::list()); }
  bool start_array_item() { return true; }
  bool end_array_item() { return true; }
  bool end_array() { return close(); }
  bool start_map(std::uint32_t) { return open(Value::dict()); }
  bool start_map_key() { return true; }
  bool end_map_key() { return true; }
  bool start_map_value() { return true; }
  bool end_map_value() { return true; }
  bool end_map() { return close(); }
  void parse_error(std::size_t, std::size_t at) {
    if (!error_) error_ = Error(ErrorCode::corrupt, "invalid MessagePack", {}, at, source_.name());
  }
  void insufficient_bytes(std::size_t, std::size_t at) {
    if (!error_)
      error_ = Error(ErrorCode::truncated, "MessagePack data ends early", {}, at, source_.name());
  }
  bool referenced() const { return false; }
  void set_referenced(bool) {}

  Value take_root() { return std::move(root_); }
  const std::optional<Error>& error() const { return error_; }

 private:
  struct Frame {
    Value container;
    std::optional<Value> key;
  };

  const std::byte* src_base() const { return source_.bytes().data(); }

  bool fail(ErrorCode code, std::string message) {
    if (!error_) error_ = Error(code, std::move(message), {}, std::nullopt, source_.name());
    return false;
  }

  bool open(Value container) {
    if (stack_.size() >= limits_.max_depth)
      return fail(ErrorCode::limit_exceeded, "nesting exceeds Limits::max_depth");
    stack_.push_back({std::move(container), std::nullopt});
    return true;
  }

  bool close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    Value v = std::move(f.container);
    if (v.is(Value::Kind::Dict) && v.size() == 1 && v.pairs()[0].first.is(Value::Kind::Str) &&
        v.pairs()[0].first.as_str() == kBytesKey && v.pairs()[0].second.is(Value::Kind::Tensor)) {
      const auto b = v.pairs()[0].second.as_tensor().bytes();
      return deliver(Value::bytes(std::string(reinterpret_cast<const char*>(b.data()), b.size())));
    }
    if (v.is(Value::Kind::Dict) && v.size() == 1 && v.pairs()[0].first.is(Value::Kind::Str) &&
        v.pairs()[0].first.as_str() == kTensorKey) {
      try {
        v = Value::tensor(make_tensor_(v.pairs()[0].second));
      } catch (const Error& e) {
        if (!error_) error_ = Error(e.code(), e.message(), e.key(), e.offset(), source_.name());
        return false;
      }
    }
    return deliver(std::move(v));
  }

  bool deliver(Value v) {
    if (++nodes_ > limits_.max_nodes)
      return fail(ErrorCode::limit_exceeded, "more values than Limits::max_nodes");
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& top = stack_.back();
    if (top.container.is(Value::Kind::List)) {
      top.container.append(std::move(v));
    } else if (!top.key) {
      if (!v.is(Value::Kind::Str))
        return fail(ErrorCode::corrupt, "a record's map keys must be strings");
      top.key = std::move(v);
    } else {
      top.container.insert(std::move(*top.key), std::move(v));
      top.key.reset();
    }
    return true;
  }

  const Source& source_;
  const Limits& limits_;
  const std::function<Tensor(const Value&)>& make_tensor_;
  std::vector<Frame> stack_;
  Value root_;
  std::uint64_t nodes_ = 0;
  std::optional<Error> error_;
};

const Value& field(const Value& inner, const char* name) {
  const Value* v = inner.find(name);
  if (v == nullptr)
    throw Error(ErrorCode::corrupt, std::string("tensor entry without '") + name + "'", name);
  return *v;
}

}  // namespace

void write_msgpack(const Value& v, Sink& sink,
                   const std::function<void(const Tensor&, Sink&)>& tensor) {
  PackStream stream{&sink};
  msgpack::packer<PackStream> pk(stream);
  pack_value(v, pk, sink, tensor);
}

Value read_msgpack(const Source& source, std::span<const std::byte> bytes, const Limits& limits,
                   const std::function<Tensor(const Value& inner)>& make_tensor) {
  const char* base = reinterpret_cast<const char*>(bytes.data());
  Builder b(source, limits, make_tensor);
  std::size_t off = 0;
  const bool ok = msgpack::v2::parse(base, bytes.size(), off, b);
  if (b.error()) throw *b.error();
  if (!ok) throw Error(ErrorCode::corrupt, "invalid MessagePack", {}, off, source.name());
  return b.take_root();
}

// Shape and dtype of a tensor entry, checked; the byte count they imply.
TensorSpec tensor_spec(const Value& inner) {
  TensorSpec s;
  const Value& dtype = field(inner, "dtype");
  if (!dtype.is(Value::Kind::Str) || !dtype_from_name(dtype.as_str()))
    throw Error(ErrorCode::corrupt, "tensor dtype " + dtype.repr() + " is not one torchport knows",
                "dtype");
  s.dtype = *dtype_from_name(dtype.as_str());
  const Value& shape = field(inner, "shape");
  if (!shape.is(Value::Kind::List))
    throw Error(ErrorCode::corrupt, "tensor shape is not a list", "shape");
  for (const auto& d : shape.items()) {
    if (!d.is(Value::Kind::Int) || d.as_int() < 0)
      throw Error(ErrorCode::corrupt, "tensor shape " + shape.repr() + " has a bad size", "shape");
    s.shape.push_back(d.as_int());
  }
  const std::int64_t numel = shape_numel(s.shape);
  if (!detail::mul_ok(static_cast<std::uint64_t>(numel), dtype_size(s.dtype), s.nbytes))
    throw Error(ErrorCode::corrupt, "tensor of shape " + shape.repr() + " is too large", "shape");
  return s;
}

void write_mpk(const Value& top, Sink& sink) {
  write_msgpack(top, sink, [](const Tensor& t, Sink& out) {
    if (t.nbytes() > 0xffffffffu)
      throw Error(ErrorCode::invalid_argument,
                  "tensor " + t.description() +
                      " exceeds MessagePack's 4 GiB bin limit; use the compact binary "
                      "format (.tpb)");
    PackStream stream{&out};
    msgpack::packer<PackStream> pk(stream);
    pk.pack_map(1);
    pk.pack_str(static_cast<std::uint32_t>(kTensorKey.size()));
    pk.pack_str_body(kTensorKey.data(), static_cast<std::uint32_t>(kTensorKey.size()));
    pk.pack_map(3);
    pk.pack_str(5);
    pk.pack_str_body("dtype", 5);
    const std::string_view dt = dtype_name(t.dtype());
    pk.pack_str(static_cast<std::uint32_t>(dt.size()));
    pk.pack_str_body(dt.data(), static_cast<std::uint32_t>(dt.size()));
    pk.pack_str(5);
    pk.pack_str_body("shape", 5);
    pk.pack_array(static_cast<std::uint32_t>(t.dim()));
    for (std::int64_t d : t.shape()) pk.pack_int64(d);
    pk.pack_str(4);
    pk.pack_str_body("data", 4);
    pk.pack_bin(static_cast<std::uint32_t>(t.nbytes()));
    const Tensor c = t.contiguous();
    out.write(c.bytes());
  });
}

ParsedRecord read_mpk(const Source& source, const Limits& limits) {
  const Value top = read_msgpack(source, source.bytes(), limits, [&](const Value& inner) {
    const TensorSpec s = tensor_spec(inner);
    const Value& data = field(inner, "data");
    if (!data.is(Value::Kind::Tensor))
      throw Error(ErrorCode::corrupt, "tensor data is not a bin", "data");
    const Tensor& blob = data.as_tensor();
    if (blob.nbytes() != s.nbytes)
      throw Error(ErrorCode::corrupt,
                  std::string(dtype_name(s.dtype)) + shape_to_string(s.shape) + " needs " +
                      std::to_string(s.nbytes) + " bytes but its data has " +
                      std::to_string(blob.nbytes()),
                  "data");
    const auto offset =
        static_cast<std::uint64_t>(blob.storage()->bytes().data() - source.bytes().data());
    Shape strides = contiguous_strides(s.shape);
    return Tensor(s.dtype, s.shape, std::move(strides), 0,
                  formats::record_storage(source, offset, s.nbytes, s.dtype, false));
  });
  return open_envelope(top, "torchport-mpk", source.name());
}

}  // namespace torchport::record_files
