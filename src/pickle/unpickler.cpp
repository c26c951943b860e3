// The pickle VM. Opcode semantics follow CPython's Lib/pickle.py (the
// reference unpickler) and torch/_weights_only_unpickler.py (which targets to
// allow); every deviation is a refusal, never a guess. The opcodes, their
// argument layouts and the decoder of arguments are in opcodes.hpp.

#include "pickle/unpickler.hpp"

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

#include "pickle/names.hpp"
#include "pickle/opcodes.hpp"
#include "pickle/pytext.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/utf8.hpp"

namespace torchport::pickle {
namespace {

using namespace ops;
using detail::is_utf8;
using namespace pytext;

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

class Machine {
 public:
  Machine(ByteReader& r, const Limits& limits, const PersistentLoad& persistent,
          const CallHook& hook, const BuildHook& build_hook, Stats& stats,
          std::span<const std::string> profiles, const AfterBuildHook& after_build)
      : r_(r),
        limits_(limits),
        persistent_(persistent),
        hook_(hook),
        build_hook_(build_hook),
        after_build_(after_build),
        stats_(stats),
        profiles_(profiles) {}

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

  // Counts the items a data constructor copies from its argument (set(),
  // torch.Size of a list) against Limits::max_constructed_bytes, as the
  // bytes bytearray and _codecs.encode copy: one memo-shared container
  // given to a constructor many times would otherwise multiply memory.
  void count_copy(std::size_t items) {
    constructed_ += static_cast<std::uint64_t>(items) * sizeof(Value);
    if (constructed_ > limits_.max_constructed_bytes)
      limit("max_constructed_bytes", limits_.max_constructed_bytes);
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
  static constexpr std::uint64_t kMaxSparseMemo = 1u << 20;
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
      // Tens of bytes each, unlike a bit: bounded on their own.
      if (memo_sparse_.size() >= kMaxSparseMemo)
        fail(ErrorCode::limit_exceeded,
             "more than " + std::to_string(kMaxSparseMemo) +
                 " memo entries numbered out of order (only a hand-made pickle numbers them so; "
                 "Limits::max_memo bounds those numbered in order)");
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
  // How a container opcode on the wrong kind is refused: CPython calls the
  // target's own methods (append, extend, add, __setitem__), which an
  // object of any class may have, and a bytearray (bytes here) has append
  // and extend; refusing those is the VM's own limit, not the bytes' fault.
  static ErrorCode foreign(const Value& target, bool appends) {
    return target.is(Value::Kind::Object) || (appends && target.is(Value::Kind::Bytes))
               ? ErrorCode::unsupported
               : ErrorCode::corrupt;
  }
  // SETITEM on a list, as Python's list.__setitem__: an int index within
  // the list (negative from the end), else the error Python raises.
  void set_list_item(Value& list, const Value& key, Value v) {
    if (!key.is(Value::Kind::Int))
      fail(ErrorCode::corrupt,
           "SETITEM on a list with a " + std::string(key.kind_name()) + " index");
    const auto n = static_cast<std::int64_t>(list.size());
    const std::int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i < 0 || i >= n)
      fail(ErrorCode::corrupt, "SETITEM on a list of " + std::to_string(n) + " items at index " +
                                   std::to_string(key.as_int()) +
                                   " (list assignment index out of range)");
    list.set_item(static_cast<std::size_t>(i), std::move(v));
    check_container(list);
  }
  void note_list_setitem() {
    if (stats_.list_setitems++ == 0) stats_.first_list_setitem_offset = op_offset_;
  }
  // SETITEM/SETITEMS on a tensor (or a storage): Python's unpickler calls
  // its __setitem__, which writes into the tensor's data; so did torch's
  // weights_only unpickler up to 2.9 (with a storage declared larger than
  // its record, past the data: CVE-2026-24747). From 2.10 that unpickler
  // refuses it. The readers disagree: refused, whatever the item.
  [[noreturn]] void setitem_on_tensor(const Value& target) {
    fail(ErrorCode::ambiguous,
         std::string(opcode_name(op_)) + " on a " + (target.is_storage() ? "storage" : "tensor") +
             ": torch >= 2.10's default torch.load refuses it (\"Can only " +
             std::string(opcode_name(op_)) +
             " for dict, collections.OrderedDict, collections.Counter\"), while torch 1.13, "
             "torch 2.6 to 2.9 and any torch.load(weights_only=False) write the item into the "
             "tensor's data (CVE-2026-24747)");
  }
  void call(Value callable, Value args);
  void build();
  // `v` is the global's value (the object an Object was made by calling
  // when `g` is its class).
  GlobalUse* use_of(const Value& v, const Global& g);
  static void settle_profile(GlobalUse& use);
  void persistent(Value pid);

