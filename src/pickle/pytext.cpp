// Python's text and number codecs, as the pickle VM needs them: the
// integers and floats of protocol 0's text opcodes, the escapes of its
// STRING and UNICODE arguments, the bytes of LONG1/LONG4, and the Latin-1
// that `_codecs.encode(s, "latin1")` asks for. Each follows CPython's C
// unpickler (_pickle.c, which torch.load uses) and refuses what it refuses.

#include "pickle/pytext.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "torchport/core/error.hpp"

namespace torchport::pickle::pytext {
namespace {

unsigned digit_value(char c) {
  if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return static_cast<unsigned>((c | 0x20) - 'a' + 10);
  return 99;
}

// An integer of any size from its digits: int64 when it fits, else BigInt
// (in the fewest bytes, as LONG1 stores it).
Value integer_from_digits(bool negative, const std::string& digits, unsigned base,
                          const char* what) {
  {
    std::uint64_t acc = 0;
    bool fits = true;
    const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
    for (char c : digits) {
      const unsigned d = digit_value(c);
      if (acc > (limit - d) / base) {
        fits = false;
        break;
      }
      acc = acc * base + d;
    }
    if (fits)
      return Value::integer(negative ? static_cast<std::int64_t>(~acc + 1)
                                     : static_cast<std::int64_t>(acc));
  }
  // The conversion below is quadratic in the digits; Python itself refuses
  // to parse more than 4,300 (sys.int_info.default_max_str_digits) for the
  // same reason, and no checkpoint writes a number that long.
  constexpr std::size_t kMaxDigits = 4300;
  if (digits.size() > kMaxDigits)
    throw Error(ErrorCode::limit_exceeded,
                std::string(what) + " of " + std::to_string(digits.size()) + " digits: more than " +
                    std::to_string(kMaxDigits) + " digits, the most Python itself parses");
  // Magnitude in little-endian bytes, then two's complement.
  std::string mag(1, '\0');
  for (char d : digits) {
    unsigned carry = digit_value(d);
    for (char& byte : mag) {
      const unsigned x = static_cast<unsigned char>(byte) * base + carry;
      byte = static_cast<char>(x & 0xffu);
      carry = x >> 8;
    }
    if (carry) mag.push_back(static_cast<char>(carry));
  }
  mag.push_back('\0');  // room for the sign bit
  if (negative) {
    unsigned carry = 1;
    for (char& byte : mag) {
      const unsigned x = (~static_cast<unsigned char>(byte) & 0xffu) + carry;
      byte = static_cast<char>(x & 0xffu);
      carry = x >> 8;
    }
  }
  // Drop sign bytes the value does not need: the same number has one form,
  // whichever opcode wrote it (torch's magic number is a LONG in protocols
  // 0 and 1, a LONG1 of 10 bytes from protocol 2 on).
  while (mag.size() > 1) {
    const auto top = static_cast<unsigned char>(mag.back());
    const auto next = static_cast<unsigned char>(mag[mag.size() - 2]);
    if (!((top == 0x00 && !(next & 0x80u)) || (top == 0xff && (next & 0x80u)))) break;
    mag.pop_back();
  }
  return Value::big_integer(std::move(mag));
}

}  // namespace

// Integers of the text opcodes, as CPython's C unpickler (_pickle.c,
// which torch.load uses) reads them:
//   INT       strtol(line, base 0): C's octal and 0x forms, whitespace
//             before; a line of two characters that gives 0 or 1 is a
//             bool ("00", "01", "-0", " 1"). When strtol stops early or
//             overflows: PyLong_FromString(line, base 0).
//   LONG      one 'L' before the newline dropped, then
//             PyLong_FromString(line, base 0).
//   GET, PUT  PyLong_FromString(line, base 10).
// PyLong_FromString: ASCII whitespace around, a sign, with base 0 a
// 0x/0o/0b prefix (an underscore may follow it) and otherwise no leading
// zero unless the number is zero, digits with single underscores between.
Value parse_long(std::string_view line, const char* what, bool base0) {
  const std::string shown(line.substr(0, 40));
  constexpr std::string_view ws = " \t\n\r\v\f";
  std::string_view s = line;
  const auto b = s.find_first_not_of(ws);
  s = b == std::string_view::npos ? std::string_view{}
                                  : s.substr(b, s.find_last_not_of(ws) - b + 1);
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  unsigned base = 10;
  if (base0 && s.size() >= 2 && s[0] == '0' &&
      std::string_view("xXoObB").find(s[1]) != std::string_view::npos) {
    base = (s[1] | 0x20) == 'x' ? 16 : (s[1] | 0x20) == 'o' ? 8 : 2;
    s.remove_prefix(2);
    if (!s.empty() && s.front() == '_') s.remove_prefix(1);
  }
  std::string digits;
  bool ok = !s.empty() && s.front() != '_' && s.back() != '_';
  for (std::size_t i = 0; ok && i < s.size(); ++i) {
    if (digit_value(s[i]) < base)
      digits += s[i];
    else
      ok = s[i] == '_' && s[i + 1] != '_';
  }
  if (ok && base0 && base == 10 && digits.size() > 1 && digits.front() == '0')
    ok = digits.find_first_not_of('0') == std::string::npos;
  if (!ok) throw Error(ErrorCode::corrupt, std::string(what) + " '" + shown + "' is not a number");
  return integer_from_digits(negative, digits, base, what);
}

// INT's line: strtol first, as the C unpickler does.
Value parse_int(std::string_view line) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  std::size_t i = 0;
  while (i < line.size() && ws.find(line[i]) != std::string_view::npos) ++i;
  bool negative = false;
  if (i < line.size() && (line[i] == '+' || line[i] == '-')) negative = line[i++] == '-';
  unsigned base = 10;
  if (i + 2 < line.size() && line[i] == '0' && (line[i + 1] | 0x20) == 'x' &&
      digit_value(line[i + 2]) < 16) {
    base = 16;
    i += 2;
  } else if (i < line.size() && line[i] == '0') {
    base = 8;
  }
  const std::size_t start = i;
  const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  std::uint64_t acc = 0;
  bool overflow = false;
  for (; i < line.size() && digit_value(line[i]) < base; ++i) {
    const unsigned d = digit_value(line[i]);
    if (acc > (limit - d) / base)
      overflow = true;
    else
      acc = acc * base + d;
  }
  const std::size_t end = i > start ? i : 0;  // strtol's endptr: the start when nothing converts
  if (overflow || end != line.size()) return parse_long(line, "INT", true);
  const std::int64_t x =
      negative ? static_cast<std::int64_t>(~acc + 1) : static_cast<std::int64_t>(acc);
  if (line.size() == 2 && (x == 0 || x == 1)) return Value::boolean(x == 1);
  return Value::integer(x);
}

