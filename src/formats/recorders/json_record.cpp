// Pretty JSON records (.json): indented, readable, tensors as base64 of
// their little-endian bytes (one string per tensor, never a number per
// element: 4 bytes of text per 3 of data, and exact for every dtype).

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "formats/read/strict_json.hpp"
#include "formats/recorders/record_encode.hpp"
#include "torchport/core/error.hpp"

namespace torchport::record_files {
namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void write_base64(std::span<const std::byte> in, Sink& sink) {
  char out[4096];
  std::size_t o = 0;
  std::size_t i = 0;
  auto put = [&](char c) {
    out[o++] = c;
    if (o == sizeof out) {
      sink.write(out, o);
      o = 0;
    }
  };
  for (; i + 3 <= in.size(); i += 3) {
    const auto v = (std::to_integer<unsigned>(in[i]) << 16) |
                   (std::to_integer<unsigned>(in[i + 1]) << 8) |
                   std::to_integer<unsigned>(in[i + 2]);
    put(kB64[v >> 18]);
    put(kB64[(v >> 12) & 63]);
    put(kB64[(v >> 6) & 63]);
    put(kB64[v & 63]);
  }
  if (i < in.size()) {
    unsigned v = std::to_integer<unsigned>(in[i]) << 16;
    if (i + 1 < in.size()) v |= std::to_integer<unsigned>(in[i + 1]) << 8;
    put(kB64[v >> 18]);
    put(kB64[(v >> 12) & 63]);
    put(i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=');
    put('=');
  }
  sink.write(out, o);
}

std::shared_ptr<Storage> decode_base64(const std::string& s, std::uint64_t expected) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (s.size() % 4 != 0)
    throw Error(ErrorCode::corrupt, "tensor data is not base64 (length not a multiple of 4)",
                "data");
  std::size_t n = s.size() / 4 * 3;
  if (!s.empty() && s.back() == '=') --n;
  if (s.size() > 1 && s[s.size() - 2] == '=') --n;
  if (n != expected)
    throw Error(ErrorCode::corrupt,
                "tensor data decodes to " + std::to_string(n) +
                    " bytes, its dtype and shape need " + std::to_string(expected),
                "data");
  auto st = Storage::allocate(n);
  auto out = st->mutable_bytes();
  std::size_t o = 0;
  for (std::size_t i = 0; i < s.size(); i += 4) {
    int q[4];
    for (int k = 0; k < 4; ++k) {
      const char c = s[i + static_cast<std::size_t>(k)];
      q[k] = c == '=' && i + 4 == s.size() && k >= 2 ? 0 : value(c);
      if (q[k] < 0)
        throw Error(ErrorCode::corrupt, "tensor data has a character outside base64", "data");
    }
    const unsigned v = (static_cast<unsigned>(q[0]) << 18) | (static_cast<unsigned>(q[1]) << 12) |
                       (static_cast<unsigned>(q[2]) << 6) | static_cast<unsigned>(q[3]);
    const unsigned char b[3] = {static_cast<unsigned char>(v >> 16),
                                static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
    for (int k = 0; k < 3 && o < n; ++k) out[o++] = std::byte{b[k]};
  }
  return st;
}

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_value(const Value& v, Sink& sink, int depth) {
  const std::string indent(static_cast<std::size_t>(depth + 1) * 2, ' ');
  const std::string close(static_cast<std::size_t>(depth) * 2, ' ');
  switch (v.kind()) {
    case Value::Kind::None:
      sink.write("null");
      return;
    case Value::Kind::Bool:
      sink.write(v.as_bool() ? "true" : "false");
      return;
    case Value::Kind::Int:
      sink.write(std::to_string(v.as_int()));
      return;
    case Value::Kind::Float: {
      const double d = v.as_float();
      if (!std::isfinite(d))
        throw Error(ErrorCode::invalid_argument,
                    "JSON cannot hold the float " + v.repr() + "; use .mpk or .tpb");
      sink.write(nlohmann::json(d).dump());
      return;
    }
    case Value::Kind::Str:
      sink.write(quoted(v.as_str()));
      return;
    case Value::Kind::Bytes: {
      sink.write("{\"__bytes__\": \"");
      write_base64({reinterpret_cast<const std::byte*>(v.as_bytes().data()), v.as_bytes().size()},
                   sink);
      sink.write("\"}");
      return;
    }
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      if (v.size() == 0) {
        sink.write("[]");
        return;
      }
      sink.write("[\n");
      std::size_t i = 0;
      for (const auto& x : v.items()) {
        sink.write(indent);
        write_value(x, sink, depth + 1);
        sink.write(++i < v.size() ? ",\n" : "\n");
      }
      sink.write(close + "]");
      return;
    }
    case Value::Kind::Dict: {
      if (v.size() == 0) {
        sink.write("{}");
        return;
      }
      sink.write("{\n");
      std::size_t i = 0;
      for (const auto& [k, x] : v.pairs()) {
        sink.write(indent + quoted(k.as_str()) + ": ");
        write_value(x, sink, depth + 1);
        sink.write(++i < v.size() ? ",\n" : "\n");
      }
      sink.write(close + "}");
      return;
    }
    case Value::Kind::Tensor: {
      const Tensor& t = v.as_tensor();
      sink.write("{\"__tensor__\": {\"dtype\": \"" + std::string(dtype_name(t.dtype())) +
                 "\", \"shape\": " + nlohmann::json(t.shape()).dump() + ", \"data\": \"");
      const Tensor c = t.contiguous();
      write_base64(c.bytes(), sink);
      sink.write("\"}}");
      return;
    }
    default:
      throw Error(ErrorCode::invalid_argument,
                  "a record cannot hold a " + std::string(v.kind_name()));
  }
}

Value from_json(const nlohmann::ordered_json& j, const Limits& limits, std::uint32_t depth,
                std::uint64_t& nodes) {
  if (depth > limits.max_depth)
    throw Error(ErrorCode::limit_exceeded, "nesting exceeds Limits::max_depth");
  if (++nodes > limits.max_nodes)
    throw Error(ErrorCode::limit_exceeded, "more values than Limits::max_nodes");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX))
        throw Error(ErrorCode::unsupported, "integer above 2^63 - 1");
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::real(j.get<double>());
    case nlohmann::json::value_t::string:
      return Value::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Value l = Value::list();
      for (const auto& x : j) l.append(from_json(x, limits, depth + 1, nodes));
      return l;
    }
    case nlohmann::json::value_t::object: {
      if (j.size() == 1 && j.contains("__tensor__")) {
        const nlohmann::ordered_json& inner = j["__tensor__"];
        if (!inner.is_object()) throw Error(ErrorCode::corrupt, "tensor entry is not an object");
        Value spec = Value::dict();
        for (const char* k : {"dtype", "shape"})
          if (inner.contains(k))
            spec.insert(Value::str(k), from_json(inner[k], limits, depth + 1, nodes));
        const TensorSpec s = tensor_spec(spec);
        if (!inner.contains("data") || !inner["data"].is_string())
          throw Error(ErrorCode::corrupt, "tensor entry without base64 'data'", "data");
        Shape strides = contiguous_strides(s.shape);
        return Value::tensor(
            Tensor(s.dtype, s.shape, std::move(strides), 0,
                   decode_base64(inner["data"].get_ref<const std::string&>(), s.nbytes)));
      }
      if (j.size() == 1 && j.contains("__bytes__") && j["__bytes__"].is_string()) {
        const std::string& b64 = j["__bytes__"].get_ref<const std::string&>();
        std::size_t n = b64.size() / 4 * 3;
        if (!b64.empty() && b64.back() == '=') --n;
        if (b64.size() > 1 && b64[b64.size() - 2] == '=') --n;
        const auto st = decode_base64(b64, n);
        return Value::bytes(
            std::string(reinterpret_cast<const char*>(st->bytes().data()), st->nbytes()));
      }
      Value d = Value::dict();
      for (const auto& [k, x] : j.items())
        d.insert(Value::str(k), from_json(x, limits, depth + 1, nodes));
      return d;
    }
    default:
      throw Error(ErrorCode::corrupt, "unexpected JSON value");
  }
}

}  // namespace

void write_json(const Value& top, Sink& sink) {
  write_value(top, sink, 0);
  sink.write("\n");
}

ParsedRecord read_json(const Source& source, const Limits& limits) {
  const auto b = source.bytes();
  // The strict SAX builder the safetensors headers use: a repeated key is
  // refused (nlohmann's DOM keeps the last), depth and value counts are
  // limited while parsing, before they cost memory, and key order is kept.
  const std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
  const nlohmann::ordered_json j = formats::parse_strict_json(
      text, "JSON record", 0, source.name(),
      static_cast<int>(std::min<std::uint64_t>(limits.max_depth, 1u << 20)), limits.max_nodes);
  std::uint64_t nodes = 0;
  try {
    return open_envelope(from_json(j, limits, 0, nodes), "torchport-json", source.name());
  } catch (const Error& e) {
    if (!e.where().empty()) throw;
    throw Error(e.code(), e.message(), e.key(), e.offset(), source.name());
  }
}

}  // namespace torchport::record_files
