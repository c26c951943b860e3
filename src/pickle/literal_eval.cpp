// ast.literal_eval, as CPython 3.11 evaluates a source text (the Python of
// Debian 12 and of the current torch's environment): its tokenizer
// (Parser/tokenizer.c) and the part of its grammar literal_eval accepts
// (Lib/ast.py). numpy reads a .npy header with it (numpy/lib/format.py
// _read_array_header), so a scanner that reads headers any other way
// reads some files differently from numpy.
//
// The text is translated first as compile() translates a str: "\r\n" and
// "\r" become "\n". literal_eval strips leading spaces and tabs, then
// parses in eval mode:
//
//   - white space is ' ', '\t', '\f'; a '#' comment runs to the line's end;
//     a backslash before a newline joins the lines; inside brackets a
//     newline is white space, outside it ends the logical line;
//   - the first logical line that is not blank must not be indented (a
//     form feed resets the column); after the expression only newlines,
//     blank lines and comments may follow;
//   - strings: the prefixes r, u, b, br/rb (any case; f-strings are not
//     literals), single or triple quotes, escapes (\\ \' \" \a \b \f \n
//     \r \t \v, \ooo, \xhh, and in str \uXXXX \UXXXXXXXX; \N{...} is
//     refused as unsupported: resolving it needs Unicode's name table;
//     other escapes keep their backslash), bytes of ASCII only; adjacent
//     literals are concatenated (str with str, bytes with bytes);
//   - numbers: decimal (no leading zeros), 0x/0o/0b, floats, imaginary
//     ('j'), with single underscores between digits;
//   - literal_eval's values: str, bytes, int, float, complex, True, False,
//     None, tuples (with or without parentheses), lists, sets, `set()`,
//     dicts; a sign applies to a number only, and `a + bj` / `a - bj` only
//     to a real number and an imaginary one. Dict keys are strings or
//     bytes here: Python would also take numbers, merging keys it holds
//     equal (1 and True), which no caller needs, so such a dict is refused
//     as unsupported;
//   - brackets nest at most 200 deep (the tokenizer's MAXLEVEL).
//
// Python 2 headers: numpy's _filter_header drops a NAME token "L" that
// follows a NUMBER token (with only white space between) and rewrites the
// text through tokenize/untokenize, which `drop_long_suffix` follows: the
// suffix goes, and white space before the first token of the first line
// is no indent.

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "pickle/pytext.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/python_literal.hpp"
#include "torchport/detail/utf8.hpp"

namespace torchport::pickle::pytext {
namespace {

constexpr int kMaxLevel = 200;  // Parser/tokenizer.h MAXLEVEL

enum class Tok { end, newline, op, number, string, name };

struct Token {
  Tok kind = Tok::end;
  std::string text;  // op: the operator; number, name: the source; string: the value
  bool bytes = false;
  std::size_t at = 0;
};

bool ident_start(unsigned char c) {
  return c == '_' || std::isalpha(c) || c >= 0x80;
}
bool ident_char(unsigned char c) {
  return ident_start(c) || std::isdigit(c);
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string text, bool drop_long) : s_(std::move(text)), drop_long_(drop_long) {}

  [[noreturn]] void fail(const std::string& why, std::size_t at) const {
    throw Error(ErrorCode::corrupt,
                "not a Python literal: " + why + " (at character " + std::to_string(at) + ")");
  }

