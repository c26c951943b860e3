// The pickle VM. Opcode semantics follow CPython's Lib/pickle.py (the
// reference unpickler) and torch/_weights_only_unpickler.py (which targets to
// allow); every deviation is a refusal, never a guess. The opcodes, their
// argument layouts and the decoder of arguments are in opcodes.hpp.

#include "torchport/pickle/unpickler.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "pickle/opcodes.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"

namespace torchport::pickle {
namespace {

using namespace ops;

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF), as Python's strict decoder requires; with `surrogates`,
// encoded surrogates pass (the "surrogatepass" error handler).
bool is_utf8(std::string_view s, bool surrogates = false) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1, cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2, cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3, cp = c & 0x07u;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0u) != 0x80u) return false;
      cp = (cp << 6) | (d & 0x3fu);
    }
    if ((n == 2 && (cp < 0x800 || (!surrogates && cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    i += n + 1;
  }
  return true;
}

class Machine {
 public:
  Machine(ByteReader& r, const Limits& limits, const PersistentLoad& persistent,
          const CallHook& hook, const BuildHook& build_hook, Stats& stats)
      : r_(r),
        limits_(limits),
        persistent_(persistent),
        hook_(hook),
        build_hook_(build_hook),
        stats_(stats) {}

  Value run();
  std::uint64_t op_offset() const noexcept { return op_offset_; }

 private:
  [[noreturn]] void fail(ErrorCode code, const std::string& message) const {
    throw Error(code, message, {}, op_offset_, r_.what());
  }
  [[noreturn]] void limit(const char* field, std::uint64_t value) const {
    fail(ErrorCode::limit_exceeded, std::string("exceeds Limits::") + field + " = " +
                                        std::to_string(value) +
                                        "; raise it if this file is trusted");
  }

  // --- the stack -----------------------------------------------------------
  // One stack for all marks (pickle.py keeps a list per mark): a mark is
  // the stack size when it was set, so marking allocates nothing and what
  // lies above the innermost mark is the stack opcodes see.
  void push(Value v) {
    if (++created_ > limits_.max_nodes) limit("max_nodes", limits_.max_nodes);
    push_existing(std::move(v));
  }
  void push_existing(Value v) {
    if (stack_.size() >= limits_.max_stack) limit("max_stack", limits_.max_stack);
    stack_.push_back(std::move(v));
  }
  bool segment_empty() const noexcept {
    return stack_.size() == (marks_.empty() ? 0 : marks_.back());
  }
  Value pop() {
    if (segment_empty())
      fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " on an empty stack");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (segment_empty())
      fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " on an empty stack");
    return stack_.back();
  }
  std::vector<Value> pop_mark() {
    if (marks_.empty()) fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " without a MARK");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(
        std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(mark)),
        std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  // Counts items put into containers (all containers of the pickle together).
  void count_items(std::size_t n) {
    items_ += n;
    if (items_ > limits_.max_container_items)
      limit("max_container_items", limits_.max_container_items);
  }
  // Checks the limits a container may cross when it grows (O(1): depth and
  // weight are kept by the container as it grows).
  void check_container(const Value& v) const {
    if (v.depth() > limits_.max_depth) limit("max_depth", limits_.max_depth);
    if (v.weight() > limits_.max_nodes) limit("max_nodes", limits_.max_nodes);
  }
  Value make_seq(Value::Kind kind, std::vector<Value> items) {
    count_items(items.size());
    Value v = kind == Value::Kind::Tuple ? Value::tuple(std::move(items))
              : kind == Value::Kind::Set ? Value::set(std::move(items))
                                         : Value::list(std::move(items));
    check_container(v);
    return v;
  }

  // --- reading -------------------------------------------------------------
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
  Value py_long(std::string_view line, const char* what, bool base0) {
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
    if (!ok) fail(ErrorCode::corrupt, std::string(what) + " '" + shown + "' is not a number");
    return integer_from_digits(negative, digits, base, what);
  }

  // INT's line: strtol first, as the C unpickler does.
  Value py_int(std::string_view line) {
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
    if (overflow || end != line.size()) return py_long(line, "INT", true);
    const std::int64_t x =
        negative ? static_cast<std::int64_t>(~acc + 1) : static_cast<std::int64_t>(acc);
    if (line.size() == 2 && (x == 0 || x == 1)) return Value::boolean(x == 1);
    return Value::integer(x);
  }

  std::int64_t parse_decimal(std::string_view s, const char* what) {
    const Value v = py_long(s, what, false);
    if (!v.is(Value::Kind::Int))
      fail(ErrorCode::unsupported,
           std::string(what) + " '" + std::string(s.substr(0, 40)) + "' does not fit in 64 bits");
    return v.as_int();
  }

  static unsigned digit_value(char c) {
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
      fail(ErrorCode::limit_exceeded, std::string(what) + " of " + std::to_string(digits.size()) +
                                          " digits: more than " + std::to_string(kMaxDigits) +
                                          " digits, the most Python itself parses");
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

  // FLOAT's line as the C unpickler reads it (PyOS_string_to_double, the
  // whole line): a sign, digits, "inf", "infinity", "nan", no whitespace
  // and no underscores; a value too small for a double is 0 (or
  // subnormal), one too large is an error (OverflowError in Python).
  double python_float(std::string_view line) {
    const std::string shown(line.substr(0, 40));
    std::string_view s = line;
    const bool plus = !s.empty() && s.front() == '+';
    if (plus) s.remove_prefix(1);
    double d = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    const bool range = ec == std::errc::result_out_of_range;
    if ((ec != std::errc() && !range) || p != s.data() + s.size() || s.empty() ||
        (plus && s.front() == '-') || s.find('(') != std::string_view::npos)
      fail(ErrorCode::corrupt, "FLOAT '" + shown + "' is not a number");
    if (range) {
      // from_chars says out of range for both ends; strtod tells which.
      const std::string text(line);
      d = std::strtod(text.c_str(), nullptr);
      if (std::isinf(d))
        fail(ErrorCode::corrupt, "FLOAT '" + shown + "' is too large for a double");
    }
    return d;
  }

  // A str (BINUNICODE and its short and long forms): UTF-8, decoded by
  // Python with "surrogatepass" (encoded surrogates pass, other bytes that
  // are not UTF-8 are an error). Checked before the copy: bytes of another
  // format tried as a pickle can make a length of megabytes, and seldom
  // make UTF-8.
  Value py3_str(std::string_view s, std::string_view what) {
    if (!is_utf8(s, true))
      fail(ErrorCode::corrupt, std::string(what) + " holds bytes that are not UTF-8");
    return Value::str(std::string(s));
  }

  // A Python 2 string (STRING, BINSTRING, SHORT_BINSTRING): torch.load
  // decodes them as UTF-8 (it passes encoding="utf-8" to the unpickler), so
  // bytes that are not UTF-8 make torch fail, and us.
  Value py2_str(std::string_view s, std::string_view what) {
    if (!is_utf8(s))
      fail(ErrorCode::corrupt,
           std::string(what) +
               " holds bytes that are not UTF-8 (torch.load decodes Python 2 strings as UTF-8)");
    return Value::str(std::string(s));
  }

  // --- memo ----------------------------------------------------------------
  // Which entries exist is kept for every index (MEMOIZE numbers entries by
  // their count, and max_memo bounds it), one bit each while picklers number
  // them 0, 1, 2, ...; an index far past the count so far (only a hand-made
  // pickle writes one) goes to a set, as does every later new index.
  //
  // Values are kept only for the indices the pickle reads, which
  // `scan_reads` lists before the pickle runs: torch memoizes every value
  // (8,003 entries for ResNet-152) but reads seven, so the argument tuples
  // of its calls are freed as soon as they are used instead of living to
  // the end. When the scan cannot finish, every value is kept.
  bool memo_mark(std::uint64_t index) {
    const std::uint64_t word = index / 64, bit = std::uint64_t{1} << (index % 64);
    if (word < memo_bits_.size() && (memo_bits_[word] & bit)) return false;
    if (word >= memo_bits_.size() && memo_sparse_.empty() && index <= 2 * memo_count_ + 1024)
      memo_bits_.resize(
          std::max<std::size_t>(static_cast<std::size_t>(word) + 1, 2 * memo_bits_.size()), 0);
    if (word < memo_bits_.size()) {
      if (memo_count_ >= limits_.max_memo) limit("max_memo", limits_.max_memo);
      memo_bits_[word] |= bit;
    } else {
      if (memo_sparse_.count(index)) return false;
      if (memo_count_ >= limits_.max_memo) limit("max_memo", limits_.max_memo);
      memo_sparse_.insert(index);
    }
    ++memo_count_;
    return true;
  }
  bool memo_has(std::uint64_t index) const {
    const std::uint64_t word = index / 64;
    if (word < memo_bits_.size()) return (memo_bits_[word] >> (index % 64)) & 1u;
    return memo_sparse_.count(index) != 0;
  }
  // The slot of a read index, or null for one the pickle never reads.
  Value* memo_slot(std::uint64_t index) {
    if (memo_all_) return &memo_any_[index];
    const auto it = std::lower_bound(reads_.begin(), reads_.end(), index);
    if (it == reads_.end() || *it != index) return nullptr;
    return &read_values_[static_cast<std::size_t>(it - reads_.begin())];
  }
  void memo_put(std::uint64_t index) {
    Value& v = top();
    memo_mark(index);
    if (Value* slot = memo_slot(index)) *slot = v;
  }
  void memo_get(std::uint64_t index) {
    Value* slot = memo_has(index) ? memo_slot(index) : nullptr;
    if (slot == nullptr)
      fail(ErrorCode::corrupt, "memo entry " + std::to_string(index) + " was never stored");
    push_existing(*slot);
  }
  bool scan_reads();

  // The opcodes the table marks refused, before their argument is read.
  [[noreturn]] void refuse() {
    if (op_ == NEXT_BUFFER || op_ == READONLY_BUFFER)
      fail(ErrorCode::unsupported, "out-of-band buffers (pickle protocol 5) are not read");
    ++stats_.extensions;  // EXT1, EXT2, EXT4
    fail(ErrorCode::unsupported,
         std::string(opcode_name(op_)) +
             " refers to the copyreg extension registry, which is not read");
  }

  // --- opcodes with semantics ---------------------------------------------
  void global(std::string module, std::string name);
  void note_use(const Value& v, bool build);
  void call(Value callable, Value args);
  void build();
  void persistent(Value pid);
  Value long_from_bytes(std::span<const std::byte> b);

  ByteReader& r_;
  const Limits& limits_;
  const PersistentLoad& persistent_;
  const CallHook& hook_;
  const BuildHook& build_hook_;
  Stats& stats_;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;        // stack sizes at each open MARK
  std::vector<std::uint64_t> memo_bits_;  // entries that exist, by index
  std::unordered_set<std::uint64_t, detail::SeededHash> memo_sparse_;  // ... past the bits
  std::uint64_t memo_count_ = 0;
  std::vector<std::uint64_t> reads_;  // indices the pickle reads, sorted
  std::vector<Value> read_values_;    // their values, in the same order
  bool memo_all_ = false;             // the scan failed: keep every value here
  std::unordered_map<std::uint64_t, Value, detail::SeededHash> memo_any_;
  std::unordered_map<std::string, std::size_t> global_index_;
  Value empty_tuple_;
  std::uint64_t created_ = 0;
  std::uint64_t items_ = 0;  // items put into containers, for Limits::max_container_items
  std::uint64_t op_offset_ = 0;
  std::uint8_t op_ = 0;
};

// True when `s` is valid UTF-8 (Python decodes GLOBAL and INST names as
// UTF-8, strictly, before it imports anything).
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80             ? 1
                          : (c & 0xe0) == 0xc0 ? 2
                          : (c & 0xf0) == 0xe0 ? 3
                          : (c & 0xf8) == 0xf0 ? 4
                                               : 0;
    if (n == 0 || (n == 2 && c < 0xc2) || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Python's Unpickler.find_class, as torch.load reaches it: torch's own
// rename first (UnpicklerWrapper: load_module_mapping), then, for protocols
// below 3, the _compat_pickle renames (fix_imports is on by default).
void Machine::global(std::string module, std::string name) {
  if (!valid_utf8(module) || !valid_utf8(name))
    fail(ErrorCode::corrupt,
         std::string(opcode_name(op_)) + " names a module or name that is not UTF-8");
  std::string written;
  if (module == "torch.tensor") module = "torch._tensor";  // torch's own load_module_mapping
  if (stats_.protocol < 3) {
    auto renamed = compat_rename(module, name);
    if (renamed.first != module || renamed.second != name) {
      written = module + "." + name;
      module = std::move(renamed.first);
      name = std::move(renamed.second);
    }
  }
  // Python's find_class resolves a dotted name attribute by attribute only
  // from protocol 4 on; below it looks the whole name up as one attribute
  // and fails (so does torch.load). From protocol 4 on, an allowed whole
  // ("torch" / "_utils._rebuild_tensor_v2": torch's weights_only loader
  // matches globals by their full path) is named by its module and name,
  // so that every reader knows it.
  const bool dotted = name.find('.') != std::string::npos;
  if (dotted && stats_.protocol >= 4 && classify_global(module, name) == GlobalClass::allowed) {
    const auto dot = name.rfind('.');
    module += "." + name.substr(0, dot);
    name.erase(0, dot + 1);
  }
  const std::string key = module + "." + name;
  auto [it, fresh] = global_index_.emplace(key, stats_.globals.size());
  if (fresh) {
    GlobalUse use;
    use.module = module;
    use.name = name;
    use.klass = classify_global(module, name);
    use.first_offset = op_offset_;
    use.written = std::move(written);
    use.opcode = op_;
    stats_.globals.push_back(std::move(use));
  }
  ++stats_.globals[it->second].count;
  // (A dangerous one is left to the global policy, which names it.)
  if (dotted && stats_.protocol < 4 && stats_.globals[it->second].klass != GlobalClass::dangerous)
    fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " '" + module + "' '" + name +
                                 "': a dotted name, which Python resolves only from pickle "
                                 "protocol 4 on (below it, loading fails)");
  push(Value::global(std::move(module), std::move(name)));
}

// Counts a call (or a BUILD) of `v` for the statistics: of a global, of an
// object made by calling one, or of something else.
void Machine::note_use(const Value& v, bool build) {
  const Global* g = v.is(Value::Kind::Global)   ? &v.as_global()
                    : v.is(Value::Kind::Object) ? &v.as_object().cls
                                                : nullptr;
  if (g == nullptr || (!build && !v.is(Value::Kind::Global))) {
    if (!build && stats_.other_calls++ == 0) stats_.first_other_call_offset = op_offset_;
    return;
  }
  const auto it = global_index_.find(g->module + "." + g->name);
  if (it == global_index_.end()) return;
  GlobalUse& use = stats_.globals[it->second];
  if (build) {
    ++(v.is(Value::Kind::Global) ? use.sets : use.builds);
  } else if (use.calls++ == 0) {
    use.first_call_offset = op_offset_;
    use.call_opcode = op_;
  }
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

void Machine::call(Value callable, Value args) {
  note_use(callable, false);
  if (!callable.is(Value::Kind::Global))
    fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " of a " +
                                 std::string(callable.kind_name()) + ", not of a global");
  if (!args.is(Value::Kind::Tuple))
    fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " with " +
                                 std::string(args.kind_name()) + " arguments, not a tuple");
  const Global& g = callable.as_global();
  const auto& a = args.items();
  // Pure data constructors: build the data, run nothing.
  if (g.is("collections", "OrderedDict")) {
    Value d = Value::dict();
    if (a.size() == 1 && (a[0].is(Value::Kind::List) || a[0].is(Value::Kind::Tuple))) {
      for (const auto& kv : a[0].items()) {
        if (!(kv.is(Value::Kind::List) || kv.is(Value::Kind::Tuple)) || kv.size() != 2)
          fail(ErrorCode::corrupt, "OrderedDict item is not a pair");
        d.insert(kv.items()[0], kv.items()[1]);
      }
    } else if (!a.empty()) {
      fail(ErrorCode::corrupt, "OrderedDict called with unexpected arguments " + args.repr(3));
    }
    check_container(d);
    push(std::move(d));
    return;
  }
  if (g.is("builtins", "set") || g.is("builtins", "frozenset")) {
    if (a.empty()) return push(Value::set());
    if (a.size() != 1 ||
        !(a[0].is(Value::Kind::List) || a[0].is(Value::Kind::Tuple) || a[0].is(Value::Kind::Set)))
      fail(ErrorCode::corrupt, "set called with unexpected arguments " + args.repr(3));
    return push(make_seq(Value::Kind::Set, a[0].items()));
  }
  if (g.is("builtins", "complex")) {
    double re = 0, im = 0;
    if (a.size() > 2) fail(ErrorCode::corrupt, "complex takes at most 2 arguments");
    if (!a.empty()) re = a[0].as_float();
    if (a.size() == 2) im = a[1].as_float();
    return push(Value::complex(re, im));
  }
  if (g.is("builtins", "bytearray") || g.is("_codecs", "encode")) {
    if (a.empty() && g.name == "bytearray") return push(Value::bytes(""));
    if (a.size() == 1 && a[0].is(Value::Kind::Bytes)) return push(Value::bytes(a[0].as_bytes()));
    if (a.size() == 2 && a[0].is(Value::Kind::Str) && a[1].is(Value::Kind::Str) &&
        (a[1].as_str() == "latin1" || a[1].as_str() == "latin-1")) {
      std::string out;
      if (!utf8_to_latin1(a[0].as_str(), out))
        fail(ErrorCode::corrupt, "latin1 encoding of a string with characters above U+00FF");
      return push(Value::bytes(std::move(out)));
    }
    fail(ErrorCode::unsupported, g.qualified() + " called with arguments " + args.repr(3));
  }
  if (g.is("torch", "Size")) {
    if (a.size() != 1 || !(a[0].is(Value::Kind::Tuple) || a[0].is(Value::Kind::List)))
      fail(ErrorCode::corrupt, "torch.Size called with arguments " + args.repr(3));
    return push(make_seq(Value::Kind::Tuple, a[0].items()));
  }
  if (classify_global(g.module, g.name) != GlobalClass::allowed) ++stats_.calls;
  if (hook_) {
    if (std::optional<Value> built = hook_(g, args, op_offset_)) {
      push(std::move(*built));
      return;
    }
  }
  Value obj = Value::object(g, std::move(args), op_offset_);
  check_container(obj);
  push(std::move(obj));
}

