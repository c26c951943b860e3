// numpy's own files, as np.load reads them (numpy/lib/format.py):
//
//   .npy  "\x93NUMPY", major, minor, the header's length (2 bytes in version
//         1.0, 4 in 2.0 and 3.0), the header: a Python dict literal
//         {'descr': ..., 'fortran_order': bool, 'shape': (...)} (latin-1,
//         UTF-8 in 3.0), then the array's bytes in C (or Fortran) order. An
//         array whose dtype holds objects is a pickle of the array instead,
//         which np.load runs only with allow_pickle=True.
//   .npz  a zip of NAME.npy members (np.savez stores them, np.savez_compressed
//         deflates them); np.load names each array NAME.
//
// `descr` is what np.dtype() is given: a string ("<f4", "O", "f4,O"), a
// (descr, shape) tuple for a subarray, or a list of fields (name, descr[,
// shape]) for a structured dtype. Whether the data is a pickle is decided by
// the parsed descr, never by its text: a dtype holds objects when any of
// its fields, at any depth, is an object. A descr this reader cannot tell
// is refused (and a scan calls the file unscannable).

#include <algorithm>
#include <cstring>
#include <string>

#include "formats/read/readers.hpp"
#include "formats/read/torch_common.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/io/byte_reader.hpp"
#include "torchport/io/zip.hpp"

namespace torchport::formats {
namespace {

[[noreturn]] void corrupt(const std::string& what, const std::string& where,
                          std::optional<std::uint64_t> at = std::nullopt) {
  throw Error(ErrorCode::corrupt, ".npy " + what, {}, at, where);
}

// --- the header: a Python literal, as ast.literal_eval reads it ----------

class Literal {
 public:
  Literal(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Value parse() {
    Value v = value(0);
    space();
    if (i_ != s_.size()) fail("unexpected text after the header's dict");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    corrupt("header: " + why + " (at character " + std::to_string(i_) + ")", where_);
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Value value(int depth) {
    if (depth > 32) fail("nested too deep");
    space();
    if (i_ >= s_.size()) fail("the header ends early");
    const char c = s_[i_];
    if (c == '{') return dict(depth);
    if (c == '(' || c == '[') return sequence(depth, c == '(' ? ')' : ']');
    if (c == '\'' || c == '"') return str();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    for (const auto& [word, v] :
         {std::pair{"True", Value::boolean(true)}, std::pair{"False", Value::boolean(false)},
          std::pair{"None", Value()}})
      if (s_.substr(i_).starts_with(word)) {
        i_ += std::strlen(word);
        return v;
      }
    fail("not a literal");
  }
  Value dict(int depth) {
    ++i_;
    Value d = Value::dict();
    while (!eat('}')) {
      Value k = value(depth + 1);
      if (!eat(':')) fail("':' expected");
      d.insert(std::move(k), value(depth + 1));
      if (!eat(',')) {
        if (!eat('}')) fail("',' or '}' expected");
        break;
      }
    }
    return d;
  }
  Value sequence(int depth, char close) {
    ++i_;
    Value::Items items;
    bool comma = false;
    while (!eat(close)) {
      items.push_back(value(depth + 1));
      comma = eat(',');
      if (!comma) {
        if (!eat(close)) fail(std::string("',' or '") + close + "' expected");
        break;
      }
    }
    // "(3)" is the number 3, "(3,)" a tuple: Python's parentheses.
    if (close == ')' && items.size() == 1 && !comma) return items.front();
    return close == ')' ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  Value str() {
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) fail("a string ends in a backslash");
        c = s_[i_++];
        switch (c) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case '\\':
          case '\'':
          case '"':
            break;
          default:
            fail("an escape the reader does not read");
        }
      }
      out += c;
    }
    if (i_ >= s_.size()) fail("a string is not closed");
    ++i_;
    return Value::str(std::move(out));
  }
  Value number() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    std::int64_t v = 0;
    bool digits = false;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) fail("a number too large");
      v = v * 10 + (s_[i_++] - '0');
      digits = true;
    }
    if (!digits) fail("a number without digits");
    // numpy's _filter_header drops Python 2's long suffix (versions 1.0, 2.0).
    if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;
    return Value::integer(s_[start] == '-' ? -v : v);
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const std::string& where_;
};