std::int64_t parse_decimal(std::string_view s, const char* what) {
  const Value v = parse_long(s, what, false);
  if (!v.is(Value::Kind::Int))
    throw Error(ErrorCode::unsupported, std::string(what) + " '" + std::string(s.substr(0, 40)) +
                                            "' does not fit in 64 bits");
  return v.as_int();
}

// FLOAT's line as the C unpickler reads it (PyOS_string_to_double, the
// whole line): a sign, digits, "inf", "infinity", "nan", no whitespace
// and no underscores; a value too small for a double is 0 (or
// subnormal), one too large is an error (OverflowError in Python).
double parse_float(std::string_view line) {
  const std::string shown(line.substr(0, 40));
  std::string_view s = line;
  const bool plus = !s.empty() && s.front() == '+';
  if (plus) s.remove_prefix(1);
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  const bool range = ec == std::errc::result_out_of_range;
  if ((ec != std::errc() && !range) || p != s.data() + s.size() || s.empty() ||
      (plus && s.front() == '-') || s.find('(') != std::string_view::npos)
    throw Error(ErrorCode::corrupt, "FLOAT '" + shown + "' is not a number");
  if (range) {
    // from_chars says out of range for both ends; strtod tells which.
    const std::string text(line);
    d = std::strtod(text.c_str(), nullptr);
    if (std::isinf(d))
      throw Error(ErrorCode::corrupt, "FLOAT '" + shown + "' is too large for a double");
  }
  return d;
}

