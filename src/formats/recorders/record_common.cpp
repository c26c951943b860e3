#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "formats/recorders/record_encode.hpp"
#include "torchport/core/error.hpp"

namespace torchport::record_files {

void Sink::write(std::span<const std::byte> b) {
  written_ += b.size();
  if (b.size() >= kSize) {
    flush();
    out_(b);
    return;
  }
  if (buf_.size() + b.size() > kSize) flush();
  buf_.insert(buf_.end(), b.begin(), b.end());
}

void Sink::flush() {
  if (!buf_.empty()) out_(buf_);
  buf_.clear();
}

namespace {

constexpr std::string_view kDictKey = "__dict__";
constexpr std::string_view kObjectKey = "__object__";
constexpr std::string_view kGlobalKey = "__global__";
constexpr std::string_view kSetKey = "__set__";
constexpr std::string_view kTupleKey = "__tuple__";
constexpr std::string_view kOrderedKey = "__ordered_dict__";
constexpr std::string_view kComplexKey = "__complex__";
constexpr std::string_view kBigIntKey = "__int__";
constexpr std::string_view kFloatKey = "__float__";

Value marker(std::string_view key, Value inner) {
  Value d = Value::dict();
  d.insert(Value::str(std::string(key)), std::move(inner));
  return d;
}

Value name_pair(const Global& g) {
  return Value::list({Value::str(g.module), Value::str(g.name)});
}

}  // namespace

Value to_record_tree(const Value& v, const std::string& path) {
  const auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  const auto items = [&](const Value::Items& xs) {
    Value l = Value::list();
    l.reserve(xs.size());
    std::size_t i = 0;
    for (const auto& x : xs) l.append(to_record_tree(x, child(std::to_string(i++))));
    return l;
  };
  switch (v.kind()) {
    case Value::Kind::None:
    case Value::Kind::Bool:
    case Value::Kind::Int:
    case Value::Kind::Str:
    case Value::Kind::Bytes:
    case Value::Kind::Tensor:
      return v;
    case Value::Kind::Float: {
      const double d = v.as_float();
      if (std::isfinite(d)) return v;
      return marker(kFloatKey, Value::str(std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf"));
    }
    case Value::Kind::BigInt: {  // its little-endian two's complement bytes, as numbers
      Value bytes = Value::list();
      for (const char c : v.as_bytes()) bytes.append(Value::integer(static_cast<unsigned char>(c)));
      return marker(kBigIntKey, bytes);
    }
    case Value::Kind::Complex: {
      const auto [re, im] = v.as_complex();
      return marker(kComplexKey, Value::list({to_record_tree(Value::real(re), path),
                                              to_record_tree(Value::real(im), path)}));
    }
    case Value::Kind::List:
      return items(v.items());
    case Value::Kind::Tuple:
      return marker(kTupleKey, items(v.items()));
    case Value::Kind::Set:
      return marker(kSetKey, items(v.items()));
    case Value::Kind::Global:
      return marker(kGlobalKey, name_pair(v.as_global()));
    case Value::Kind::Object: {
      const Object& o = v.as_object();
      Value inner = Value::dict();
      inner.insert(Value::str("class"), name_pair(o.cls));
      inner.insert(Value::str("args"),
                   o.args.is_container() ? items(o.args.items()) : Value::list());
      inner.insert(Value::str("state"), to_record_tree(o.state, path));
      return marker(kObjectKey, inner);
    }
    case Value::Kind::Dict: {
      bool plain = true;
      for (const auto& [k, x] : v.pairs()) plain = plain && k.is(Value::Kind::Str);
      if (plain) {
        Value d = Value::dict();
        d.reserve(v.size());
        for (const auto& [k, x] : v.pairs()) d.insert(k, to_record_tree(x, child(k.as_str())));
        // A state_dict is a collections.OrderedDict: a .pt written back
        // from the record gives torch one again.
        return v.is_ordered_dict() ? marker(kOrderedKey, d) : d;
      }
      Value pairs = Value::list();
      pairs.reserve(v.size());
      for (const auto& [k, x] : v.pairs()) {
        if (k.is(Value::Kind::Tensor))
          throw Error(ErrorCode::invalid_argument, "a record cannot hold a tensor as a dict key",
                      path);
        const std::string name = k.is(Value::Kind::Str) ? k.as_str() : k.repr(2);
        pairs.append(Value::list({to_record_tree(k, path), to_record_tree(x, child(name))}));
      }
      return marker(kDictKey, v.is_ordered_dict() ? marker(kOrderedKey, pairs) : pairs);
    }
  }
  throw Error(ErrorCode::invalid_argument,
              "a record cannot hold a " + std::string(v.kind_name()) + " (" + v.repr(3) + ")",
              path);
}

namespace {

[[noreturn]] void bad_marker(std::string_view key, const std::string& why) {
  throw Error(ErrorCode::corrupt, "malformed '" + std::string(key) + "' entry: " + why,
              std::string(key));
}

const Value::Items& list_of(std::string_view key, const Value& v, std::size_t n = 0) {
  if (!v.is(Value::Kind::List))
    bad_marker(key, "expected a list, found a " + std::string(v.kind_name()));
  if (n != 0 && v.size() != n) bad_marker(key, "expected " + std::to_string(n) + " items");
  return v.items();
}

Global global_of(std::string_view key, const Value& v) {
  const auto& xs = list_of(key, v, 2);
  if (!xs[0].is(Value::Kind::Str) || !xs[1].is(Value::Kind::Str))
    bad_marker(key, "a class is [module, name], two strings");
  return {xs[0].as_str(), xs[1].as_str()};
}

// The value a one-key marker dict stands for, its parts already decoded;
// nullopt when `v` is no marker.
std::optional<Value> unmark(const Value& v) {
  if (!v.is(Value::Kind::Dict) || v.size() != 1 || !v.pairs()[0].first.is(Value::Kind::Str))
    return std::nullopt;
  const std::string& key = v.pairs()[0].first.as_str();
  const Value& inner = v.pairs()[0].second;
  if (key == kOrderedKey) {
    // {"__ordered_dict__": {...}}, or inside "__dict__" around its pairs.
    if (inner.is(Value::Kind::List)) return std::nullopt;  // "__dict__" reads it
    if (!inner.is(Value::Kind::Dict)) bad_marker(key, "expected a dict");
    Value d = Value::ordered_dict();
    for (const auto& [k, x] : inner.pairs()) d.insert(k, x);
    return d;
  }
  if (key == kDictKey) {
    const Value* ordered = inner.find(kOrderedKey);
    Value d = ordered != nullptr ? Value::ordered_dict() : Value::dict();
    for (const auto& pair : list_of(key, ordered != nullptr ? *ordered : inner)) {
      const auto& kv = list_of(key, pair, 2);
      d.insert(kv[0], kv[1]);
    }
    return d;
  }
  if (key == kObjectKey) {
    const Value* cls = inner.find("class");
    const Value* args = inner.find("args");
    const Value* state = inner.find("state");
    if (cls == nullptr || args == nullptr) bad_marker(key, "needs 'class' and 'args'");
    Value o = Value::object(global_of(key, *cls), Value::tuple(list_of(key, *args)));
    if (state != nullptr && !state->is_none()) o.set_state(*state);
    return o;
  }
  if (key == kGlobalKey) {
    const Global g = global_of(key, inner);
    return Value::global(g.module, g.name);
  }
  if (key == kSetKey) return Value::set(list_of(key, inner));
  if (key == kTupleKey) return Value::tuple(list_of(key, inner));
  if (key == kComplexKey) {
    const auto& xs = list_of(key, inner, 2);
    return Value::complex(xs[0].as_float(), xs[1].as_float());
  }
  if (key == kBigIntKey) {
    std::string le;
    for (const Value& b : list_of(key, inner)) {
      if (!b.is(Value::Kind::Int) || b.as_int() < 0 || b.as_int() > 255)
        bad_marker(key, "expected bytes as numbers 0-255");
      le += static_cast<char>(b.as_int());
    }
    if (le.empty()) bad_marker(key, "no bytes");
    return Value::big_integer(std::move(le));
  }
  if (key == kFloatKey) {
    if (!inner.is(Value::Kind::Str)) bad_marker(key, "expected a string");
    const std::string& s = inner.as_str();
    if (s == "nan") return Value::real(std::numeric_limits<double>::quiet_NaN());
    if (s == "inf") return Value::real(std::numeric_limits<double>::infinity());
    if (s == "-inf") return Value::real(-std::numeric_limits<double>::infinity());
    bad_marker(key, "expected nan, inf or -inf");
  }
  return std::nullopt;
}

// Decoded children first; nullopt when nothing under `v` changed.
std::optional<Value> decode(const Value& v) {
  if (v.is(Value::Kind::List)) {
    std::optional<Value> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::optional<Value> x = decode(v.items()[i]);
      if (x && !out) {
        out = Value::list();
        for (std::size_t j = 0; j < i; ++j) out->append(v.items()[j]);
      }
      if (out) out->append(x ? std::move(*x) : v.items()[i]);
    }
    return out;
  }
  if (!v.is(Value::Kind::Dict)) return std::nullopt;
  std::optional<Value> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto& [k, x] = v.pairs()[i];
    std::optional<Value> y = decode(x);
    if (y && !out) {
      out = Value::dict();
      for (std::size_t j = 0; j < i; ++j) out->insert(v.pairs()[j].first, v.pairs()[j].second);
    }
    if (out) out->insert(k, y ? std::move(*y) : x);
  }
  if (std::optional<Value> m = unmark(out ? *out : v)) return m;
  return out;
}

}  // namespace

Value from_record_tree(const Value& tree) {
  std::optional<Value> v = decode(tree);
  return v ? std::move(*v) : tree;
}

Value envelope(std::string_view format, const RecordMetadata& m, Value record) {
  Value extra = Value::dict();
  for (const auto& [k, v] : m.extra) extra.insert(Value::str(k), Value::str(v));
  Value top = Value::dict();
  top.insert(Value::str("format"), Value::str(std::string(format)));
  top.insert(Value::str("version"), Value::integer(kRecordFormatVersion));
  top.insert(Value::str("library"), Value::str(m.library));
  top.insert(Value::str("precision"), Value::str(m.precision));
  top.insert(Value::str("type"), Value::str(m.type));
  top.insert(Value::str("metadata"), extra);
  top.insert(Value::str("record"), std::move(record));
  return top;
}

ParsedRecord open_envelope(const Value& top, std::string_view expected, const std::string& where) {
  auto str = [&](const char* key) -> std::string {
    const Value* v = top.find(key);
    if (v == nullptr) return {};
    if (!v->is(Value::Kind::Str))
      throw Error(ErrorCode::corrupt,
                  std::string("record field '") + key + "' is a " + std::string(v->kind_name()),
                  key, std::nullopt, where);
    return v->as_str();
  };
  if (!top.is(Value::Kind::Dict))
    throw Error(ErrorCode::corrupt,
                "a record file holds a " + std::string(top.kind_name()) + ", not a dict", {},
                std::nullopt, where);
  ParsedRecord r;
  r.format = str("format");
  if (r.format != expected)
    throw Error(
        ErrorCode::not_a_checkpoint,
        "the file says its format is '" + r.format + "', expected '" + std::string(expected) + "'",
        {}, std::nullopt, where);
  const Value* version = top.find("version");
  if (version == nullptr || !version->is(Value::Kind::Int))
    throw Error(ErrorCode::corrupt, "record without a format version", "version", std::nullopt,
                where);
  r.version = static_cast<int>(version->as_int());
  r.metadata.library = str("library");
  if (r.version > kRecordFormatVersion || r.version < 1)
    throw Error(ErrorCode::unsupported,
                "record format version " + std::to_string(r.version) + " (written by torchport " +
                    r.metadata.library + "); this library reads versions 1 to " +
                    std::to_string(kRecordFormatVersion) + ": upgrade torchport",
                "version", std::nullopt, where);
  r.metadata.precision = str("precision");
  r.metadata.type = str("type");
  if (const Value* extra = top.find("metadata"); extra && extra->is(Value::Kind::Dict))
    for (const auto& [k, v] : extra->pairs())
      if (k.is(Value::Kind::Str) && v.is(Value::Kind::Str))
        r.metadata.extra[k.as_str()] = v.as_str();
  const Value* record = top.find("record");
  if (record == nullptr)
    throw Error(ErrorCode::corrupt, "record file without a 'record' field", "record", std::nullopt,
                where);
  r.tree = *record;
  return r;
}

}  // namespace torchport::record_files