void Machine::build() {
  Value state = pop();
  Value& target = top();
  note_use(target, true);
  if (target.is(Value::Kind::Object)) {
    target.set_state(std::move(state));
    check_container(target);
  } else if (target.is(Value::Kind::Tensor)) {
    // A tensor the call hook built: Python would call its __setstate__,
    // which can re-view it (set_). The hook applies that or refuses; the
    // node is changed in place, so the memo and every handle see it.
    if (!build_hook_)
      fail(ErrorCode::unsupported, "BUILD on a tensor, in a pickle read without tensor semantics");
    target.set_tensor(build_hook_(target, state, op_offset_));
  } else if (target.is(Value::Kind::Dict)) {
    // An OrderedDict's instance attributes: torch stores `_metadata` (module
    // versions) this way. They hold no tensors that belong to the dict.
    if (!state.is(Value::Kind::Dict))
      fail(ErrorCode::corrupt, "BUILD of a dict with " + std::string(state.kind_name()) + " state");
  } else {
    fail(ErrorCode::corrupt, "BUILD on a " + std::string(target.kind_name()) +
                                 " (only objects and OrderedDicts can be built)");
  }
}

void Machine::persistent(Value pid) {
  ++stats_.persistent_ids;
  if (!persistent_)
    fail(ErrorCode::unsupported,
         "persistent id " + pid.repr(4) + " in a pickle that has no storages to refer to");
  Value v;
  try {
    v = persistent_(pid, op_offset_);
  } catch (const Error& e) {
    // Say where: the callback knows the record's offset, the VM the pickle's.
    throw Error(e.code(), e.message(), e.key(),
                e.offset() ? e.offset() : std::optional<std::uint64_t>(op_offset_),
                e.where().empty() ? r_.what() : e.where());
  }
  push(std::move(v));
}

