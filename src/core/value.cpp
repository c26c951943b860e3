#include "torchport/core/value.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "torchport/core/error.hpp"

namespace torchport {

struct Value::Node {
  virtual ~Node() = default;
  mutable bool sealed = false;
  std::uint32_t depth = 0;
  std::uint64_t weight = 1;
};
struct Value::StrNode : Node {
  std::string s;
};
struct Value::ListNode : Node {
  Items items;
};
struct Value::DictNode : Node {
  Pairs pairs;
  // Position of each key (pair index + 1, 0 for an empty slot; open
  // addressing, at most half full), built once a dict grows past a few
  // entries, so that inserting n keys stays O(n) without allocating per key.
  std::vector<std::uint32_t> slots;
};
struct Value::GlobalNode : Node {
  Global g;
};
struct Value::ObjectNode : Node {
  Object o;
};
struct Value::TensorNode : Node {
  Tensor t;
};

namespace {

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}

// A string identifying a dict key the way Python's equality would (1, 1.0
// and True are the same key). Only the rare key kinds (non-integral floats,
// None, tuples...) use it; strings, bytes and numbers are compared in place.
std::string key_identity(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::Str: return "s" + k.as_str();
    case Value::Kind::Bytes: return "b" + k.as_bytes();
    case Value::Kind::Int:
    case Value::Kind::Bool: return "n" + std::to_string(k.as_int());
    case Value::Kind::Float: {
      const double d = k.as_float();
      if (std::floor(d) == d && std::fabs(d) < 9.2e18)
        return "n" + std::to_string(static_cast<std::int64_t>(d));
      return "f" + k.repr();
    }
    case Value::Kind::None: return "none";
    default: return "r" + k.repr(1u << 20);
  }
}

// Dict keys by Python equality without building strings: strings, bytes
// and integral numbers (int, bool, float) compare directly; the rest
// through key_identity.
enum class KeyClass : std::uint8_t { Str, Bytes, Number, Other };

KeyClass key_class(const Value& k, std::int64_t& number) {
  switch (k.kind()) {
    case Value::Kind::Str: return KeyClass::Str;
    case Value::Kind::Bytes: return KeyClass::Bytes;
    case Value::Kind::Int:
    case Value::Kind::Bool: number = k.as_int(); return KeyClass::Number;
    case Value::Kind::Float: {
      const double d = k.as_float();
      if (std::floor(d) == d && std::fabs(d) < 9.2e18) {
        number = static_cast<std::int64_t>(d);
        return KeyClass::Number;
      }
      return KeyClass::Other;
    }
    default: return KeyClass::Other;
  }
}

std::size_t text_hash(std::string_view s, std::size_t salt) {
  return std::hash<std::string_view>{}(s) ^ salt;
}

std::size_t key_hash(const Value& k) {
  std::int64_t n = 0;
  switch (key_class(k, n)) {
    case KeyClass::Str: return text_hash(k.as_str(), 0);
    case KeyClass::Bytes: return text_hash(k.as_bytes(), 0x9e3779b97f4a7c15ull);
    case KeyClass::Number: {
      // A full mix (murmur3's finaliser): the slot is the hash's low bits,
      // and keys that differ only in high bits (k << 32) must not collide.
      std::uint64_t x = static_cast<std::uint64_t>(n);
      x ^= x >> 33;
      x *= 0xff51afd7ed558ccdull;
      x ^= x >> 33;
      x *= 0xc4ceb9fe1a85ec53ull;
      x ^= x >> 33;
      return static_cast<std::size_t>(x);
    }
    case KeyClass::Other: return text_hash(key_identity(k), 0xc4ceb9fe1a85ec53ull);
  }
  return 0;
}

bool key_equal(const Value& a, const Value& b) {
  std::int64_t x = 0, y = 0;
  const KeyClass ca = key_class(a, x), cb = key_class(b, y);
  if (ca != cb) return false;
  switch (ca) {
    case KeyClass::Str: return a.as_str() == b.as_str();
    case KeyClass::Bytes: return a.as_bytes() == b.as_bytes();
    case KeyClass::Number: return x == y;
    case KeyClass::Other: return key_identity(a) == key_identity(b);
  }
  return false;
}

}  // namespace

