// Value::repr: Python-like text within a character budget.

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "torchport/core/value.hpp"
#include "torchport/detail/utf8.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

// Python's float repr (float_repr_style 'short', PyOS_double_to_string
// with 'r'): the shortest digits that read back to the same double, fixed
// when the decimal point falls within 16 digits of them and no more than 4
// places before them (0.0001, 1000000000000000.0), else an exponent with a
// sign and at least two digits (1e-05, 1e+16).
std::string float_repr(double d, bool dot_zero) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));  // "-1.25e-07"
  const std::size_t e = sci.find('e');
  std::string digits;
  bool negative = false;
  for (const char c : sci.substr(0, e)) {
    if (c == '-') negative = true;
    if (c >= '0' && c <= '9') digits += c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int point = exponent + 1;  // digits before the decimal point
  std::string out = negative ? "-" : "";
  const int n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (point < n) {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." +
             digits.substr(static_cast<std::size_t>(point));
    } else {
      out += digits + std::string(static_cast<std::size_t>(point - n), '0');
      if (dot_zero) out += ".0";
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  const int shown = point - 1;
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", shown < 0 ? '-' : '+', shown < 0 ? -shown : shown);
  return out + exp;
}

namespace {

// Python's repr of a complex: "2j" when the real part is +0, else
// "(re+imj)", each part as a float's repr without ".0".
std::string python_complex(double re, double im) {
  std::string imag = float_repr(im, false);
  if (re == 0 && !std::signbit(re)) return imag + "j";
  if (imag.front() != '-') imag = "+" + imag;
  return "(" + float_repr(re, false) + imag + "j)";
}

// Python-like text within a character budget: every value visited adds at
// least one character, so the work is bounded by the budget however many
// times shared references would expand.
struct Repr {
  std::string out;
  std::size_t max_items;
  std::size_t max_chars;

  bool full() const noexcept { return out.size() >= max_chars; }

  void quote(std::string_view s) {
    const bool cut = s.size() > Value::kReprStringChars;
    if (cut) s = s.substr(0, Value::kReprStringChars);
    out += '\'';
    for (unsigned char c : s) {
      if (c == '\'' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    out += cut ? "...'" : "'";
  }

  void seq(const Value::Items& items, int depth) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += ", ";
      if (i == max_items) {
        out += "... " + std::to_string(items.size() - i) + " more";
        break;
      }
      if (full()) return;
      value(items[i], depth - 1);
    }
  }

  void value(const Value& v, int depth) {
    detail::count(detail::work().values_printed);
    if (depth <= 0 || full()) {
      out += "...";
      return;
    }
    switch (v.kind()) {
      case Value::Kind::None:
        out += "None";
        break;
      case Value::Kind::Bool:
        out += v.as_bool() ? "True" : "False";
        break;
      case Value::Kind::Int:
        out += std::to_string(v.as_int());
        break;
      case Value::Kind::BigInt:
        out += "<int of " + std::to_string(v.as_bytes().size()) + " bytes>";
        break;
      case Value::Kind::Float:
        out += float_repr(v.as_float(), true);
        break;
      case Value::Kind::Complex: {
        auto [re, im] = v.as_complex();
        out += python_complex(re, im);
        break;
      }
      case Value::Kind::Str:
        quote(v.as_str());
        break;
      case Value::Kind::Bytes:
        out += 'b';
        quote(v.as_bytes());
        break;
      case Value::Kind::List:
        out += '[';
        seq(v.items(), depth);
        out += ']';
        break;
      case Value::Kind::Tuple:
        out += '(';
        seq(v.items(), depth);
        if (v.items().size() == 1) out += ',';
        out += ')';
        break;
      case Value::Kind::Set:
        out += '{';
        seq(v.items(), depth);
        out += '}';
        break;
      case Value::Kind::Dict: {
        out += '{';
        const auto& p = v.pairs();
        for (std::size_t i = 0; i < p.size(); ++i) {
          if (i) out += ", ";
          if (i == max_items) {
            out += "... " + std::to_string(p.size() - i) + " more";
            break;
          }
          if (full()) break;
          value(p[i].first, depth - 1);
          out += ": ";
          value(p[i].second, depth - 1);
        }
        out += '}';
        break;
      }
      case Value::Kind::Global:
        out += v.as_global().qualified();
        break;
      case Value::Kind::Object: {
        const auto& o = v.as_object();
        out += o.cls.qualified() + "(";
        if (o.args.size() > 0) seq(o.args.items(), depth - 1);
        if (!o.state.is_none() && !full()) {
          if (o.args.size() > 0) out += ", ";
          out += "state=";
          value(o.state, depth - 1);
        }
        out += ')';
        break;
      }
      case Value::Kind::Tensor:
        out += "tensor(" + v.as_tensor().description() + ")";
        break;
    }
  }
};

}  // namespace

std::string Value::repr(std::size_t max_items, std::size_t max_chars) const {
  Repr r{{}, max_items, max_chars};
  r.value(*this, 64);
  if (r.out.size() > max_chars) {
    r.out.resize(detail::utf8_prefix(r.out, max_chars));
    r.out += "...";
  }
  detail::count(detail::work().chars_printed, r.out.size());
  return r.out;
}

}  // namespace torchport