// --- descr -----------------------------------------------------------------

// What a descr's elements are.
struct Element {
  enum class Kind { number, object, other } kind = Kind::other;
  DType dtype = DType::U8;
  bool big_endian = false;
};

// Elements named by a numpy type code or name (after the byte order).
std::optional<Element> element_of(std::string code, char order) {
  Element e;
  e.big_endian = order == '>';
  static const std::pair<const char*, DType> kNumbers[] = {
      {"b1", DType::BOOL},    {"?", DType::BOOL},         {"bool", DType::BOOL},
      {"i1", DType::I8},      {"b", DType::I8},           {"int8", DType::I8},
      {"i2", DType::I16},     {"h", DType::I16},          {"int16", DType::I16},
      {"i4", DType::I32},     {"i", DType::I32},          {"int32", DType::I32},
      {"i8", DType::I64},     {"q", DType::I64},          {"l", DType::I64},
      {"int64", DType::I64},  {"u1", DType::U8},          {"B", DType::U8},
      {"uint8", DType::U8},   {"u2", DType::U16},         {"H", DType::U16},
      {"uint16", DType::U16}, {"u4", DType::U32},         {"I", DType::U32},
      {"uint32", DType::U32}, {"u8", DType::U64},         {"Q", DType::U64},
      {"L", DType::U64},      {"uint64", DType::U64},     {"f2", DType::F16},
      {"e", DType::F16},      {"float16", DType::F16},    {"f4", DType::F32},
      {"f", DType::F32},      {"float32", DType::F32},    {"f8", DType::F64},
      {"d", DType::F64},      {"float64", DType::F64},    {"c8", DType::C64},
      {"F", DType::C64},      {"complex64", DType::C64},  {"c16", DType::C128},
      {"D", DType::C128},     {"complex128", DType::C128}};
  for (const auto& [name, dtype] : kNumbers)
    if (code == name) {
      e.kind = Element::Kind::number;
      e.dtype = dtype;
      return e;
    }
  // Objects: Python references, so the array is pickled.
  if (code == "O" || code == "O8" || code == "O4" || code == "object" || code == "object_" ||
      code == "object0") {
    e.kind = Element::Kind::object;
    return e;
  }
  // Raw bytes of other kinds: strings, bytes, void records, datetimes.
  const auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 9 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!code.empty() && std::strchr("SUVa", code[0]) != nullptr &&
      (code.size() == 1 || digits(std::string_view(code).substr(1))))
    return e;
  if ((code.starts_with("M8") || code.starts_with("m8")) &&
      (code.size() == 2 || (code[2] == '[' && code.back() == ']' && code.size() <= 12)))
    return e;
  return std::nullopt;
}

// Folds the elements of a structured or subarray dtype: objects anywhere
// make the whole an object dtype; several fields are no single number.
Element fold(const Element& a, const Element& b) {
  if (a.kind == Element::Kind::object || b.kind == Element::Kind::object)
    return {Element::Kind::object};
  return {Element::Kind::other};
}