template <class N>
N& Value::node_as(Kind k) const {
  (void)k;
  return *static_cast<N*>(node_.get());
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::big_integer(std::string le_bytes) {
  Value v;
  v.kind_ = Kind::BigInt;
  auto n = std::make_shared<StrNode>();
  n->s = std::move(le_bytes);
  v.node_ = std::move(n);
  return v;
}
Value Value::real(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}
Value Value::complex(double re, double im) {
  Value v = tuple({real(re), real(im)});
  v.kind_ = Kind::Complex;
  return v;
}
Value Value::str(std::string s) {
  Value v;
  v.kind_ = Kind::Str;
  auto n = std::make_shared<StrNode>();
  n->s = std::move(s);
  v.node_ = std::move(n);
  return v;
}
Value Value::bytes(std::string b) {
  Value v = str(std::move(b));
  v.kind_ = Kind::Bytes;
  return v;
}
Value Value::list(Items items) {
  Value v;
  v.kind_ = Kind::List;
  auto node = std::make_shared<ListNode>();
  node->depth = 1;
  v.node_ = node;
  // The node adopts the vector: one allocation for the items, whatever
  // their number. A fresh node cannot be one of them.
  for (const auto& i : items) v.absorb(i);
  node->items = std::move(items);
  return v;
}
Value Value::tuple(Items items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}
Value Value::set(Items items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Set;
  return v;
}
Value Value::dict(Pairs pairs) {
  Value v;
  v.kind_ = Kind::Dict;
  v.node_ = std::make_shared<DictNode>();
  v.node_->depth = 1;
  for (auto& [k, x] : pairs) v.insert(std::move(k), std::move(x));
  return v;
}
Value Value::global(std::string module, std::string name) {
  Value v;
  v.kind_ = Kind::Global;
  auto n = std::make_shared<GlobalNode>();
  n->g = Global{std::move(module), std::move(name)};
  v.node_ = std::move(n);
  return v;
}
Value Value::object(Global cls, Value args, std::uint64_t offset) {
  Value v;
  v.kind_ = Kind::Object;
  auto n = std::make_shared<ObjectNode>();
  n->depth = 1;
  n->o.cls = std::move(cls);
  n->o.offset = offset;
  v.node_ = std::move(n);
  v.absorb(args);
  v.node_as<ObjectNode>(Kind::Object).o.args = std::move(args);
  return v;
}
Value Value::tensor(Tensor t) {
  Value v;
  v.kind_ = Kind::Tensor;
  auto n = std::make_shared<TensorNode>();
  n->t = std::move(t);
  v.node_ = std::move(n);
  return v;
}

bool Value::is_container() const noexcept {
  return kind_ == Kind::List || kind_ == Kind::Tuple || kind_ == Kind::Dict ||
         kind_ == Kind::Set || kind_ == Kind::Object;
}

std::string_view Value::kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::Complex: return "complex";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Set: return "set";
    case Kind::Global: return "global";
    case Kind::Object: return "object";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}
std::string_view Value::kind_name() const noexcept { return kind_name(kind_); }