  // The next token. Brackets are counted here, as the tokenizer does, so
  // that a newline inside them is white space.
  Token next() {
    for (;;) {
      if (line_start_ && level_ == 0) {
        // Indentation of a logical line: only the first non-blank one is
        // read, and it must start at column 0.
        std::size_t col = 0, j = i_;
        for (; j < s_.size(); ++j) {
          const char c = s_[j];
          if (c == ' ')
            ++col;
          else if (c == '\t')
            col = (col / 8 + 1) * 8;
          else if (c == '\f')
            col = 0;
          else
            break;
        }
        // numpy's _filter_header rewrites the text through tokenize and
        // untokenize, which turns the white space before the first token
        // into spaces: literal_eval strips them when that token is on the
        // first line; on a later line any of it is an indent.
        if (drop_long_) col = first_line_ ? 0 : j - i_;
        i_ = j;
        line_start_ = false;
        const bool blank = i_ >= s_.size() || s_[i_] == '\n' || s_[i_] == '#' ||
                           (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n');
        if (!blank && col != 0) fail("unexpected indent", i_);
        if (blank) {
          skip_comment();
          if (i_ < s_.size() && s_[i_] == '\n') {
            ++i_;
            line_start_ = true;
            first_line_ = false;
            continue;
          }
        }
      }
      // White space, comments, joined lines.
      while (i_ < s_.size()) {
        const char c = s_[i_];
        if (c == ' ' || c == '\t' || c == '\f') {
          ++i_;
        } else if (c == '#') {
          skip_comment();
        } else if (c == '\\') {
          if (i_ + 1 >= s_.size()) fail("the text ends after a line continuation", i_);
          if (s_[i_ + 1] != '\n')
            fail("unexpected character after line continuation character", i_);
          i_ += 2;
        } else if (c == '\n' && level_ > 0) {
          ++i_;
        } else {
          break;
        }
      }
      Token t;
      t.at = i_;
      if (i_ >= s_.size()) {
        if (level_ > 0) fail("a bracket is not closed", i_);
        t.kind = Tok::end;
        return t;
      }
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '\n') {
        ++i_;
        line_start_ = true;
        first_line_ = false;
        t.kind = Tok::newline;
        return t;
      }
      if (c == '\0') fail("a null character", i_);
      if (std::isdigit(c) || (c == '.' && i_ + 1 < s_.size() &&
                              std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        t.kind = Tok::number;
        t.text = number();
        if (drop_long_) {
          // _filter_header: a NAME "L" right after a NUMBER is dropped.
          std::size_t j = i_;
          while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t' || s_[j] == '\f')) ++j;
          if (j < s_.size() && s_[j] == 'L' &&
              (j + 1 >= s_.size() || !ident_char(static_cast<unsigned char>(s_[j + 1]))))
            i_ = j + 1;
        }
        return t;
      }
      if (ident_start(c)) {
        std::size_t j = i_;
        while (j < s_.size() && ident_char(static_cast<unsigned char>(s_[j]))) ++j;
        const std::string word = s_.substr(i_, j - i_);
        if (j < s_.size() && (s_[j] == '\'' || s_[j] == '"') && word.size() <= 2) {
          std::string p = word;
          for (char& ch : p) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          if (p == "r" || p == "u" || p == "b" || p == "br" || p == "rb") {
            i_ = j;
            t.kind = Tok::string;
            string(p, t);
            return t;
          }
          if (p == "f" || p == "fr" || p == "rf") fail("an f-string is not a literal", i_);
        }
        i_ = j;
        t.kind = Tok::name;
        t.text = word;
        return t;
      }
      if (c == '\'' || c == '"') {
        t.kind = Tok::string;
        string("", t);
        return t;
      }
      t.kind = Tok::op;
      if (s_.compare(i_, 3, "...") == 0) {
        t.text = "...";
        i_ += 3;
        return t;
      }
      t.text = std::string(1, static_cast<char>(c));
      ++i_;
      if (c == '(' || c == '[' || c == '{') {
        if (++level_ > kMaxLevel) fail("too many nested parentheses", t.at);
      } else if (c == ')' || c == ']' || c == '}') {
        if (level_ == 0) fail(std::string("unmatched '") + static_cast<char>(c) + "'", t.at);
        --level_;
      }
      return t;
    }
  }

 private:
  void skip_comment() {
    if (i_ < s_.size() && s_[i_] == '#')
      while (i_ < s_.size() && s_[i_] != '\n') ++i_;
  }

  // digits with single underscores between them; true when any
  bool digits(bool (*is)(unsigned char)) {
    const std::size_t start = i_;
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (is(c)) {
        ++i_;
      } else if (c == '_' && i_ > start && i_ + 1 < s_.size() &&
                 is(static_cast<unsigned char>(s_[i_ + 1]))) {
        ++i_;
      } else {
        break;
      }
    }
    return i_ > start;
  }