Element descr_elements(const Value& d, const std::string& where, int depth) {
  if (depth > 16) corrupt("descr nested too deep", where);
  if (d.is(Value::Kind::Str)) {
    std::string s = d.as_str();
    // "f4,O": np.dtype reads a comma-separated string as fields.
    if (s.find(',') != std::string::npos) {
      Element out{Element::Kind::other};
      std::size_t start = 0;
      bool first = true;
      while (start <= s.size()) {
        const std::size_t comma = std::min(s.find(',', start), s.size());
        std::string field = s.substr(start, comma - start);
        while (!field.empty() && field.front() == ' ') field.erase(0, 1);
        while (!field.empty() && field.back() == ' ') field.pop_back();
        if (!field.empty()) {
          const Element e = descr_elements(Value::str(field), where, depth + 1);
          out = first ? Element{e.kind == Element::Kind::object ? Element::Kind::object
                                                                : Element::Kind::other}
                      : fold(out, e);
          first = false;
        }
        start = comma + 1;
      }
      return out;
    }
    // A shape before the type ("(2,3)f4", "3i4"): a subarray of it.
    bool sub = false;
    if (!s.empty() && s.front() == '(') {
      const auto close = s.find(')');
      if (close == std::string::npos) corrupt("descr '" + s + "' is not a dtype", where);
      s.erase(0, close + 1);
      sub = true;
    } else {
      std::size_t k = 0;
      while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
      if (k > 0 && k < s.size()) {
        s.erase(0, k);
        sub = true;
      }
    }
    char order = '=';
    if (!s.empty() && std::strchr("<>|=", s.front()) != nullptr) {
      order = s.front();
      s.erase(0, 1);
    }
    const auto e = element_of(s, order);
    if (!e)
      throw Error(ErrorCode::unsupported,
                  ".npy descr '" + d.as_str() +
                      "' is no dtype this reader can tell (so not whether it holds objects)",
                  {}, std::nullopt, where);
    if (sub)
      return {e->kind == Element::Kind::object ? Element::Kind::object : Element::Kind::other};
    return *e;
  }
  if (d.is(Value::Kind::Tuple)) {  // (descr, shape): a subarray
    if (d.size() != 2) corrupt("descr " + d.repr(3) + " is not a (dtype, shape) pair", where);
    const Element e = descr_elements(d.items()[0], where, depth + 1);
    return {e.kind == Element::Kind::object ? Element::Kind::object : Element::Kind::other};
  }
  if (d.is(Value::Kind::List)) {  // fields: (name, descr[, shape])
    Element out{Element::Kind::other};
    for (const Value& f : d.items()) {
      if (!(f.is(Value::Kind::Tuple) || f.is(Value::Kind::List)) || f.size() < 2 || f.size() > 3)
        corrupt("descr field " + f.repr(3) + " is not (name, dtype[, shape])", where);
      out = fold(out, descr_elements(f.items()[1], where, depth + 1));
    }
    return out;
  }
  corrupt("descr " + d.repr(3) + " is not a dtype descriptor", where);
}

struct Npy {
  Element element;
  Shape shape;
  bool fortran = false;
  std::uint64_t data = 0;  // offset of the data
  std::string descr;       // for messages
};

Npy npy_header(const Source& src, const OpenOptions& options) {
  const auto b = src.bytes();
  const std::string& where = src.name();
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    corrupt("magic is missing", where, 0);
  const unsigned major = static_cast<unsigned>(b[6]), minor = static_cast<unsigned>(b[7]);
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    throw Error(ErrorCode::unsupported,
                ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " (np.load reads 1.0, 2.0 and 3.0)",
                {}, 6, where);
  ByteReader r(b, where);
  r.skip(8, "magic");
  const std::uint64_t n = major == 1 ? r.u16("header length") : r.u32("header length");
  if (n > options.limits.max_header_bytes)
    throw Error(ErrorCode::limit_exceeded,
                ".npy header of " + std::to_string(n) + " bytes exceeds Limits::max_header_bytes",
                {}, 8, where);
  const std::string_view text = r.take_str(n, ".npy header");
  const Value h = Literal(text, where).parse();
  if (!h.is(Value::Kind::Dict) || h.size() != 3)
    corrupt("header is not a dict of three keys", where);
  const Value* descr = h.find("descr");
  const Value* fortran = h.find("fortran_order");
  const Value* shape = h.find("shape");
  if (!descr || !fortran || !shape)
    corrupt("header lacks 'descr', 'fortran_order' or 'shape'", where);
  if (!fortran->is(Value::Kind::Bool)) corrupt("fortran_order is not a bool", where);
  if (!shape->is(Value::Kind::Tuple)) corrupt("shape is not a tuple", where);
  Npy out;
  out.descr = descr->is(Value::Kind::Str) ? descr->as_str() : descr->repr(4);
  out.fortran = fortran->as_bool();
  for (const Value& d : shape->items()) {
    if (!d.is(Value::Kind::Int) || d.as_int() < 0) corrupt("shape " + shape->repr(8), where);
    out.shape.push_back(d.as_int());
  }
  out.element = descr_elements(*descr, where, 0);
  out.data = r.pos();
  return out;
}