namespace {
[[noreturn]] void wrong_kind(std::string_view want, const Value& v) {
  throw Error(ErrorCode::corrupt,
              "expected " + std::string(want) + ", found " + std::string(v.kind_name()) + " " +
                  v.repr(4));
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) wrong_kind("bool", *this);
  return b_;
}
std::int64_t Value::as_int() const {
  if (kind_ == Kind::Bool) return b_ ? 1 : 0;
  if (kind_ != Kind::Int) wrong_kind("int", *this);
  return i_;
}
double Value::as_float() const {
  if (kind_ == Kind::Float) return f_;
  if (kind_ == Kind::Int) return static_cast<double>(i_);
  if (kind_ == Kind::Bool) return b_ ? 1.0 : 0.0;
  wrong_kind("float", *this);
}
std::pair<double, double> Value::as_complex() const {
  if (kind_ != Kind::Complex) wrong_kind("complex", *this);
  const auto& it = node_as<ListNode>(kind_).items;
  return {it[0].f_, it[1].f_};
}
const std::string& Value::as_str() const {
  if (kind_ != Kind::Str) wrong_kind("str", *this);
  return node_as<StrNode>(kind_).s;
}
const std::string& Value::as_bytes() const {
  if (kind_ != Kind::Bytes && kind_ != Kind::BigInt) wrong_kind("bytes", *this);
  return node_as<StrNode>(kind_).s;
}
const Value::Items& Value::items() const {
  if (kind_ != Kind::List && kind_ != Kind::Tuple && kind_ != Kind::Set)
    wrong_kind("list or tuple", *this);
  return node_as<ListNode>(kind_).items;
}
const Value::Pairs& Value::pairs() const {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  return node_as<DictNode>(kind_).pairs;
}
const Global& Value::as_global() const {
  if (kind_ != Kind::Global) wrong_kind("global", *this);
  return node_as<GlobalNode>(kind_).g;
}
const Object& Value::as_object() const {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  return node_as<ObjectNode>(kind_).o;
}
const Tensor& Value::as_tensor() const {
  if (kind_ != Kind::Tensor) wrong_kind("tensor", *this);
  return node_as<TensorNode>(kind_).t;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::Dict) return nullptr;
  const auto& d = node_as<DictNode>(kind_);
  if (!d.slots.empty()) {
    const std::size_t mask = d.slots.size() - 1;
    for (std::size_t s = text_hash(key, 0) & mask; d.slots[s] != 0; s = (s + 1) & mask) {
      const auto& [k, v] = d.pairs[d.slots[s] - 1];
      if (k.kind_ == Kind::Str && k.as_str() == key) return &v;
    }
    return nullptr;
  }
  for (const auto& [k, v] : d.pairs)
    if (k.kind_ == Kind::Str && k.as_str() == key) return &v;
  return nullptr;
}

std::size_t Value::size() const noexcept {
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set: return node_as<ListNode>(kind_).items.size();
    case Kind::Dict: return node_as<DictNode>(kind_).pairs.size();
    default: return 0;
  }
}

void Value::seal() const noexcept {
  if (node_) node_->sealed = true;
}

std::uint32_t Value::depth() const noexcept { return node_ ? node_->depth : 0; }
std::uint64_t Value::weight() const noexcept { return node_ ? node_->weight : 1; }

void Value::absorb(const Value& child) {
  // Everything inside a sealed container is sealed, so inserting a value into
  // an unsealed container can only close a cycle through the container itself.
  if (child.node_ == node_)
    throw Error(ErrorCode::corrupt,
                "a " + std::string(kind_name()) + " is put inside itself (self-references are not supported)");
  child.seal();
  node_->weight = sat_add(node_->weight, child.weight());
  if (child.depth() + 1 > node_->depth) node_->depth = child.depth() + 1;
}

void Value::append(Value item) {
  if (kind_ != Kind::List && kind_ != Kind::Set && kind_ != Kind::Tuple)
    wrong_kind("list or set", *this);
  if (node_->sealed)
    throw Error(ErrorCode::corrupt,
                "a " + std::string(kind_name()) +
                    " is modified after being nested in another value (self-references are not "
                    "supported)");
  absorb(item);
  node_as<ListNode>(kind_).items.push_back(std::move(item));
}