Value Machine::long_from_bytes(std::span<const std::byte> b) {
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
bool unescape_repr(std::string_view s, std::string& out) {
  if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front())
    return false;
  s = s.substr(1, s.size() - 2);
  out.clear();
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i >= s.size()) return false;  // "Trailing \ in string"
    switch (s[i]) {
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x': {
        if (i + 2 >= s.size()) return false;
        const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
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
bool raw_unicode_to_utf8(std::string_view s, std::string& out) {
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
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    put(cp);
    i += 1 + n;
  }
  return true;
}

// Walks the opcodes from the reader's position to STOP, reading each
// argument as `run` does (read_operand) but building nothing, and lists
// the memo indices GET, BINGET and LONG_BINGET read. False when the walk
// cannot reach STOP (an unknown opcode, a truncated argument): `run` will
// report that, and keeps every memo value meanwhile.
bool Machine::scan_reads() {
  ByteReader r = r_;
  // Picklers read a few entries many times: small indices are collected in
  // a bitmap (grown to the largest seen), the rest listed.
  constexpr std::uint64_t kBitmapIndices = std::uint64_t{1} << 18;
  std::vector<std::uint64_t> bits;
  auto read = [&](std::uint64_t i) {
    if (i >= kBitmapIndices) return reads_.push_back(i);
    if (i / 64 >= bits.size()) bits.resize(static_cast<std::size_t>(i / 64) + 1, 0);
    bits[i / 64] |= std::uint64_t{1} << (i % 64);
  };
  try {
    for (;;) {
      const OpInfo* info = opcode_info(r.u8("opcode"));
      if (info == nullptr) return false;
      const Operand a = read_operand(r, *info);
      switch (info->code) {
        case STOP:
          for (std::size_t w = 0; w < bits.size(); ++w)
            for (std::uint64_t b = bits[w]; b != 0; b &= b - 1)
              reads_.push_back(w * 64 + static_cast<std::uint64_t>(__builtin_ctzll(b)));
          std::sort(reads_.begin(), reads_.end());
          reads_.erase(std::unique(reads_.begin(), reads_.end()), reads_.end());
          read_values_.resize(reads_.size());
          return true;
        case GET: {
          const std::int64_t i = parse_decimal(a.text, "GET index");
          if (i < 0) return false;
          read(static_cast<std::uint64_t>(i));
          break;
        }
        case BINGET:
        case LONG_BINGET:
          read(a.number);
          break;
        default:
          break;
      }
    }
  } catch (const Error&) {
    return false;
  }
}