// One .npy: a tensor, or (an array of objects) its pickle walked and kept inert.
Value read_npy(const Source& src, const OpenOptions& options, Walker& walker) {
  const Npy h = npy_header(src, options);
  const std::string& where = src.name();
  if (walker.lists_parts()) walker.part({PartRole::metadata, "header", 0, h.data, 0, {}});
  if (h.element.kind == Element::Kind::object) {
    // np.load(allow_pickle=True) runs pickle.load on the rest of the file.
    ByteReader r(src.bytes(), where);
    r.seek(h.data);
    Value v = run_pickle(walker, "npy:object-array", r, options);
    // np.load reads one pickle; a loader reading on reads what follows.
    if (walker.lists_parts() && !r.at_end()) {
      const std::uint64_t at = r.pos(), n = r.remaining();
      walker.part({PartRole::stream, "after the array's pickle", at, n, 0,
                   [src, at, n] { return src.slice(at, n, src.name()); }});
    }
    return v;
  }
  if (h.element.kind != Element::Kind::number)
    throw Error(ErrorCode::unsupported,
                ".npy array of dtype '" + h.descr + "' holds no numbers torchport reads", {},
                std::nullopt, where);
  const DType dtype = h.element.dtype;
  std::uint64_t numel = 1, nbytes = 0;
  for (const auto d : h.shape)
    if (!detail::mul_ok(numel, static_cast<std::uint64_t>(d), numel))
      corrupt("shape overflows", where);
  if (!detail::mul_ok(numel, dtype_size(dtype), nbytes)) corrupt("size overflows", where);
  if (nbytes > src.size() - h.data)
    throw Error(ErrorCode::truncated,
                ".npy data of " + std::to_string(nbytes) + " bytes runs past the end of the file",
                {}, h.data, where);
  if (walker.lists_parts()) walker.part({PartRole::tensor_data, "data", h.data, nbytes, 0, {}});
  auto storage = record_storage(src, h.data, nbytes, dtype, h.element.big_endian);
  Shape strides = contiguous_strides(h.shape);
  if (h.fortran) {  // column-major: the first dimension varies fastest
    std::int64_t s = 1;
    for (std::size_t i = 0; i < h.shape.size(); ++i) {
      strides[i] = s;
      s *= std::max<std::int64_t>(h.shape[i], 1);
    }
  }
  return Value::tensor(Tensor(dtype, h.shape, std::move(strides), 0, std::move(storage)));
}

}  // namespace

bool is_npz(const ZipArchive& zip) {
  if (zip.entries().empty()) return false;
  for (const ZipEntry& e : zip.entries())
    if (!e.name.ends_with(".npy")) return false;
  return true;
}

TensorCatalog read_npz(const ZipArchive& zip, const OpenOptions& options, Walker& walker) {
  Value root = Value::dict();
  for (const ZipEntry& e : zip.entries()) {
    const std::string name = e.name.substr(0, e.name.size() - 4);
    if (walker.lists_parts())
      walker.part({PartRole::read, e.name, e.data_offset, e.compressed_size, e.method, {}});
    walker.enter(e.name);
    try {
      root.insert(Value::str(name),
                  read_npy(Source::from_storage(zip.storage(e), zip.source().name() + ":" + e.name),
                           options, walker));
    } catch (...) {
      walker.leave();
      throw;
    }
    walker.leave();
  }
  return TensorCatalog::from_value("numpy", std::move(root), options.limits);
}

TensorCatalog read_numpy(const Source& source, const OpenOptions& options, Walker& walker) {
  if (looks_like_zip(source.bytes())) {
    const ZipArchive zip = ZipArchive::open(source, options.limits, ZipMethods::python);
    if (!is_npz(zip))
      throw Error(ErrorCode::not_a_checkpoint, "a zip archive whose members are not all .npy files",
                  {}, std::nullopt, source.name());
    return read_npz(zip, options, walker);
  }
  return TensorCatalog::from_value("numpy", read_npy(source, options, walker), options.limits);
}

}  // namespace torchport::formats