void Value::insert(Value key, Value value) {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  if (node_->sealed)
    throw Error(ErrorCode::corrupt,
                "a dict is modified after being nested in another value (self-references are not "
                "supported)");
  auto& d = node_as<DictNode>(kind_);
  absorb(key);
  absorb(value);
  constexpr std::size_t kIndexFrom = 8;
  if (d.slots.empty() && d.pairs.size() < kIndexFrom) {
    for (auto& [k, v] : d.pairs)
      if (key_equal(k, key)) {
        v = std::move(value);
        return;
      }
    d.pairs.emplace_back(std::move(key), std::move(value));
    return;
  }
  // Keep the table at most half full: rebuild it twice as large.
  if (2 * (d.pairs.size() + 1) > d.slots.size()) {
    std::size_t cap = std::max<std::size_t>(d.slots.size() * 2, 32);
    while (cap < 2 * (d.pairs.size() + 1)) cap *= 2;
    d.slots.assign(cap, 0);
    for (std::size_t i = 0; i < d.pairs.size(); ++i) {
      std::size_t s = key_hash(d.pairs[i].first) & (cap - 1);
      while (d.slots[s] != 0) s = (s + 1) & (cap - 1);
      d.slots[s] = static_cast<std::uint32_t>(i + 1);
    }
  }
  const std::size_t mask = d.slots.size() - 1;
  std::size_t s = key_hash(key) & mask;
  for (; d.slots[s] != 0; s = (s + 1) & mask)
    if (key_equal(d.pairs[d.slots[s] - 1].first, key)) {
      d.pairs[d.slots[s] - 1].second = std::move(value);
      return;
    }
  d.slots[s] = static_cast<std::uint32_t>(d.pairs.size() + 1);
  d.pairs.emplace_back(std::move(key), std::move(value));
}

void Value::reserve(std::size_t n) {
  if (!node_ || node_->sealed) return;
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set: node_as<ListNode>(kind_).items.reserve(n); break;
    case Kind::Dict: node_as<DictNode>(kind_).pairs.reserve(n); break;
    default: break;
  }
}

void Value::set_tensor(Tensor t) {
  if (kind_ != Kind::Tensor) wrong_kind("tensor", *this);
  if (node_->sealed)
    throw Error(ErrorCode::corrupt, "a tensor is given state after being nested in another value");
  node_as<TensorNode>(kind_).t = std::move(t);
}

void Value::set_state(Value state) {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  if (node_->sealed)
    throw Error(ErrorCode::corrupt, "an object is given state after being nested in another value");
  absorb(state);
  node_as<ObjectNode>(kind_).o.state = std::move(state);
}

namespace {

void repr_into(const Value& v, std::size_t max_items, std::string& out, int budget);

void repr_seq(const Value::Items& items, std::size_t max_items, std::string& out, int budget) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    if (i == max_items) {
      out += "... " + std::to_string(items.size() - i) + " more";
      break;
    }
    repr_into(items[i], max_items, out, budget - 1);
  }
}

void quote(const std::string& s, std::string& out) {
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
  out += '\'';
}

void repr_into(const Value& v, std::size_t max_items, std::string& out, int budget) {
  if (budget <= 0) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Value::Kind::None: out += "None"; break;
    case Value::Kind::Bool: out += v.as_bool() ? "True" : "False"; break;
    case Value::Kind::Int: out += std::to_string(v.as_int()); break;
    case Value::Kind::BigInt: out += "<int of " + std::to_string(v.as_bytes().size()) + " bytes>"; break;
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
    case Value::Kind::Str: quote(v.as_str(), out); break;
    case Value::Kind::Bytes:
      out += 'b';
      quote(v.as_bytes().size() > 64 ? v.as_bytes().substr(0, 64) + "..." : v.as_bytes(), out);
      break;
    case Value::Kind::List:
      out += '[';
      repr_seq(v.items(), max_items, out, budget);
      out += ']';
      break;
    case Value::Kind::Tuple:
      out += '(';
      repr_seq(v.items(), max_items, out, budget);
      if (v.items().size() == 1) out += ',';
      out += ')';
      break;
    case Value::Kind::Set:
      out += '{';
      repr_seq(v.items(), max_items, out, budget);
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
        repr_into(p[i].first, max_items, out, budget - 1);
        out += ": ";
        repr_into(p[i].second, max_items, out, budget - 1);
      }
      out += '}';
      break;
    }
    case Value::Kind::Global: out += v.as_global().qualified(); break;
    case Value::Kind::Object: {
      const auto& o = v.as_object();
      out += o.cls.qualified() + "(";
      if (o.args.size() > 0) repr_seq(o.args.items(), max_items, out, budget - 1);
      if (!o.state.is_none()) {
        if (o.args.size() > 0) out += ", ";
        out += "state=";
        repr_into(o.state, max_items, out, budget - 1);
      }
      out += ')';
      break;
    }
    case Value::Kind::Tensor: out += "tensor(" + v.as_tensor().description() + ")"; break;
  }
}

}  // namespace