Value Machine::run() {
  if (!scan_reads()) {
    memo_all_ = true;
    reads_.clear();
  }
  for (;;) {
    op_offset_ = r_.file_offset();
    op_ = r_.u8("opcode");
    ++stats_.opcodes[op_];
    const OpInfo* info = opcode_info(op_);
    if (info == nullptr) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op_);
      fail(ErrorCode::corrupt, std::string("unknown opcode ") + hex + "; not a pickle, or damaged");
    }
    if (info->refused) refuse();  // before its argument: what it names is not in the file
    const Operand arg = read_operand(r_, *info, limits_.max_string_bytes);
    switch (op_) {
      case PROTO: {
        const auto p = static_cast<int>(arg.number);
        if (p > 5)
          fail(ErrorCode::unsupported,
               "pickle protocol " + std::to_string(p) + " (0 to 5 are read)");
        stats_.protocol = p;
        break;
      }
      case FRAME: {
        const std::uint64_t n = arg.number;
        if (n > r_.remaining())
          fail(ErrorCode::truncated, "frame of " + std::to_string(n) + " bytes but only " +
                                         std::to_string(r_.remaining()) + " remain");
        break;  // frames only group opcodes; we read straight through
      }
      case STOP: {
        if (!marks_.empty()) fail(ErrorCode::corrupt, "STOP inside an open MARK");
        return pop();
      }
      // --- scalars ---
      case NONE:
        push(Value());
        break;
      case NEWTRUE:
        push(Value::boolean(true));
        break;
      case NEWFALSE:
        push(Value::boolean(false));
        break;
      case BININT:
        push(Value::integer(arg.signed_number));
        break;
      case BININT1:
      case BININT2:
        push(Value::integer(static_cast<std::int64_t>(arg.number)));
        break;
      case INT: {
        const std::string_view line = arg.text;
        if (line.empty())
          fail(ErrorCode::corrupt, "INT without digits");  // _pickle.c: bad_readline
        push(py_int(line));
        break;
      }
      case LONG: {
        std::string_view line = arg.text;
        if (line.empty()) fail(ErrorCode::corrupt, "LONG without digits");
        if (line.back() == 'L') line.remove_suffix(1);  // Python 2's suffix
        push(py_long(line, "LONG", true));
        break;
      }
      case LONG1:
      case LONG4:
        push(long_from_bytes(std::as_bytes(std::span(arg.text.data(), arg.text.size()))));
        break;
      case FLOAT:
        push(Value::real(python_float(arg.text)));
        break;
      case BINFLOAT:
        push(Value::real(arg.real));
        break;
      // --- strings and bytes ---
      case SHORT_BINUNICODE:
      case BINUNICODE:
      case BINUNICODE8:
        push(py3_str(arg.text, info->name));
        break;
      case SHORT_BINSTRING:
      case BINSTRING:
        push(py2_str(arg.text, info->name));
        break;
      case SHORT_BINBYTES:
      case BINBYTES:
      case BINBYTES8:
      case BYTEARRAY8:
        push(Value::bytes(std::string(arg.text)));
        break;
      case STRING: {
        std::string out;
        if (!unescape_repr(arg.text, out))
          fail(ErrorCode::corrupt, "STRING is not a quoted literal with valid escapes");
        push(py2_str(out, "STRING"));
        break;
      }
      case UNICODE: {
        std::string out;
        if (!raw_unicode_to_utf8(arg.text, out))
          fail(ErrorCode::corrupt,
               "UNICODE has a bad escape, or a lone surrogate UTF-8 cannot hold");
        push(Value::str(std::move(out)));
        break;
      }
      // --- containers ---
      case EMPTY_LIST:
        push(Value::list());
        break;
      case EMPTY_DICT:
        push(Value::dict());
        break;
      case EMPTY_TUPLE:
        // Immutable (only lists take APPEND), so one value serves them all.
        if (empty_tuple_.is_none()) empty_tuple_ = Value::tuple();
        push(empty_tuple_);
        break;
      case EMPTY_SET:
        push(Value::set());
        break;
      case MARK:
        if (++created_ > limits_.max_nodes) limit("max_nodes", limits_.max_nodes);
        if (marks_.size() >= limits_.max_stack) limit("max_stack", limits_.max_stack);
        marks_.push_back(stack_.size());
        break;
      case TUPLE:
        push(make_seq(Value::Kind::Tuple, pop_mark()));
        break;
      case LIST:
        push(make_seq(Value::Kind::List, pop_mark()));
        break;
      case FROZENSET:
        push(make_seq(Value::Kind::Set, pop_mark()));
        break;
      case TUPLE1: {
        Value a = pop();
        push(make_seq(Value::Kind::Tuple, {std::move(a)}));
        break;
      }
      case TUPLE2: {
        Value b = pop(), a = pop();
        push(make_seq(Value::Kind::Tuple, {std::move(a), std::move(b)}));
        break;
      }
      case TUPLE3: {
        Value c = pop(), b = pop(), a = pop();
        push(make_seq(Value::Kind::Tuple, {std::move(a), std::move(b), std::move(c)}));
        break;
      }
      case DICT: {
        auto items = pop_mark();
        if (items.size() % 2) fail(ErrorCode::corrupt, "DICT with an odd number of items");
        count_items(items.size() / 2);
        Value d = Value::dict();
        for (std::size_t i = 0; i < items.size(); i += 2)
          d.insert(std::move(items[i]), std::move(items[i + 1]));
        check_container(d);
        push(std::move(d));
        break;
      }
      case APPEND: {
        Value item = pop();
        Value& list = top();
        if (!list.is(Value::Kind::List))
          fail(ErrorCode::corrupt,
               "APPEND to a " + std::string(list.kind_name()) + " (only lists)");
        count_items(1);
        list.append(std::move(item));
        check_container(list);
        break;
      }
      case APPENDS: {
        auto items = pop_mark();
        Value& list = top();
        if (!list.is(Value::Kind::List))
          fail(ErrorCode::corrupt,
               "APPENDS to a " + std::string(list.kind_name()) + " (only lists)");
        count_items(items.size());
        list.reserve(list.size() + items.size());  // grows geometrically
        for (auto& i : items) list.append(std::move(i));
        check_container(list);
        break;
      }
      case ADDITEMS: {
        auto items = pop_mark();
        Value& set = top();
        if (!set.is(Value::Kind::Set))
          fail(ErrorCode::corrupt,
               "ADDITEMS to a " + std::string(set.kind_name()) + " (only sets)");
        count_items(items.size());
        for (auto& i : items) set.append(std::move(i));
        check_container(set);
        break;
      }
      case SETITEM: {
        Value v = pop(), k = pop();
        Value& d = top();
        if (!d.is(Value::Kind::Dict))
          fail(ErrorCode::corrupt, "SETITEM on a " + std::string(d.kind_name()) + " (only dicts)");
        count_items(1);
        d.insert(std::move(k), std::move(v));
        check_container(d);
        break;
      }
      case SETITEMS: {
        // Straight from the stack (picklers batch 1,000 pairs per SETITEMS).
        if (marks_.empty()) fail(ErrorCode::corrupt, "SETITEMS without a MARK");
        const std::size_t mark = marks_.back();
        marks_.pop_back();
        if ((stack_.size() - mark) % 2)
          fail(ErrorCode::corrupt, "SETITEMS with an odd number of items");
        if (mark == (marks_.empty() ? 0 : marks_.back()))
          fail(ErrorCode::corrupt, "SETITEMS on an empty stack");
        Value& d = stack_[mark - 1];
        if (!d.is(Value::Kind::Dict))
          fail(ErrorCode::corrupt, "SETITEMS on a " + std::string(d.kind_name()) + " (only dicts)");
        count_items((stack_.size() - mark) / 2);
        d.reserve(d.size() + (stack_.size() - mark) / 2);  // grows geometrically
        for (std::size_t i = mark; i < stack_.size(); i += 2)
          d.insert(std::move(stack_[i]), std::move(stack_[i + 1]));
        stack_.resize(mark);
        check_container(d);
        break;
      }
      // --- stack manipulation ---
      case POP:
        if (!segment_empty())
          pop();
        else
          pop_mark();
        break;
      case POP_MARK:
        pop_mark();
        break;
      case DUP:
        push_existing(top());
        break;
      // --- memo ---
      case PUT: {
        const std::int64_t i = parse_decimal(arg.text, "PUT index");
        if (i < 0) fail(ErrorCode::corrupt, "negative PUT index");
        memo_put(static_cast<std::uint64_t>(i));
        break;
      }
      case BINPUT:
      case LONG_BINPUT:
        memo_put(arg.number);
        break;
      case MEMOIZE:
        memo_put(memo_count_);
        break;
      case GET: {
        const std::int64_t i = parse_decimal(arg.text, "GET index");
        if (i < 0) fail(ErrorCode::corrupt, "negative GET index");
        memo_get(static_cast<std::uint64_t>(i));
        break;
      }
      case BINGET:
      case LONG_BINGET:
        memo_get(arg.number);
        break;
      // --- globals and objects ---
      case GLOBAL: {
        global(std::string(arg.text), std::string(arg.second));
        break;
      }
      case STACK_GLOBAL: {
        Value name = pop(), module = pop();
        if (!name.is(Value::Kind::Str) || !module.is(Value::Kind::Str))
          fail(ErrorCode::corrupt, "STACK_GLOBAL needs two strings");
        global(module.as_str(), name.as_str());
        break;
      }
      case REDUCE: {
        Value args = pop(), fn = pop();
        call(std::move(fn), std::move(args));
        break;
      }
      case NEWOBJ: {
        Value args = pop(), cls = pop();
        call(std::move(cls), std::move(args));
        break;
      }
      case NEWOBJ_EX: {
        Value kwargs = pop(), args = pop(), cls = pop();
        if (!kwargs.is(Value::Kind::Dict))
          fail(ErrorCode::corrupt, "NEWOBJ_EX keyword arguments are not a dict");
        // cls.__new__(cls, *args, **kwargs): keyword arguments would change
        // what is built, and inert objects have no place for them.
        if (kwargs.size() != 0)
          fail(ErrorCode::unsupported,
               "NEWOBJ_EX with keyword arguments " + kwargs.repr(3) + " (not read)");
        call(std::move(cls), std::move(args));
        break;
      }
      case INST: {
        std::string module(arg.text);
        std::string name(arg.second);
        // pickle.py decodes INST's names as ASCII (GLOBAL's as UTF-8).
        if (!is_ascii(module) || !is_ascii(name))
          fail(ErrorCode::corrupt, "INST names a non-ASCII class");
        auto args = pop_mark();
        global(std::move(module), std::move(name));
        Value cls = pop();
        call(std::move(cls), make_seq(Value::Kind::Tuple, std::move(args)));
        break;
      }
      case OBJ: {
        auto items = pop_mark();
        if (items.empty()) fail(ErrorCode::corrupt, "OBJ without a class");
        Value cls = std::move(items.front());
        items.erase(items.begin());
        call(std::move(cls), make_seq(Value::Kind::Tuple, std::move(items)));
        break;
      }
      case BUILD:
        build();
        break;
      case BINPERSID:
        persistent(pop());
        break;
      case PERSID: {
        const std::string_view pid = arg.text;
        if (!is_ascii(pid)) fail(ErrorCode::corrupt, "PERSID is not ASCII");
        persistent(Value::str(std::string(pid)));
        break;
      }
      default:  // the opcodes refused above
        break;
    }
  }
}

}  // namespace

Value unpickle(ByteReader& reader, const Limits& limits, const PersistentLoad& persistent,
               Stats* stats, const CallHook& hook, const BuildHook& build) {
  Stats local;
  Stats& s = stats ? *stats : local;
  Machine m(reader, limits, persistent, hook, build, s);
  try {
    return m.run();
  } catch (const Error& e) {
    // Errors of the values themselves (a container put inside itself) learn
    // where they happened here.
    if (e.offset()) throw;
    throw Error(e.code(), e.message(), e.key(), m.op_offset(),
                e.where().empty() ? reader.what() : e.where());
  }
}

}  // namespace torchport::pickle
