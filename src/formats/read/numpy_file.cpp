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
#include "formats/read/registry.hpp"
#include "formats/read/torch_common.hpp"
#include "io/byte_reader.hpp"
#include "io/zip.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"
#include "torchport/detail/utf8.hpp"

#include "torchport/detail/python_literal.hpp"

namespace torchport::formats {
namespace {

[[noreturn]] void corrupt(const std::string& what, const std::string& where,
                          std::optional<std::uint64_t> at = std::nullopt) {
  throw Error(ErrorCode::corrupt, ".npy " + what, {}, at, where);
}

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

// Python's str.isspace() for one code point: what `\s` matches in a str
// regular expression (numpy's _commastring splits with it).
bool py_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// The code point of the UTF-8 sequence at s[i] and its length.
std::pair<std::uint32_t, std::size_t> code_point(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const std::size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  std::uint32_t c = n == 1 ? b : b & (0x7F >> n);
  for (std::size_t k = 1; k < n && i + k < s.size(); ++k)
    c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {c, n};
}

// `\s*` at i: its end.
std::size_t py_spaces(std::string_view s, std::size_t i) {
  while (i < s.size()) {
    const auto [c, n] = code_point(s, i);
    if (!py_space(c)) break;
    i += n;
  }
  return i;
}

Element descr_elements(const Value& d, const std::string& where, int depth);

[[noreturn]] void not_a_dtype(const std::string& descr, const std::string& where,
                              const std::string& why) {
  corrupt("descr '" + descr.substr(0, 80) + "' is not a dtype np.dtype() reads: " + why, where);
}

// A type string that is not a comma string ("<f4", "O", "float32",
// "M8[ns]"): its elements.
Element simple_elements(std::string s, const std::string& shown, const std::string& where) {
  char order = '=';
  if (!s.empty() && std::strchr("<>|=", s.front()) != nullptr) {
    order = s.front();
    s.erase(0, 1);
  }
  const auto e = element_of(s, order);
  if (!e)
    throw Error(ErrorCode::unsupported,
                ".npy descr '" + shown.substr(0, 80) +
                    "' is no dtype this reader can tell (so not whether it holds objects)",
                {}, std::nullopt, where);
  return *e;
}

// np.dtype() of a str: a comma string when numpy's _check_for_commastring
// says so (digits first, "()" first, or a comma outside [...]), read by
// numpy's _commastring (numpy/_core/_internal.py: format_re, sep_re), else
// one type. "(2,)O" is a subarray of objects; "f4,O" two fields.
Element string_elements(const std::string& s, const std::string& where) {
  if (s.empty()) not_a_dtype(s, where, "it is empty");
  const auto order_char = [](char c) { return std::strchr("<>|=", c) != nullptr && c != '\0'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  bool comma = digit(s[0]) || (s.size() > 1 && order_char(s[0]) && digit(s[1])) ||
               (s.size() > 1 && s[0] == '(' && s[1] == ')') ||
               (s.size() > 3 && order_char(s[0]) && s[1] == '(' && s[2] == ')');
  for (std::size_t i = 0, sq = 0; !comma && i < s.size(); ++i) {
    if (s[i] == ',' && sq == 0) comma = true;
    if (s[i] == '[') ++sq;
    if (s[i] == ']' && sq > 0) --sq;
  }
  if (!comma) return simple_elements(s, s, where);
  Element out{Element::Kind::other};
  std::size_t i = 0, items = 0;
  bool objects = false, separated = false;
  while (i < s.size()) {
    // format_re: order1 [<>|=]?, repeats ' *[(]?[ ,0-9]*[)]? *', order2
    // [<>|=]?, dtype [A-Za-z0-9.?]*(\[[a-zA-Z0-9,.]+\])? -- each greedy.
    const std::size_t start = i;
    std::string order1, order2;
    if (i < s.size() && order_char(s[i])) order1 = s[i++];
    const std::size_t r0 = i;
    while (i < s.size() && s[i] == ' ') ++i;
    if (i < s.size() && s[i] == '(') ++i;
    while (i < s.size() && (s[i] == ' ' || s[i] == ',' || digit(s[i]))) ++i;
    if (i < s.size() && s[i] == ')') ++i;
    while (i < s.size() && s[i] == ' ') ++i;
    const std::string repeats = s.substr(r0, i - r0);
    if (i < s.size() && order_char(s[i])) order2 = s[i++];
    const std::size_t d0 = i;
    while (i < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '?'))
      ++i;
    if (i < s.size() && s[i] == '[') {
      std::size_t j = i + 1;
      while (j < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == ',' || s[j] == '.'))
        ++j;
      if (j > i + 1 && j < s.size() && s[j] == ']') i = j + 1;
    }
    const std::string code = s.substr(d0, i - d0);
    ++items;
    // The separator, or white space to the end.
    if (i < s.size()) {
      const std::size_t sp = py_spaces(s, i);
      if (sp == s.size()) {
        i = sp;
      } else {
        const std::size_t c = py_spaces(s, i);
        if (c >= s.size() || s[c] != ',')
          not_a_dtype(s, where, "format number " + std::to_string(items) + " is not recognized");
        i = py_spaces(s, c + 1);
        separated = true;
      }
    }
    if (i == start) not_a_dtype(s, where, "format number " + std::to_string(items) + " is empty");
    const auto norm = [](const std::string& o) { return o == "=" ? std::string("<") : o; };
    if (!order1.empty() && !order2.empty() && norm(order1) != norm(order2))
      not_a_dtype(s, where, "inconsistent byte-order specification");
    if (code.empty())
      not_a_dtype(s, where, "format number " + std::to_string(items) + " names no type");
    const std::string typed = (order2.empty() ? order1 : order2) + code;
    Element e = simple_elements(typed, s, where);
    if (!repeats.empty()) {
      // (type, literal_eval(repeats)): a subarray, whose shape numpy checks.
      Value shape;
      try {
        shape = detail::literal_eval(repeats);
      } catch (const Error& err) {
        not_a_dtype(s, where, "its repeat count '" + repeats + "': " + err.message());
      }
      const bool ok_shape = shape.is(Value::Kind::Int) ||
                            (shape.is(Value::Kind::Tuple) &&
                             std::all_of(shape.items().begin(), shape.items().end(),
                                         [](const Value& v) { return v.is(Value::Kind::Int); }));
      if (!ok_shape) not_a_dtype(s, where, "its repeat count '" + repeats + "' is not a shape");
      e = {e.kind == Element::Kind::object ? Element::Kind::object : Element::Kind::other};
    }
    objects = objects || e.kind == Element::Kind::object;
    out = e;
  }
  // Several items are fields. One item with a separator ("f4,") is a
  // structured dtype of one field in numpy 2 (_commastring returns a list
  // then) and a plain array in numpy 1: no array of numbers either way.
  if (items > 1 || separated) return {objects ? Element::Kind::object : Element::Kind::other};
  return out;
}

// np.lib.format.descr_to_dtype(descr): a str is np.dtype(descr); a tuple
// is (descr[0], descr[1]), a subarray; anything else is iterated as fields,
// each unpacked as (name, descr) or (name, descr, shape) -- so a field may
// be any sequence of two or three items, a two-character str among them
// ("aO" is a field a of objects), and a dict or set of such is iterated
// too.
Element descr_elements(const Value& d, const std::string& where, int depth) {
  if (depth > 16) corrupt("descr nested too deep", where);
  if (d.is(Value::Kind::Str)) return string_elements(d.as_str(), where);
  if (d.is(Value::Kind::Tuple)) {  // (descr, shape), more items ignored
    if (d.size() < 2) corrupt("descr " + d.repr(3) + " is not a (dtype, shape) pair", where);
    const Element e = descr_elements(d.items()[0], where, depth + 1);
    const Value& shape = d.items()[1];
    const bool ok_shape = shape.is(Value::Kind::Int) || shape.is(Value::Kind::Tuple);
    if (!ok_shape)
      throw Error(ErrorCode::unsupported,
                  ".npy descr " + d.repr(3) + ": a (dtype, " + shape.repr(2) +
                      ") pair is no subarray this reader can tell",
                  {}, std::nullopt, where);
    return {e.kind == Element::Kind::object ? Element::Kind::object : Element::Kind::other};
  }
  std::vector<Value> fields;
  if (d.is(Value::Kind::List) || d.is(Value::Kind::Set)) {
    fields = d.items();
  } else if (d.is(Value::Kind::Dict)) {
    for (const auto& [k, v] : d.pairs()) fields.push_back(k);
  } else {
    corrupt("descr " + d.repr(3) + " is not a dtype descriptor", where);
  }
  Element out{Element::Kind::other};
  for (const Value& f : fields) {
    Value::Items parts;
    if (f.is(Value::Kind::Tuple) || f.is(Value::Kind::List)) {
      parts = f.items();
    } else if (f.is(Value::Kind::Str)) {  // unpacked character by character
      const std::string& t = f.as_str();
      for (std::size_t i = 0; i < t.size();) {
        const auto [c, n] = code_point(t, i);
        parts.push_back(Value::str(t.substr(i, n)));
        i += n;
        (void)c;
      }
    } else {
      corrupt("descr field " + f.repr(3) + " is not (name, dtype[, shape])", where);
    }
    if (parts.size() < 2 || parts.size() > 3)
      corrupt("descr field " + f.repr(3) + " is not (name, dtype[, shape])", where);
    out = fold(out, descr_elements(parts[1], where, depth + 1));
  }
  return out;
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
  const std::string_view raw = r.take_str(n, ".npy header");
  // Decoded as numpy decodes it: Latin-1 in versions 1.0 and 2.0, UTF-8 in 3.0.
  std::string text;
  if (major == 3) {
    if (!detail::is_utf8(raw)) corrupt("header is not UTF-8 (format version 3.0)", where, 10);
    text = raw;
  } else {
    for (const char c : raw) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x80) {
        text += c;
      } else {
        text += static_cast<char>(0xC0 | (u >> 6));
        text += static_cast<char>(0x80 | (u & 0x3F));
      }
    }
  }
  // ast.literal_eval, and for versions 1.0 and 2.0 once more without
  // Python 2's long suffixes when that fails (numpy's _filter_header).
  Value h;
  try {
    h = detail::literal_eval(text);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::corrupt || major == 3)
      throw Error(e.code(), ".npy header: " + e.message(), {}, std::nullopt, where);
    try {
      h = detail::literal_eval(text, true);
    } catch (const Error& e2) {
      throw Error(e2.code(), ".npy header: " + e2.message(), {}, std::nullopt, where);
    }
  }
  // numpy's checks: a dict of exactly these keys, a tuple of ints (a bool
  // is an int to Python), a bool.
  if (!h.is(Value::Kind::Dict)) corrupt("header is not a dict: " + h.repr(4), where);
  for (const auto& [k, v] : h.pairs())
    if (!k.is(Value::Kind::Str) ||
        (k.as_str() != "descr" && k.as_str() != "fortran_order" && k.as_str() != "shape"))
      corrupt("header has the key " + k.repr(2) + " (numpy wants descr, fortran_order, shape)",
              where);
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
    const std::int64_t x = d.is(Value::Kind::Bool)  ? d.as_bool()
                           : d.is(Value::Kind::Int) ? d.as_int()
                                                    : -1;
    if (x < 0) corrupt("shape " + shape->repr(8), where);
    out.shape.push_back(x);
  }
  out.element = descr_elements(*descr, where, 0);
  out.data = r.pos();
  return out;
}