std::string Value::repr(std::size_t max_items) const {
  std::string out;
  repr_into(*this, max_items, out, 64);
  return out;
}

namespace {

// True when a subtree holds at least one tensor and nothing else but containers.
bool only_tensors(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Tensor: return true;
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Set: {
      if (v.items().empty()) return false;
      for (const auto& i : v.items())
        if (!only_tensors(i)) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (v.pairs().empty()) return false;
      for (const auto& [k, x] : v.pairs())
        if (!only_tensors(x)) return false;
      return true;
    }
    default: return false;
  }
}

}  // namespace

Value prune_tensors(const Value& v) {
  if (only_tensors(v)) return Value();
  switch (v.kind()) {
    case Value::Kind::Dict: {
      Value out = Value::dict();
      for (const auto& [k, x] : v.pairs())
        if (!only_tensors(x)) out.insert(k, prune_tensors(x));
      return out;
    }
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      // Keep positions: a tensor item shows as its description.
      Value::Items items;
      for (const auto& i : v.items())
        items.push_back(i.is(Value::Kind::Tensor) ? Value::str("<tensor " + i.as_tensor().description() + ">")
                                                  : prune_tensors(i));
      return v.is(Value::Kind::List) ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case Value::Kind::Object: {
      const auto& o = v.as_object();
      Value out = Value::object(o.cls, o.args, o.offset);
      if (!o.state.is_none()) out.set_state(prune_tensors(o.state));
      return out;
    }
    default: return v;
  }
}

namespace {

std::string json_key(const Value& k) {
  return k.is(Value::Kind::Str) ? k.as_str() : k.repr(1u << 20);
}

nlohmann::ordered_json to_json_value(const Value& v) {
  using J = nlohmann::ordered_json;
  switch (v.kind()) {
    case Value::Kind::None: return nullptr;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int();
    case Value::Kind::BigInt: return J{{"bigint_bytes", v.as_bytes().size()}};
    case Value::Kind::Float: {
      const double d = v.as_float();
      if (std::isfinite(d)) return d;
      return std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf";
    }
    case Value::Kind::Complex: {
      auto [re, im] = v.as_complex();
      return J{{"complex", J::array({re, im})}};
    }
    case Value::Kind::Str: return v.as_str();  // invalid UTF-8 is replaced by dump()
    case Value::Kind::Bytes: return J{{"bytes", v.as_bytes().size()}};
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Set: {
      J a = J::array();
      for (const auto& i : v.items()) a.push_back(to_json_value(i));
      return a;
    }
    case Value::Kind::Dict: {
      J o = J::object();
      for (const auto& [k, x] : v.pairs()) o[json_key(k)] = to_json_value(x);
      return o;
    }
    case Value::Kind::Global: return J{{"global", v.as_global().qualified()}};
    case Value::Kind::Object: {
      const auto& ob = v.as_object();
      J o = J{{"object", ob.cls.qualified()}};
      if (ob.args.size() > 0) o["args"] = to_json_value(ob.args);
      if (!ob.state.is_none()) o["state"] = to_json_value(ob.state);
      return o;
    }
    case Value::Kind::Tensor: return J{{"tensor", v.as_tensor().description()}};
  }
  return nullptr;
}

}  // namespace

std::string to_json(const Value& v, int indent) {
  return to_json_value(v).dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace torchport