// Latin-1 encoding of a UTF-8 string: what Python 3 pickles of Python 2
// bytes ask for with _codecs.encode(s, "latin1").
bool utf8_to_latin1(const std::string& in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if ((c & 0xe0) == 0xc0 && i + 1 < in.size()) {
      const unsigned cp = ((c & 0x1fu) << 6) | (static_cast<unsigned char>(in[i + 1]) & 0x3fu);
      if (cp > 0xff) return false;
      out += static_cast<char>(cp);
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

Value long_from_bytes(std::span<const std::byte> b) {
  // Sign bytes the value does not need go (Python's decode_long reads the
  // same number from either form; BigInt has one form per number).
  while (b.size() > 1) {
    const auto top = static_cast<std::uint8_t>(b.back());
    const auto next = static_cast<std::uint8_t>(b[b.size() - 2]);
    if (!((top == 0x00 && !(next & 0x80u)) || (top == 0xff && (next & 0x80u)))) break;
    b = b.first(b.size() - 1);
  }
  if (b.empty()) return Value::integer(0);
  if (b.size() <= 8) {
    std::uint64_t u = 0;
    std::memcpy(&u, b.data(), b.size());
    if (b.size() < 8 && (static_cast<std::uint8_t>(b.back()) & 0x80u))
      u |= ~std::uint64_t{0} << (8 * b.size());  // sign-extend
    return Value::integer(static_cast<std::int64_t>(u));
  }
  return Value::big_integer(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
}

// Decodes protocol 0's STRING argument as pickle.py does: a quoted Python 2
// literal whose escapes codecs.escape_decode resolves (\\ \' \" \a \b \f \n
// \r \t \v, one to three octal digits, \x and two hex digits; any other
// backslash stays as it is). False for what escape_decode refuses.
int simple_escape(char e) noexcept {
  switch (e) {
    case '\\':
    case '\'':
    case '"':
      return e;
    case 'a':
      return '\a';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'v':
      return '\v';
    default:
      return -1;
  }
}

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unescape_repr(std::string_view s, std::string& out) {
  if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front())
    return false;
  s = s.substr(1, s.size() - 2);
  out.clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i >= s.size()) return false;  // "Trailing \ in string"
    if (const int c = simple_escape(s[i]); c >= 0) {
      out += static_cast<char>(c);
      continue;
    }
    switch (s[i]) {
      case 'x': {
        if (i + 2 >= s.size()) return false;
        const int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
        if (hi < 0 || lo < 0) return false;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        break;
      }
      default:
        if (s[i] >= '0' && s[i] <= '7') {
          unsigned v = static_cast<unsigned>(s[i] - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<unsigned>(s[++i] - '0');
          out += static_cast<char>(v & 0xffu);
        } else {
          out += '\\';  // not an escape: kept
          out += s[i];
        }
    }
  }
  return true;
}

// Decodes protocol 0's UNICODE argument (raw-unicode-escape, as CPython
// decodes it) to UTF-8: bytes are Latin-1 code points; \uXXXX and
// \UXXXXXXXX are escapes only after an odd number of backslashes. False for
// a truncated escape, a code point past U+10FFFF, or a lone surrogate
// (which Python keeps in a str but UTF-8 cannot hold).
bool raw_unicode_to_utf8(std::string_view s, std::string& out, bool* surrogate) {
  out.clear();
  auto put = [&](std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  };
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] != '\\') {
      put(static_cast<unsigned char>(s[i++]));  // latin-1
      continue;
    }
    std::size_t run = 0;
    while (i < s.size() && s[i] == '\\') {
      ++run;
      ++i;
    }
    if (run % 2 == 0 || i >= s.size() || (s[i] != 'u' && s[i] != 'U')) {
      out.append(run, '\\');
      continue;
    }
    out.append(run - 1, '\\');
    const std::size_t n = s[i] == 'u' ? 4 : 8;
    if (i + 1 + n > s.size()) return false;
    std::uint32_t cp = 0;
    auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 1 + n, cp, 16);
    if (ec != std::errc() || p != s.data() + i + 1 + n || s[i + 1] == '+' || s[i + 1] == '-')
      return false;
    if (cp >= 0xd800 && cp <= 0xdfff && surrogate != nullptr) *surrogate = true;
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    put(cp);
    i += 1 + n;
  }
  return true;
}

namespace {

// A float at the front of `s` as Python reads one (a sign, digits or
// inf/nan), advancing `s`; false when none is there.
bool leading_float(std::string_view& s, double& out) {
  std::string_view t = s;
  bool negative = false;
  if (!t.empty() && (t.front() == '+' || t.front() == '-')) {
    negative = t.front() == '-';
    t.remove_prefix(1);
  }
  if (t.empty() || t.front() == '+' || t.front() == '-') return false;
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() && ec != std::errc::result_out_of_range) return false;
  if (ec == std::errc::result_out_of_range)
    v = std::strtod(std::string(t.data(), p).c_str(), nullptr);
  out = negative ? -v : v;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}

}  // namespace

bool parse_complex(std::string_view s, double& re, double& im) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const auto trim = [&](std::string_view& t) {
    while (!t.empty() && ws.find(t.front()) != std::string_view::npos) t.remove_prefix(1);
    while (!t.empty() && ws.find(t.back()) != std::string_view::npos) t.remove_suffix(1);
  };
  trim(s);
  if (!s.empty() && s.front() == '(') {
    if (s.back() != ')') return false;
    s = s.substr(1, s.size() - 2);
    trim(s);
  }
  if (s.empty()) return false;
  re = 0;
  im = 0;
  const auto is_j = [](char c) { return c == 'j' || c == 'J'; };
  double x = 0;
  std::string_view rest = s;
  if (leading_float(rest, x)) {
    if (rest.empty()) {  // "1.5": real only
      re = x;
      return true;
    }
    if (is_j(rest.front()) && rest.size() == 1) {  // "2j": imaginary only
      im = x;
      return true;
    }
    if (rest.front() != '+' && rest.front() != '-') return false;
    re = x;  // "1+2j", "1-j"
  }
  // What is left is the imaginary part: "+2j", "-j", "j".
  if (rest.size() >= 1 && is_j(rest.back())) {
    std::string_view imag = rest.substr(0, rest.size() - 1);
    if (imag.empty() || imag == "+" || imag == "-") {
      im = imag == "-" ? -1.0 : 1.0;
      return true;
    }
    double y = 0;
    if (!leading_float(imag, y) || !imag.empty()) return false;
    im = y;
    return true;
  }
  return false;
}

}  // namespace torchport::pickle::pytext