  std::string number() {
    const std::size_t start = i_;
    const auto dec = [](unsigned char c) { return std::isdigit(c) != 0; };
    bool is_float = false;
    if (s_[i_] == '0' && i_ + 1 < s_.size() && std::strchr("xXoObB", s_[i_ + 1]) != nullptr &&
        s_[i_ + 1] != '\0') {
      const char kind = static_cast<char>(s_[i_ + 1] | 0x20);
      i_ += 2;
      if (i_ < s_.size() && s_[i_] == '_') ++i_;
      bool any = false;
      if (kind == 'x')
        any = digits([](unsigned char c) { return std::isxdigit(c) != 0; });
      else if (kind == 'o')
        any = digits([](unsigned char c) { return c >= '0' && c <= '7'; });
      else
        any = digits([](unsigned char c) { return c == '0' || c == '1'; });
      if (!any) fail("invalid number", start);
    } else {
      if (s_[i_] != '.') digits(dec);
      if (i_ < s_.size() && s_[i_] == '.') {
        is_float = true;
        ++i_;
        if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) digits(dec);
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        std::size_t j = i_ + 1;
        if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
        if (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) {
          i_ = j;
          digits(dec);
          is_float = true;
        } else {
          fail("invalid decimal literal", start);
        }
      }
      if (i_ < s_.size() && (s_[i_] == 'j' || s_[i_] == 'J')) {
        ++i_;
        is_float = true;
      }
      // "0777" is no int (leading zeros); "0777.5", "0777e1", "0777j" are.
      if (!is_float && s_[start] == '0') {
        for (std::size_t k = start; k < i_; ++k)
          if (s_[k] != '0' && s_[k] != '_')
            fail("leading zeros in decimal integer literals are not permitted", start);
      }
    }
    if (i_ < s_.size() && s_[i_] == '_') fail("invalid decimal literal", i_);
    if (i_ < s_.size() && ident_char(static_cast<unsigned char>(s_[i_])) && !drop_long_)
      fail("invalid decimal literal", i_);
    return s_.substr(start, i_ - start);
  }

