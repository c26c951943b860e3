// to_json: JSON text for a value tree, within a character budget, printing
// each large shared node once.

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "torchport/core/value.hpp"
#include "torchport/detail/utf8.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

namespace {

// JSON within a character budget; a container of more than kShareWeight
// values is printed once and referred to afterwards, so the output is linear
// in the tree's distinct nodes whatever its shared references expand to.
constexpr std::uint64_t kShareWeight = 16;
// A string longer than this is printed once too (a memoised string
// referenced a million times must not be printed a million times).
constexpr std::size_t kShareChars = 64;

struct Json {
  std::string out;
  int indent;
  JsonBudget budget;
  std::unordered_map<const void*, std::uint64_t> shared;
  bool truncated = false;

  bool full() noexcept {
    if (out.size() >= budget.max_chars) truncated = true;
    return truncated;
  }

  void newline(int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(level) * static_cast<std::size_t>(indent), ' ');
  }

  // A JSON string: escaped, invalid UTF-8 replaced by U+FFFD, cut past
  // max_string_bytes.
  void string(std::string_view s) {
    const std::size_t total = s.size();
    const bool cut = total > budget.max_string_bytes;
    if (cut) s = s.substr(0, detail::utf8_prefix(s, budget.max_string_bytes));
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        switch (c) {
          case '"':
            out += "\\\"";
            break;
          case '\\':
            out += "\\\\";
            break;
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          case '\b':
            out += "\\b";
            break;
          case '\f':
            out += "\\f";
            break;
          default:
            if (c < 0x20) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\u%04x", c);
              out += buf;
            } else {
              out += static_cast<char>(c);
            }
        }
        ++i;
        continue;
      }
      // A well-formed sequence (no overlong forms, surrogates or > U+10FFFF).
      std::size_t len = 0;
      std::uint32_t cp = 0;
      if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f;
      else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f;
      else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07;
      bool ok = len != 0 && i + len <= s.size();
      for (std::size_t j = 1; ok && j < len; ++j) {
        const auto d = static_cast<unsigned char>(s[i + j]);
        if ((d & 0xc0) != 0x80) ok = false;
        cp = (cp << 6) | (d & 0x3f);
      }
      if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
                 (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
        ok = false;
      if (ok) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += "\xef\xbf\xbd";
        ++i;
      }
    }
    if (cut) out += "... (" + std::to_string(total) + " bytes)";
    out += '"';
  }

  void number(double d) {
    if (!std::isfinite(d)) {
      string(std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
      return;
    }
    out += float_repr(d);  // as Python's json.dumps writes a float: its repr
  }

  // {"tag": <text>} on one line.
  void tagged(std::string_view tag, std::string_view text) {
    out += '{';
    string(tag);
    out += indent < 0 ? ":" : ": ";
    string(text);
    out += '}';
  }
  void tagged(std::string_view tag, std::uint64_t n) {
    out += '{';
    string(tag);
    out += indent < 0 ? ":" : ": ";
    out += std::to_string(n);
    out += '}';
  }

  void key(std::string_view k) {
    string(k);
    out += indent < 0 ? ":" : ": ";
  }

  // Opens an object or array member; false once the budget is spent (the
  // container is then closed with a marker).
  bool member(bool& first, int level, bool object) {
    if (full()) {
      if (!first) out += ',';
      newline(level + 1);
      if (object) {
        key("...");
        string("truncated");
      } else {
        string("... truncated");
      }
      first = false;
      return false;
    }
    if (!first) out += ',';
    first = false;
    newline(level + 1);
    return true;
  }
  void close(bool first, int level, char c) {
    if (!first) newline(level);
    out += c;
  }

  void items(const Value::Items& items, int level) {
    out += '[';
    bool first = true;
    for (const auto& i : items) {
      if (!member(first, level, false)) break;
      value(i, level + 1);
    }
    close(first, level, ']');
  }

  void value(const Value& v, int level) {
    detail::count(detail::work().values_printed);
    if ((v.is_container() && v.weight() > kShareWeight) ||
        (v.is(Value::Kind::Str) && v.as_str().size() > kShareChars)) {
      const auto [it, fresh] = shared.emplace(v.identity(), shared.size());
      if (!fresh) {
        tagged("shared", it->second);
        return;
      }
    }
    switch (v.kind()) {
      case Value::Kind::None:
        out += "null";
        break;
      case Value::Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        break;
      case Value::Kind::Int:
        out += std::to_string(v.as_int());
        break;
      case Value::Kind::BigInt:
        tagged("bigint_bytes", v.as_bytes().size());
        break;
      case Value::Kind::Float:
        number(v.as_float());
        break;
      case Value::Kind::Complex: {
        auto [re, im] = v.as_complex();
        out += '{';
        key("complex");
        out += '[';
        number(re);
        out += ',';
        number(im);
        out += "]}";
        break;
      }
      case Value::Kind::Str:
        string(v.as_str());
        break;
      case Value::Kind::Bytes:
        tagged("bytes", v.as_bytes().size());
        break;
      case Value::Kind::List:
      case Value::Kind::Tuple:
      case Value::Kind::Set:
        items(v.items(), level);
        break;
      case Value::Kind::Dict: {
        out += '{';
        bool first = true;
        for (const auto& [k, x] : v.pairs()) {
          if (!member(first, level, true)) break;
          key(k.is(Value::Kind::Str) ? k.as_str() : k.repr());
          value(x, level + 1);
        }
        close(first, level, '}');
        break;
      }
      case Value::Kind::Global:
        tagged("global", v.as_global().qualified());
        break;
      case Value::Kind::Object: {
        const auto& ob = v.as_object();
        out += '{';
        newline(level + 1);
        key("object");
        string(ob.cls.qualified());
        if (ob.args.size() > 0) {
          out += ',';
          newline(level + 1);
          key("args");
          value(ob.args, level + 1);
        }
        if (!ob.state.is_none()) {
          out += ',';
          newline(level + 1);
          key("state");
          value(ob.state, level + 1);
        }
        newline(level);
        out += '}';
        break;
      }
      case Value::Kind::Tensor:
        tagged("tensor", v.as_tensor().description());
        break;
    }
  }
};

}  // namespace

std::string to_json(const Value& v, int indent, const JsonBudget& budget) {
  Json j{{}, indent, budget, {}};
  j.value(v, 0);
  detail::count(detail::work().chars_printed, j.out.size());
  return j.out;
}

}  // namespace torchport