// One .npy: a tensor, or (an array of objects) its pickle walked and kept inert.
// Where the data of an .npy starts, from its magic and header length alone
// (none when those are not there).
std::optional<std::uint64_t> npy_data_offset(const Source& src) {
  const auto b = src.bytes();
  if (b.size() < 12 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) return std::nullopt;
  const auto u = [&](std::size_t i) { return static_cast<std::uint64_t>(b[i]); };
  const std::uint64_t at = b[6] == std::byte{1}
                               ? 10 + (u(8) | u(9) << 8)
                               : 12 + (u(8) | u(9) << 8 | u(10) << 16 | u(11) << 24);
  if (at > b.size()) return std::nullopt;
  return at;
}

Value read_npy(const Source& given, const OpenOptions& options, Walker& walker) {
  // A file read by ranges (a remote one): its header is read, and an object
  // array's pickle (the rest of the file) whole; a number array's bytes
  // when used.
  const Source src = given.contiguous() ? given : [&] {
    std::uint64_t need = std::min<std::uint64_t>(given.size(), 12);
    const Source first = given.head(12);
    const auto b = first.bytes();
    if (b.size() >= 12 && std::memcmp(b.data(), "\x93NUMPY", 6) == 0) {
      const auto u = [&](std::size_t i) { return static_cast<std::uint64_t>(b[i]); };
      need = b[6] == std::byte{1} ? 10 + (u(8) | u(9) << 8)
                                  : 12 + (u(8) | u(9) << 8 | u(10) << 16 | u(11) << 24);
    }
    return given.head(std::min<std::uint64_t>(need, given.size()));
  }();
  Npy h;
  try {
    h = npy_header(src, options);
  } catch (const Error&) {
    // A header this reader refuses may still be one some numpy reads, and
    // numpy pickle.loads the data of an object array: a scan judges the
    // data by its content (as a pickle stream) rather than calling it clean.
    if (walker.lists_parts())
      if (const auto at = npy_data_offset(src)) {
        if (*at <= given.size()) {
          const std::uint64_t n = given.size() - *at;
          walker.part({PartRole::read, "array data (a pickle if the dtype holds objects)", *at, n,
                       0, [given, at = *at, n] { return given.fetch(at, n); }});
        }
      }
    throw;
  }
  const std::string& where = src.name();
  if (walker.lists_parts()) walker.part({PartRole::metadata, "header", 0, h.data, 0, {}});
  if (h.element.kind == Element::Kind::object) {
    // np.load(allow_pickle=True) runs pickle.load on the rest of the file.
    const Source whole = given.whole(options.limits.max_whole_read_bytes,
                                     "Limits::max_whole_read_bytes", "an .npy of objects");
    ByteReader r(whole.bytes(), where);
    r.seek(h.data);
    Value v = run_pickle(walker, "npy:object-array", r, options);
    // np.load reads one pickle; a loader reading on reads what follows.
    if (walker.lists_parts() && !r.at_end()) {
      const std::uint64_t at = r.pos(), n = r.remaining();
      walker.part({PartRole::stream, "after the array's pickle", at, n, 0,
                   [whole, at, n] { return whole.slice(at, n, whole.name()); }});
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
  if (nbytes > given.size() - h.data)
    throw Error(ErrorCode::truncated,
                ".npy data of " + std::to_string(nbytes) + " bytes runs past the end of the file",
                {}, h.data, where);
  if (walker.lists_parts()) walker.part({PartRole::tensor_data, "data", h.data, nbytes, 0, {}});
  auto storage = record_storage(given, h.data, nbytes, dtype, h.element.big_endian);
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
  return TensorCatalog::from_value(Format::numpy, std::move(root), options.limits);
}

TensorCatalog read_numpy(const Source& source, const OpenOptions& options, Walker& walker) {
  if (open_detail::reader(Format::pytorch_zip).sniff(source.head(4).bytes(), source.size())) {
    const ZipArchive zip = ZipArchive::open(source, options.limits, ZipMethods::python);
    if (open_detail::zip_kind(zip) != open_detail::ZipKind::npz)
      throw Error(ErrorCode::not_a_checkpoint, "a zip archive whose members are not all .npy files",
                  {}, std::nullopt, source.name());
    return read_npz(zip, options, walker);
  }
  return TensorCatalog::from_value(Format::numpy, read_npy(source, options, walker),
                                   options.limits);
}

}  // namespace torchport::formats
