// Value::repr: Python-like text within a character budget.

#include <cstdio>
#include <string>

#include "torchport/core/value.hpp"
#include "torchport/detail/utf8.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

namespace {

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
      case Value::Kind::Float: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", v.as_float());
        out += buf;
        break;
      }
      case Value::Kind::Complex: {
        auto [re, im] = v.as_complex();
        char buf[80];
        std::snprintf(buf, sizeof buf, "(%.17g%+.17gj)", re, im);
        out += buf;
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