  ByteReader& r_;
  const Limits& limits_;
  const PersistentLoad& persistent_;
  const CallHook& hook_;
  const BuildHook& build_hook_;
  const AfterBuildHook& after_build_;
  Stats& stats_;
  std::span<const std::string> profiles_;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;        // stack sizes at each open MARK
  std::vector<std::uint64_t> memo_bits_;  // entries that exist, by index
  std::unordered_set<std::uint64_t, detail::SeededHash> memo_sparse_;  // ... past the bits
  std::uint64_t memo_count_ = 0;
  std::vector<std::uint64_t> reads_;  // indices the pickle reads, sorted
  std::vector<Value> read_values_;    // their values, in the same order
  bool memo_all_ = false;             // the scan failed: keep every value here
  std::unordered_map<std::uint64_t, Value, detail::SeededHash> memo_any_;
  // Each distinct global the pickle named, by "module.name": its
  // statistics (an index into stats_.globals, which earlier pickles of the
  // file may have filled) and its one Value.
  struct NamedGlobal {
    std::size_t use;
    Value value;
  };
  detail::StringMap<NamedGlobal> global_index_;
  // What a global the pickle named is, kept once per distinct global: its
  // one Value (find_class gives the same object each time, so every
  // reference pushes the same node) and, by that node, its statistics and
  // what calling it builds, so that a call costs no lookup by name.
  enum class Builtin : std::uint8_t {
    none,
    getattr,
    ordered_dict,
    set,
    complex,
    bytes,
    torch_size
  };
  struct Known {
    std::size_t use;  // index into stats_.globals
    Builtin builtin;  // a data constructor the VM runs itself
    bool allowed;     // classify_global's verdict, before any profile
  };
  std::unordered_map<const void*, Known> known_;
  static Builtin builtin_of(const Global& g) {
    if (g.is("builtins", "getattr")) return Builtin::getattr;
    if (g.is("collections", "OrderedDict")) return Builtin::ordered_dict;
    if (g.is("builtins", "set") || g.is("builtins", "frozenset")) return Builtin::set;
    if (g.is("builtins", "complex")) return Builtin::complex;
    if (g.is("builtins", "bytearray") || g.is("_codecs", "encode")) return Builtin::bytes;
    if (g.is("torch", "Size")) return Builtin::torch_size;
    return Builtin::none;
  }
  const Known* known(const Value& v) const {
    if (!v.is(Value::Kind::Global)) return nullptr;
    const auto it = known_.find(v.identity());
    return it == known_.end() ? nullptr : &it->second;
  }
  std::string use_key_;  // note_use's lookup key
  Value empty_tuple_;
  std::uint64_t created_ = 0;
  std::uint64_t constructed_ =
      0;                     // bytes copied by data constructors, for Limits::max_constructed_bytes
  std::uint64_t items_ = 0;  // items put into containers, for Limits::max_container_items
  std::uint64_t op_offset_ = 0;
  std::uint64_t frame_end_ = 0;  // file offset where the current FRAME ends (0: none)
  std::uint8_t op_ = 0;
};

// Python's Unpickler.find_class, as torch.load reaches it: torch's own
// rename first (UnpicklerWrapper: load_module_mapping), then, for protocols
// below 3, the _compat_pickle renames (fix_imports is on by default).
void Machine::global(std::string module, std::string name) {
  if (!is_utf8(module) || !is_utf8(name))
    fail(ErrorCode::corrupt,
         std::string(opcode_name(op_)) + " names a module or name that is not UTF-8");
  std::string written_module = module, written_name = name;
  GlobalName g = python_global_name(std::move(module), std::move(name), stats_.protocol);
  module = std::move(g.module);
  name = std::move(g.name);
  std::string written = std::move(g.written);
  const bool dotted = g.dotted_below_4;
  const std::string key = module + "." + name;
  auto [it, fresh] = global_index_.emplace(key, NamedGlobal{stats_.globals.size(), {}});
  if (fresh) {
    GlobalUse use;
    use.written_module = std::move(written_module);
    use.written_name = std::move(written_name);
    use.module = module;
    use.name = name;
    use.klass = classify_global(module, name);
    // A class of an active profile: allowed while it is used only as the
    // profile lists (settle_profile).
    if (use.klass == GlobalClass::unknown && !profiles_.empty()) {
      use.profile = profile_class(profiles_, module, name);
      if (use.profile) use.klass = GlobalClass::allowed;
    }
    use.first_offset = op_offset_;
    use.written = std::move(written);
    use.opcode = op_;
    stats_.globals.push_back(std::move(use));
  }
  NamedGlobal& entry = it->second;
  ++stats_.globals[entry.use].count;
  // (A dangerous one is left to the global policy, which names it.)
  if (dotted && stats_.globals[entry.use].klass != GlobalClass::dangerous)
    fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " '" + module + "' '" + name +
                                 "': a dotted name, which Python resolves only from pickle "
                                 "protocol 4 on (below it, loading fails)");
  if (entry.value.is_none()) {
    entry.value = Value::global(std::move(module), std::move(name));
    const Global& made = entry.value.as_global();
    known_.emplace(entry.value.identity(),
                   Known{entry.use, builtin_of(made),
                         classify_global(made.module, made.name) == GlobalClass::allowed});
  }
  push(entry.value);
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
  GlobalUse* const found = use_of(v, *g);
  if (found == nullptr) return;
  GlobalUse& use = *found;
  if (build) {
    ++(v.is(Value::Kind::Global) ? use.sets : use.builds);
  } else if (use.calls++ == 0) {
    use.first_call_offset = op_offset_;
    use.call_opcode = op_;
  }
}

// The statistics of a global the pickle named (null for a value the VM
// made, such as an Enum member).
GlobalUse* Machine::use_of(const Value& v, const Global& g) {
  if (const Known* k = known(v)) return &stats_.globals[k->use];
  use_key_.assign(g.module);  // reused: no allocation per lookup
  use_key_ += '.';
  use_key_ += g.name;
  const auto it = global_index_.find(use_key_);
  return it == global_index_.end() ? nullptr : &stats_.globals[it->second.use];
}

// A profile's class stays allowed while every call and BUILD of it is in
// the form its profile lists, and nothing sets its own attributes.
void Machine::settle_profile(GlobalUse& use) {
  if (use.profile == nullptr) return;
  use.klass = use.calls == use.inert_calls && use.builds == use.inert_builds && use.sets == 0
                  ? GlobalClass::allowed
                  : GlobalClass::unknown;
}

void Machine::call(Value callable, Value args) {
  note_use(callable, false);
  if (!callable.is(Value::Kind::Global))
    fail(ErrorCode::unsupported, std::string(opcode_name(op_)) + " of a " +
                                     std::string(callable.kind_name()) +
                                     ", not of a global (Python would call it)");
  if (!args.is(Value::Kind::Tuple))
    fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " with " +
                                 std::string(args.kind_name()) + " arguments, not a tuple");
  const Global& g = callable.as_global();
  const auto& a = args.items();
  const Known* const k = known(callable);
  GlobalUse* const use = use_of(callable, g);
  // An Enum member (a value getattr gave): Python cannot call it either.
  if (use == nullptr)
    fail(ErrorCode::corrupt, std::string(opcode_name(op_)) + " of " + g.qualified() +
                                 ", an Enum member, which is not callable");
  if (use->profile != nullptr) {
    // cls.__new__(cls): NEWOBJ (or NEWOBJ_EX without keywords) with no
    // arguments; a REDUCE would run the class's __init__.
    if (use->profile->use == ProfileUse::object && a.empty() && (op_ == NEWOBJ || op_ == NEWOBJ_EX))
      ++use->inert_calls;
    settle_profile(*use);
  }
  const Builtin builtin = k != nullptr ? k->builtin : builtin_of(g);
  if (builtin == Builtin::getattr) {
    // An Enum member by name, as Python 3.11 pickles one: the member, a
    // value. Any other getattr leaves the global dangerous.
    bool member = false;
    if (a.size() == 2 && a[0].is(Value::Kind::Global) && a[1].is(Value::Kind::Str)) {
      const Global& cls = a[0].as_global();
      member = allowed_enum_member(cls.module, cls.name, a[1].as_str());
      if (!member && enum_member_name(a[1].as_str()))
        if (const GlobalUse* enum_use = use_of(a[0], cls))
          member =
              enum_use->profile != nullptr && enum_use->profile->use == ProfileUse::enum_member;
    }
    if (member) {
      if (++use->inert_calls == use->calls) use->klass = GlobalClass::allowed;
      push(Value::global(a[0].as_global().module, a[0].as_global().name + "." + a[1].as_str()));
      return;
    }
    use->klass = GlobalClass::dangerous;
  }
  // Pure data constructors: build the data, run nothing.
  if (builtin == Builtin::ordered_dict) {
    Value d = Value::ordered_dict();
    if (a.size() == 1 && (a[0].is(Value::Kind::List) || a[0].is(Value::Kind::Tuple))) {
      count_copy(2 * a[0].items().size());
      for (const auto& kv : a[0].items()) {
        if (!(kv.is(Value::Kind::List) || kv.is(Value::Kind::Tuple)) || kv.size() != 2)
          fail(ErrorCode::corrupt, "OrderedDict item is not a pair");
        d.insert(kv.items()[0], kv.items()[1]);
      }
    } else if (!a.empty()) {
      fail(ErrorCode::unsupported, "OrderedDict called with unexpected arguments " + args.repr(3));
    }
    check_container(d);
    push(std::move(d));
    return;
  }
  if (builtin == Builtin::set) {
    if (a.empty()) return push(Value::set());
    if (a.size() != 1 ||
        !(a[0].is(Value::Kind::List) || a[0].is(Value::Kind::Tuple) || a[0].is(Value::Kind::Set)))
      fail(ErrorCode::unsupported, "set called with unexpected arguments " + args.repr(3));
    count_copy(a[0].items().size());
    return push(make_seq(Value::Kind::Set, a[0].items()));
  }
  if (builtin == Builtin::complex) {
    double re = 0, im = 0;
    if (a.size() > 2) fail(ErrorCode::corrupt, "complex takes at most 2 arguments");
    const auto number = [](const Value& v) {
      return v.is(Value::Kind::Int) || v.is(Value::Kind::Float) || v.is(Value::Kind::Bool);
    };
    if (a.size() == 1 && a[0].is(Value::Kind::Str)) {  // complex('1+2j')
      if (!parse_complex(a[0].as_str(), re, im))
        fail(ErrorCode::corrupt, "complex() of " + a[0].repr(2) + ", which Python refuses");
      return push(Value::complex(re, im));
    }
    for (const Value& x : a)
      if (!number(x))
        fail(x.is(Value::Kind::Str) ? ErrorCode::corrupt : ErrorCode::unsupported,
             "complex() of " + args.repr(3));
    if (!a.empty()) re = a[0].as_float();
    if (a.size() == 2) im = a[1].as_float();
    return push(Value::complex(re, im));
  }
  if (builtin == Builtin::bytes) {
    if (a.empty() && g.name == "bytearray") return push(Value::bytes(""));
    // Each call copies its argument, as Python does: one memo-shared string
    // encoded many times would multiply memory, so the copies count.
    if (!a.empty() && (a[0].is(Value::Kind::Bytes) || a[0].is(Value::Kind::Str))) {
      constructed_ += a[0].is(Value::Kind::Bytes) ? a[0].as_bytes().size() : a[0].as_str().size();
      if (constructed_ > limits_.max_constructed_bytes)
        limit("max_constructed_bytes", limits_.max_constructed_bytes);
    }
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
  if (builtin == Builtin::torch_size) {
    if (a.size() != 1 || !(a[0].is(Value::Kind::Tuple) || a[0].is(Value::Kind::List)))
      fail(ErrorCode::unsupported, "torch.Size called with arguments " + args.repr(3));
    // A tuple is the Size's items as they are: shared, not copied (one
    // memo-shared tuple of 100,000 ints given to torch.Size 200 times cost
    // 1.26 GB copied). A list is copied, as Python copies it, and counted.
    if (a[0].is(Value::Kind::Tuple)) return push(a[0]);
    count_copy(a[0].items().size());
    return push(make_seq(Value::Kind::Tuple, a[0].items()));
  }
  if (!(k != nullptr ? k->allowed : classify_global(g.module, g.name) == GlobalClass::allowed))
    ++stats_.calls;
  if (hook_) {
    if (std::optional<Value> built = hook_(g, args, op_offset_)) {
      push(std::move(*built));
      return;
    }
  }
  Value obj = Value::object(g, std::move(args), op_offset_, op_ == NEWOBJ || op_ == NEWOBJ_EX);
  check_container(obj);
  push(std::move(obj));
}

void Machine::build() {
  Value state = pop();
  Value& target = top();
  note_use(target, true);
  if (target.is(Value::Kind::Global) || target.is(Value::Kind::Object)) {
    const Global& g = target.is(Value::Kind::Global) ? target.as_global() : target.as_object().cls;
    if (GlobalUse* use = use_of(target, g); use != nullptr && use->profile != nullptr) {
      // Python's load_build stores a dict's items into the instance's
      // __dict__ (the class has no __setstate__ to run).
      if (target.is(Value::Kind::Object) && use->profile->use == ProfileUse::object &&
          state.is(Value::Kind::Dict) &&
          std::all_of(state.pairs().begin(), state.pairs().end(),
                      [](const auto& kv) { return kv.first.is(Value::Kind::Str); }))
        ++use->inert_builds;
      settle_profile(*use);
    }
  }
  if (target.is(Value::Kind::Object)) {
    Value previous = target.as_object().state;
    target.set_state(std::move(state));
    check_container(target);
    if (after_build_) {
      // The object stays on the stack (the hook reads bytes; what a
      // loader puts there instead is no concern of the scan's).
      const Value built = target;
      after_build_(built, previous, r_, frame_end_ != 0 && r_.file_offset() < frame_end_,
                   op_offset_);
    }
  } else if (target.is(Value::Kind::Tensor)) {
    // A tensor the call hook built: Python would call its __setstate__,
    // which can re-view it (set_). The hook applies that or refuses; the
    // node is changed in place, so the memo and every handle see it.
    ++stats_.tensor_builds;
    if (!build_hook_)
      fail(ErrorCode::unsupported, "BUILD on a tensor, in a pickle read without tensor semantics");
    target.set_tensor(build_hook_(target, state, op_offset_));
  } else if (target.is(Value::Kind::Dict)) {
    // An OrderedDict's instance attributes: torch stores `_metadata` (module
    // versions) this way. They hold no tensors that belong to the dict.
    // The state Python's BUILD takes apart: a dict, or (dict or None,
    // slot dict or None); torch's weights_only loader also updates the
    // attributes from a list of pairs, as dict.update does.
    const auto attributes = [](const Value& v) { return v.is_none() || v.is(Value::Kind::Dict); };
    const bool pairs =
        state.is(Value::Kind::List) &&
        std::all_of(state.items().begin(), state.items().end(), [](const Value& kv) {
          return (kv.is(Value::Kind::Tuple) || kv.is(Value::Kind::List)) && kv.size() == 2;
        });
    const bool slots = state.is(Value::Kind::Tuple) && state.size() == 2 &&
                       attributes(state.items()[0]) && attributes(state.items()[1]);
    if (!state.is(Value::Kind::Dict) && !pairs && !slots)
      fail(ErrorCode::unsupported,
           "BUILD of a dict with " + std::string(state.kind_name()) + " state " + state.repr(3));
  } else {
    fail(ErrorCode::corrupt, "BUILD on a " + std::string(target.kind_name()) +
                                 " (only objects and OrderedDicts can be built)");
  }
}

void Machine::persistent(Value pid) {
  ++stats_.persistent_ids;
  // pickle.load without a persistent_load refuses it too (UnpicklingError).
  if (!persistent_)
    fail(ErrorCode::corrupt,
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

// What scan_reads needs of each opcode byte, from kOpcodes: how to step
// over its argument, and whether it reads the memo or ends the pickle.
struct ScanStep {
  enum Kind : std::uint8_t { invalid, fixed, run, run_i32, lines, get, stop };
  Kind kind = invalid;
  std::uint8_t width = 0;  // the fixed argument's, or a run's length field's
};
constexpr std::array<ScanStep, 256> kScanSteps = [] {
  std::array<ScanStep, 256> steps{};
  for (const OpInfo& info : kOpcodes) {
    ScanStep& s = steps[info.code];
    s.width = static_cast<std::uint8_t>(fixed_width(info.arg));
    if (info.code == STOP)
      s.kind = ScanStep::stop;
    else if (info.code == BINGET || info.code == LONG_BINGET)
      s.kind = ScanStep::get;
    else if (info.arg == Arg::run_i32)
      s.kind = ScanStep::run_i32;
    else if (is_run(info.arg))
      s.kind = ScanStep::run;
    else if (info.arg == Arg::line || info.arg == Arg::lines2)
      s.kind = ScanStep::lines;
    else
      s.kind = ScanStep::fixed;
  }
  return steps;
}();

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
  // Fixed-width and length-prefixed arguments are stepped over here, in
  // place; only the text lines (GET's among them) take read_operand's
  // reading. Every check read_operand makes without a run limit is made:
  // the walk fails exactly where it would.
  const std::span<const std::byte> all = r.all();
  const auto* data = reinterpret_cast<const unsigned char*>(all.data());
  const std::uint64_t size = all.size();
  // Widths 1, 2, 4 and 8, each a constant (a memcpy of a variable width
  // is a call).
  const auto le = [&](std::uint64_t at, unsigned width) -> std::uint64_t {
    const unsigned char* p = data + at;
    switch (width) {
      case 1:
        return p[0];
      case 2: {
        std::uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      case 4: {
        std::uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      default: {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
      }
    }
  };
  std::uint64_t pos = r.pos();
  try {
    for (;;) {
      if (pos >= size) return false;
      const std::uint8_t op = data[pos];
      const ScanStep step = kScanSteps[op];
      const std::uint64_t left = size - pos - 1;  // bytes after the opcode
      std::uint64_t width = step.width;           // of its argument
      switch (step.kind) {
        case ScanStep::invalid:
          return false;
        case ScanStep::fixed:
          break;
        case ScanStep::run:
        case ScanStep::run_i32: {
          if (left < width) return false;
          const std::uint64_t n = le(pos + 1, step.width);
          if (step.kind == ScanStep::run_i32 && (n & 0x80000000u) != 0) return false;  // negative
          if (n > left - width) return false;
          width += n;
          break;
        }
        case ScanStep::lines: {
          r.seek(pos + 1);
          const Operand a = read_operand(r, *opcode_info(op));
          if (op == GET) {
            const std::int64_t i = parse_decimal(a.text, "GET index");
            if (i < 0) return false;
            read(static_cast<std::uint64_t>(i));
          }
          pos = r.pos();
          continue;
        }
        case ScanStep::get:
          if (width > left) return false;
          read(le(pos + 1, step.width));
          break;
        case ScanStep::stop:
          for (std::size_t w = 0; w < bits.size(); ++w)
            for (std::uint64_t b = bits[w]; b != 0; b &= b - 1)
              reads_.push_back(w * 64 + static_cast<std::uint64_t>(__builtin_ctzll(b)));
          std::sort(reads_.begin(), reads_.end());
          reads_.erase(std::unique(reads_.begin(), reads_.end()), reads_.end());
          read_values_.resize(reads_.size());
          return true;
      }
      if (width > left) return false;
      pos += 1 + width;
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
    if (frame_end_ != 0 && op_offset_ >= frame_end_) frame_end_ = 0;  // the frame is read
    const Operand arg = read_operand(r_, *info, limits_.max_string_bytes);
    // An opcode whose argument runs past the end of its frame: CPython's C
    // unpickler before 3.13.15 and 3.14.7 read across it (as this VM does),
    // its Python unpickler and later releases refuse ("pickle exhausted
    // before end of frame", gh-154848). Two readings: counted for the scan.
    if (frame_end_ != 0 && r_.file_offset() > frame_end_) {
      if (stats_.frame_straddles++ == 0) stats_.first_frame_straddle_offset = op_offset_;
      frame_end_ = 0;
    }
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
        // A frame begun before the current one ends: Python's unpickler
        // refuses ("beginning of a new frame before end of current
        // frame"), the C one reads on.
        if (frame_end_ != 0 && r_.file_offset() < frame_end_ && stats_.frame_straddles++ == 0)
          stats_.first_frame_straddle_offset = op_offset_;
        frame_end_ = r_.file_offset() + n;
        break;  // frames only group opcodes; we read straight through (as CPython's C unpickler)
      }
      case STOP:
        // As CPython's unpickler: the value above the innermost open MARK
        // (marks left open are dropped with their stack; none left above
        // the mark is "unpickling stack underflow").
        return pop();
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
        push(parse_int(line));
        break;
      }
      case LONG: {
        std::string_view line = arg.text;
        if (line.empty()) fail(ErrorCode::corrupt, "LONG without digits");
        if (line.back() == 'L') line.remove_suffix(1);  // Python 2's suffix
        push(parse_long(line, "LONG", true));
        break;
      }
      case LONG1:
      case LONG4:
        push(long_from_bytes(std::as_bytes(std::span(arg.text.data(), arg.text.size()))));
        break;
      case FLOAT:
        push(Value::real(parse_float(arg.text)));
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
        // (A lone surrogate is a str in Python, which UTF-8 cannot hold: the
        // VM's own refusal; a truncated escape is Python's too.)
        bool surrogate = false;
        if (!raw_unicode_to_utf8(arg.text, out, &surrogate))
          fail(surrogate ? ErrorCode::unsupported : ErrorCode::corrupt,
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
          fail(foreign(list, true), "APPEND to a " + std::string(list.kind_name()) +
                                        " (only lists; torch's weights_only unpickler refuses "
                                        "it too: \"Can only append to lists\")");
        count_items(1);
        list.append(std::move(item));
        check_container(list);
        break;
      }
      case APPENDS: {
        auto items = pop_mark();
        Value& list = top();
        if (!list.is(Value::Kind::List))
          fail(foreign(list, true), "APPENDS to a " + std::string(list.kind_name()) +
                                        " (only lists; torch's weights_only unpickler refuses "
                                        "it too: \"Can only append to lists\")");
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
          fail(foreign(set, false),
               "ADDITEMS to a " + std::string(set.kind_name()) + " (only sets)");
        count_items(items.size());
        for (auto& i : items) set.append(std::move(i));
        check_container(set);
        break;
      }
      case SETITEM: {
        Value v = pop(), k = pop();
        Value& d = top();
        count_items(1);
        if (d.is(Value::Kind::List)) {
          note_list_setitem();
          set_list_item(d, k, std::move(v));
          break;
        }
        if (d.is(Value::Kind::Tensor)) setitem_on_tensor(d);
        if (!d.is(Value::Kind::Dict))
          fail(foreign(d, false),
               "SETITEM on a " + std::string(d.kind_name()) + " (only dicts and lists)");
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
        if (d.is(Value::Kind::List)) {
          note_list_setitem();
          count_items((stack_.size() - mark) / 2);
          for (std::size_t i = mark; i < stack_.size(); i += 2)
            set_list_item(d, stack_[i], std::move(stack_[i + 1]));
          stack_.resize(mark);
          break;
        }
        if (d.is(Value::Kind::Tensor)) setitem_on_tensor(d);
        if (!d.is(Value::Kind::Dict))
          fail(foreign(d, false),
               "SETITEMS on a " + std::string(d.kind_name()) + " (only dicts and lists)");
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
               Stats* stats, const CallHook& hook, const BuildHook& build,
               std::span<const std::string> profiles, const AfterBuildHook& after_build) {
  Stats local;
  Stats& s = stats ? *stats : local;
  Machine m(reader, limits, persistent, hook, build, s, profiles, after_build);
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