  // A string literal at i_ (the quote) with its lower-case prefix.
  void string(const std::string& prefix, Token& t) {
    const bool raw = prefix.find('r') != std::string::npos;
    const bool bytes = prefix.find('b') != std::string::npos;
    const std::size_t start = i_;
    const char q = s_[i_];
    const bool triple = s_.compare(i_, 3, std::string(3, q)) == 0;
    i_ += triple ? 3 : 1;
    std::string body;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string literal", start);
      const char c = s_[i_];
      if (c == q && (!triple || s_.compare(i_, 3, std::string(3, q)) == 0)) {
        i_ += triple ? 3 : 1;
        break;
      }
      if (c == '\n' && !triple) fail("unterminated string literal", start);
      if (c == '\\' && i_ + 1 < s_.size()) {
        body += c;
        body += s_[i_ + 1];
        i_ += 2;
        continue;
      }
      body += c;
      ++i_;
    }
    t.bytes = bytes;
    if (bytes)
      for (char c : body)
        if (static_cast<unsigned char>(c) >= 0x80)
          fail("bytes can only contain ASCII literal characters", start);
    t.text = raw ? body : unescape(body, bytes, start);
  }

  std::string unescape(const std::string& b, bool bytes, std::size_t at) {
    std::string out;
    for (std::size_t k = 0; k < b.size(); ++k) {
      if (b[k] != '\\') {
        out += b[k];
        continue;
      }
      const char e = b[++k];  // a backslash is always followed by a character here
      if (const int c = simple_escape(e); c >= 0) {
        out += static_cast<char>(c);
        continue;
      }
      switch (e) {
        case '\n':  // a line continuation
          break;
        case 'x': {
          if (k + 2 >= b.size() + 0 || hex_digit(b[k + 1]) < 0 || hex_digit(b[k + 2]) < 0)
            fail("truncated \\xXX escape", at);
          const unsigned v = static_cast<unsigned>(hex_digit(b[k + 1]) * 16 + hex_digit(b[k + 2]));
          k += 2;
          if (bytes)
            out += static_cast<char>(v);
          else
            append_utf8(out, v);
          break;
        }
        case 'u':
        case 'U':
        case 'N':
          if (bytes) {  // not escapes in bytes: kept as written
            out += '\\';
            out += e;
            break;
          }
          if (e == 'N')
            throw Error(ErrorCode::unsupported,
                        "a \\N{...} escape (it needs Unicode's name table) at character " +
                            std::to_string(at));
          {
            const std::size_t n = e == 'u' ? 4 : 8;
            std::uint32_t v = 0;
            for (std::size_t d = 1; d <= n; ++d) {
              if (k + d >= b.size() || hex_digit(b[k + d]) < 0)
                fail(std::string("truncated \\") + e + " escape", at);
              v = v * 16 + static_cast<std::uint32_t>(hex_digit(b[k + d]));
            }
            k += n;
            if (v > 0x10FFFF) fail("illegal Unicode character", at);
            if (v >= 0xD800 && v <= 0xDFFF)
              throw Error(ErrorCode::unsupported,
                          "a lone surrogate escape, which UTF-8 cannot hold, at character " +
                              std::to_string(at));
            append_utf8(out, v);
          }
          break;
        default:
          if (e >= '0' && e <= '7') {
            unsigned v = static_cast<unsigned>(e - '0');
            for (int d = 0; d < 2 && k + 1 < b.size() && b[k + 1] >= '0' && b[k + 1] <= '7'; ++d)
              v = v * 8 + static_cast<unsigned>(b[++k] - '0');
            if (bytes) {
              if (v > 0xFF)
                throw Error(
                    ErrorCode::unsupported,
                    "an octal escape above \\377 in bytes at character " + std::to_string(at));
              out += static_cast<char>(v);
            } else {
              append_utf8(out, v);
            }
          } else {  // an unknown escape keeps its backslash
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }

  std::string s_;
  std::size_t i_ = 0;
  int level_ = 0;
  bool line_start_ = true;
  bool first_line_ = true;
  bool drop_long_;
};

// A number token's value: an int (any base), a float, or an imaginary
// number. A float literal too large is inf and one too small 0, as Python
// reads them.
Value number_value(const std::string& text, Lexer& lex, std::size_t at) {
  const bool prefixed =
      text.size() > 1 && text[0] == '0' && std::isalpha(static_cast<unsigned char>(text[1]));
  const bool imag = !prefixed && (text.back() == 'j' || text.back() == 'J');
  if (prefixed || (!imag && text.find_first_of(".eE") == std::string::npos))
    return parse_long(text, "number", true);
  std::string t;
  for (char c : text)
    if (c != '_') t += c;
  if (imag) t.pop_back();
  double d = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
  if (ec == std::errc::result_out_of_range)
    d = std::strtod(t.c_str(), nullptr);
  else if (ec != std::errc() || p != t.data() + t.size())
    lex.fail("invalid number '" + text.substr(0, 40) + "'", at);
  return imag ? Value::complex(0, d) : Value::real(d);
}

// A parsed expression and what literal_eval's rules need of its node: a
// number Constant, a sign applied to one, or anything else.
struct Node {
  enum class Shape { number, signed_number, other } shape = Shape::other;
  Value v;
};

class Parser {
 public:
  Parser(std::string text, bool drop_long) : lex_(std::move(text), drop_long) { advance(); }

  Value eval() {
    Value v = expressions();
    while (tok_.kind == Tok::newline) advance();
    if (tok_.kind != Tok::end) lex_.fail("more than one expression", tok_.at);
    return v;
  }

 private:
  void advance() { tok_ = lex_.next(); }
  bool is_op(const char* op) const { return tok_.kind == Tok::op && tok_.text == op; }
  void expect(const char* op) {
    if (!is_op(op)) lex_.fail(std::string("'") + op + "' expected", tok_.at);
    advance();
  }
  bool ends_expression() const {
    return tok_.kind == Tok::end || tok_.kind == Tok::newline || is_op(")") || is_op("]") ||
           is_op("}") || is_op(":") || is_op(",");
  }

  // expression (',' expression)* [','] -- a tuple when there is a comma
  Value expressions() { return tuple_or_one(expression()).v; }

  Node tuple_or_one(Node first) {
    if (!is_op(",")) return first;
    Value::Items items{std::move(first.v)};
    while (is_op(",")) {
      advance();
      if (ends_expression()) break;
      items.push_back(expression().v);
    }
    return {Node::Shape::other, Value::tuple(std::move(items))};
  }

  // literal_eval's BinOp rule: a real number (signed or not) plus or minus
  // an imaginary number Constant, nothing more.
  Node expression() {
    const std::size_t at = tok_.at;
    Node left = unary();
    if (!is_op("+") && !is_op("-")) return left;
    const bool minus = is_op("-");
    advance();
    Node right = unary();
    const bool real = left.shape != Node::Shape::other &&
                      (left.v.is(Value::Kind::Int) || left.v.is(Value::Kind::Float));
    if (is_op("+") || is_op("-") || !real || right.shape != Node::Shape::number ||
        !right.v.is(Value::Kind::Complex))
      lex_.fail("only a real number plus or minus an imaginary one is a literal", at);
    const double re =
        left.v.is(Value::Kind::Float) ? left.v.as_float() : static_cast<double>(left.v.as_int());
    const double im = right.v.as_complex().second;
    return {Node::Shape::other, Value::complex(re, minus ? -im : im)};
  }

  // A sign applies to a number Constant only (not to True, not twice).
  Node unary() {
    if (!is_op("+") && !is_op("-")) return atom();
    const bool minus = is_op("-");
    const std::size_t at = tok_.at;
    advance();
    if (is_op("+") || is_op("-")) lex_.fail("a sign applies only to a number", at);
    Node n = atom();
    if (n.shape != Node::Shape::number) lex_.fail("a sign applies only to a number", at);
    n.shape = Node::Shape::signed_number;
    if (!minus) return n;
    switch (n.v.kind()) {
      case Value::Kind::Int:
        if (n.v.as_int() == INT64_MIN) break;
        n.v = Value::integer(-n.v.as_int());
        return n;
      case Value::Kind::Float:
        n.v = Value::real(-n.v.as_float());
        return n;
      case Value::Kind::Complex:
        n.v = Value::complex(-n.v.as_complex().first, -n.v.as_complex().second);
        return n;
      default:
        break;
    }
    throw Error(ErrorCode::unsupported,
                "a negative integer wider than 64 bits at character " + std::to_string(at));
  }

  Node atom() {
    const Token t = tok_;
    switch (t.kind) {
      case Tok::number:
        advance();
        return {Node::Shape::number, number_value(t.text, lex_, t.at)};
      case Tok::string: {
        std::string value = t.text;
        const bool bytes = t.bytes;
        advance();
        while (tok_.kind == Tok::string) {  // implicit concatenation
          if (tok_.bytes != bytes) lex_.fail("cannot mix bytes and nonbytes literals", tok_.at);
          value += tok_.text;
          advance();
        }
        return {Node::Shape::other,
                bytes ? Value::bytes(std::move(value)) : Value::str(std::move(value))};
      }
      case Tok::name:
        advance();
        if (t.text == "True") return {Node::Shape::other, Value::boolean(true)};
        if (t.text == "False") return {Node::Shape::other, Value::boolean(false)};
        if (t.text == "None") return {};
        if (t.text == "set" && is_op("(")) {  // set(): the empty set
          advance();
          expect(")");
          return {Node::Shape::other, Value::set()};
        }
        lex_.fail("the name '" + t.text.substr(0, 40) + "' is not a literal", t.at);
      case Tok::op:
        if (t.text == "(") {  // parentheses vanish: "-(1)" signs a number
          advance();
          if (is_op(")")) {
            advance();
            return {Node::Shape::other, Value::tuple()};
          }
          Node inner = tuple_or_one(expression());
          expect(")");
          return inner;
        }
        if (t.text == "[") {
          advance();
          Value::Items items;
          while (!is_op("]")) {
            items.push_back(expression().v);
            if (!is_op(",")) break;
            advance();
          }
          expect("]");
          return {Node::Shape::other, Value::list(std::move(items))};
        }
        if (t.text == "{") return {Node::Shape::other, braces()};
        break;
      default:
        break;
    }
    lex_.fail(t.kind == Tok::end ? "the text ends early" : "not a literal", t.at);
  }

  Value braces() {
    advance();  // '{'
    if (is_op("}")) {
      advance();
      return Value::dict();
    }
    Value first = expression().v;
    if (is_op(":")) {
      Value::Pairs pairs;
      advance();
      pairs.emplace_back(std::move(first), expression().v);
      while (is_op(",")) {
        advance();
        if (is_op("}")) break;
        Value k = expression().v;
        expect(":");
        pairs.emplace_back(std::move(k), expression().v);
      }
      expect("}");
      for (const auto& [k, v] : pairs)
        if (!k.is(Value::Kind::Str) && !k.is(Value::Kind::Bytes))
          throw Error(ErrorCode::unsupported,
                      "a dict key that is not a string: " + k.repr(3) +
                          " (keys Python holds equal, such as 1 and True, are not merged here)");
      return Value::dict(std::move(pairs));  // a repeated key keeps its last value
    }
    Value::Items items{std::move(first)};
    while (is_op(",")) {
      advance();
      if (is_op("}")) break;
      items.push_back(expression().v);
    }
    expect("}");
    return Value::set(std::move(items));
  }

  Lexer lex_;
  Token tok_;
};

}  // namespace
}  // namespace torchport::pickle::pytext

namespace torchport::detail {

using pickle::pytext::Parser;

Value literal_eval(std::string_view text, bool drop_long_suffix) {
  // compile() of a str: "\r\n" and "\r" read as "\n"; literal_eval strips
  // leading spaces and tabs first.
  std::string s;
  s.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  for (; i < text.size(); ++i) {
    if (text[i] == '\r') {
      s += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      s += text[i];
    }
  }
  return Parser(std::move(s), drop_long_suffix).eval();
}

}  // namespace torchport::detail
