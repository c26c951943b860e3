#include <cstring>

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

void check_recordable(const Value& v, const std::string& path) {
  auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  switch (v.kind()) {
    case Value::Kind::Dict:
      for (const auto& [k, x] : v.pairs()) {
        if (!k.is(Value::Kind::Str))
          throw Error(ErrorCode::invalid_argument,
                      "a record's dict keys must be strings; this one is " + k.repr(), path);
        check_recordable(x, child(k.as_str()));
      }
      return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      std::size_t i = 0;
      for (const auto& x : v.items()) check_recordable(x, child(std::to_string(i++)));
      return;
    }
    case Value::Kind::None:
    case Value::Kind::Bool:
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::Str:
    case Value::Kind::Bytes:
    case Value::Kind::Tensor:
      return;
    default:
      throw Error(ErrorCode::invalid_argument,
                  "a record cannot hold a " + std::string(v.kind_name()) + " (" + v.repr(3) + ")",
                  path);
  }
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
