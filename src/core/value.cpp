// Value: the data model (nodes, factories, accessors, building) and the
// Python key equality and hashing dicts use. Printing is in value_repr.cpp,
// JSON output in value_json.cpp.

#include "torchport/core/value.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "torchport/core/error.hpp"
#include "torchport/detail/hash.hpp"
#include "torchport/detail/take_tensors.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

// Every node is made by `new` of its own type and counts its references in
// its head (detail::ValueNodeHead); `type` says what to delete it as when
// the last goes. No virtual destructor, so no vtable pointer, and no
// control block: 32 bytes with the count, the same as a key string's
// std::string (a file of many small tensors holds a few nodes a tensor).
struct Value::Node : detail::ValueNodeHead {
  enum class Type : std::uint8_t { str, list, dict, global, object, tensor };
  explicit Node(Type t) noexcept : type(t) {}
  const Type type;
  mutable bool sealed = false;
  bool storage = false;  // a tensor node made by Value::storage()
  bool ordered = false;  // a dict made by Value::ordered_dict()
  bool numpy = false;    // a tensor made by Value::numpy_array()
  bool numpy2 = false;   // ... from a pickle that spelled numpy's core numpy._core
  std::uint32_t depth = 0;
  // The key hash of a sealed node, computed at most once (0: not yet).
  mutable std::atomic<std::uint64_t> hash{0};
  std::uint64_t weight = 1;
};
struct Value::StrNode : Node {
  StrNode() noexcept : Node(Type::str) {}
  std::string s;
};
struct Value::ListNode : Node {
  ListNode() noexcept : Node(Type::list) {}
  Items items;
};
struct Value::DictNode : Node {
  DictNode() noexcept : Node(Type::dict) {}
  Pairs pairs;
  // Position of each key (pair index + 1 in the low half, 0 for an empty
  // slot; the key hash's high half in the high half, so that a probe
  // compares keys only when their hashes agree; open addressing, at most
  // half full), built once a dict grows past a few entries, so that
  // inserting n keys stays O(n) without allocating per key.
  std::vector<std::uint64_t> slots;
};
struct Value::GlobalNode : Node {
  GlobalNode() noexcept : Node(Type::global) {}
  Global g;
};
struct Value::ObjectNode : Node {
  ObjectNode() noexcept : Node(Type::object) {}
  Object o;
};
struct Value::TensorNode : Node {
  TensorNode() noexcept : Node(Type::tensor) {}
  Tensor t;
};

inline Value::Node* Value::node() const noexcept {
  return static_cast<Node*>(node_.get());
}

namespace {

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}

// Dict keys by Python equality: strings, bytes and integral numbers (int,
// bool, float: 1, 1.0 and True are one key) compare directly; the rest
// (None, other floats, tuples, frozensets, globals, objects) structurally.
enum class KeyClass : std::uint8_t { Str, Bytes, Number, Other };

KeyClass key_class(const Value& k, std::int64_t& number) {
  switch (k.kind()) {
    case Value::Kind::Str:
      return KeyClass::Str;
    case Value::Kind::Bytes:
      return KeyClass::Bytes;
    case Value::Kind::Int:
    case Value::Kind::Bool:
      number = k.as_int();
      return KeyClass::Number;
    case Value::Kind::Float: {
      const double d = k.as_float();
      if (std::floor(d) == d && std::fabs(d) < 9.2e18) {
        number = static_cast<std::int64_t>(d);
        return KeyClass::Number;
      }
      return KeyClass::Other;
    }
    default:
      return KeyClass::Other;
  }
}

constexpr std::uint64_t kBytesTag = 0x9e3779b97f4a7c15ull;

std::uint64_t str_hash(std::string_view s) {
  return detail::seeded_hash(s);
}

// A dict's index slot: the key hash's high half, and the pair's index + 1.
std::uint64_t make_slot(std::uint64_t hash, std::size_t index) {
  return (hash & 0xffffffff00000000ull) | (static_cast<std::uint64_t>(index) + 1);
}
std::uint64_t slot_tag(std::uint64_t slot_or_hash) {
  return slot_or_hash >> 32;
}
std::size_t slot_index(std::uint64_t slot) {
  return static_cast<std::size_t>((slot & 0xffffffffull) - 1);
}

}  // namespace

// Hashing and comparing keys; a friend of Value for the node's hash cache.
struct ValueAccess {
  static_assert(sizeof(Value::Node) == 32 || sizeof(void*) != 8, "a node's head grew");
  // A kind, a scalar and a node reference: a dict pair is 48 bytes.
  static_assert(sizeof(Value) == 24 || sizeof(void*) != 8, "a value grew");

  static void destroy(const detail::ValueNodeHead* head) noexcept {
    const auto* n = static_cast<const Value::Node*>(head);
    switch (n->type) {
      case Value::Node::Type::str:
        delete static_cast<const Value::StrNode*>(n);
        return;
      case Value::Node::Type::list:
        delete static_cast<const Value::ListNode*>(n);
        return;
      case Value::Node::Type::dict:
        delete static_cast<const Value::DictNode*>(n);
        return;
      case Value::Node::Type::global:
        delete static_cast<const Value::GlobalNode*>(n);
        return;
      case Value::Node::Type::object:
        delete static_cast<const Value::ObjectNode*>(n);
        return;
      case Value::Node::Type::tensor:
        delete static_cast<const Value::TensorNode*>(n);
        return;
    }
  }

  // detail::take_tensor_dict: every condition is checked before anything
  // is moved.
  static bool take_tensor_dict(Value& root, bool& ordered,
                               const std::function<void(std::string&&, Tensor&&)>& take) {
    if (root.kind_ != Value::Kind::Dict || root.node_.use_count() != 1) return false;
    auto& d = static_cast<Value::DictNode&>(*root.node());
    for (const auto& [k, x] : d.pairs) {
      if (k.kind_ != Value::Kind::Str || x.kind_ != Value::Kind::Tensor || x.node_.use_count() != 1)
        return false;
      const Value::Node& n = *x.node();
      if (n.storage || n.numpy || n.numpy2) return false;
    }
    ordered = d.ordered;
    for (auto& [k, x] : d.pairs) {
      auto& key = static_cast<Value::StrNode&>(*k.node());
      std::string name = k.node_.use_count() == 1 ? std::move(key.s) : key.s;
      take(std::move(name), std::move(static_cast<Value::TensorNode&>(*x.node()).t));
      k = Value();
      x = Value();
    }
    root = Value();
    return true;
  }

  // The seeded hash of a key. A node's hash is computed once (its children's
  // are cached too), so hashing any key DAG costs its distinct nodes.
  static std::uint64_t hash(const Value& k) {
    std::int64_t n = 0;
    const KeyClass c = key_class(k, n);
    if (c == KeyClass::Number) return detail::seeded_hash(static_cast<std::uint64_t>(n));
    if (!k.node_) {
      if (k.kind_ == Value::Kind::Float) {
        std::uint64_t bits;
        std::memcpy(&bits, &k.f_, sizeof bits);
        return detail::seeded_hash(bits ^ 0xf1f1f1f1ull);
      }
      return detail::seeded_hash(std::uint64_t{0x4e6f6e65});  // None
    }
    const std::uint64_t cached = k.node()->hash.load(std::memory_order_relaxed);
    if (cached != 0) return cached;
    std::uint64_t h = 0;
    switch (k.kind_) {
      case Value::Kind::Str:
        h = str_hash(k.as_str());
        break;
      case Value::Kind::Bytes:
        h = str_hash(k.as_bytes()) ^ kBytesTag;
        break;
      case Value::Kind::BigInt:
        h = str_hash(k.as_bytes()) ^ 0xb16b16b16ull;
        break;
      case Value::Kind::Global:
        h = str_hash(k.as_global().qualified()) ^ 0x610ba1ull;
        break;
      case Value::Kind::Tensor:
        h = detail::seeded_hash(
            static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(k.node_.get())));
        break;
      case Value::Kind::Dict:
        h = detail::seeded_hash(static_cast<std::uint64_t>(k.kind_));
        for (const auto& [a, b] : k.pairs())
          h = detail::hash_combine(detail::hash_combine(h, hash(a)), hash(b));
        break;
      case Value::Kind::Object: {
        const Object& o = k.as_object();
        h = detail::hash_combine(str_hash(o.cls.qualified()), hash(o.args));
        h = detail::hash_combine(h, hash(o.state));
        break;
      }
      default:  // List, Tuple, Set, Complex
        h = detail::seeded_hash(static_cast<std::uint64_t>(k.kind_));
        for (const auto& i : k.node_as<Value::ListNode>(k.kind_).items)
          h = detail::hash_combine(h, hash(i));
        break;
    }
    if (h == 0) h = 1;
    k.node()->hash.store(h, std::memory_order_relaxed);
    return h;
  }

  // Python's key equality. Equal hashes are compared structurally for at
  // most `budget` nodes; past that, equal 64-bit seeded hashes are taken as
  // equal keys (a file cannot aim for a collision it cannot predict).
  static bool equal(const Value& a, const Value& b, int& budget) {
    if (--budget < 0) return true;
    std::int64_t x = 0, y = 0;
    const KeyClass ca = key_class(a, x), cb = key_class(b, y);
    if (ca != cb) return false;
    if (ca == KeyClass::Number) return x == y;
    if (a.node_ && a.node_.get() == b.node_.get()) return true;
    if (a.kind_ != b.kind_) return false;
    if (hash(a) != hash(b)) return false;
    switch (a.kind_) {
      case Value::Kind::None:
        return true;
      case Value::Kind::Float: {
        std::uint64_t p, q;
        std::memcpy(&p, &a.f_, sizeof p);
        std::memcpy(&q, &b.f_, sizeof q);
        return p == q;
      }
      case Value::Kind::Str:
      case Value::Kind::Bytes:
      case Value::Kind::BigInt:
        return a.node_as<Value::StrNode>(a.kind_).s == b.node_as<Value::StrNode>(b.kind_).s;
      case Value::Kind::Global:
        return a.as_global().module == b.as_global().module &&
               a.as_global().name == b.as_global().name;
      case Value::Kind::Tensor:
        return false;  // by identity, checked above
      case Value::Kind::Dict: {
        const auto &p = a.pairs(), &q = b.pairs();
        if (p.size() != q.size()) return false;
        for (std::size_t i = 0; i < p.size(); ++i)
          if (!equal(p[i].first, q[i].first, budget) || !equal(p[i].second, q[i].second, budget))
            return false;
        return true;
      }
      case Value::Kind::Object: {
        const Object &o = a.as_object(), &r = b.as_object();
        return o.cls.module == r.cls.module && o.cls.name == r.cls.name &&
               equal(o.args, r.args, budget) && equal(o.state, r.state, budget);
      }
      default: {
        const auto &p = a.node_as<Value::ListNode>(a.kind_).items,
                   &q = b.node_as<Value::ListNode>(b.kind_).items;
        if (p.size() != q.size()) return false;
        for (std::size_t i = 0; i < p.size(); ++i)
          if (!equal(p[i], q[i], budget)) return false;
        return true;
      }
    }
  }

  static bool key_equal(const Value& a, const Value& b) {
    int budget = 256;
    return equal(a, b, budget);
  }
};

namespace {

std::uint64_t key_hash(const Value& k) {
  return ValueAccess::hash(k);
}
bool key_equal(const Value& a, const Value& b) {
  return ValueAccess::key_equal(a, b);
}

}  // namespace

template <class N>
N& Value::node_as(Kind k) const {
  (void)k;
  return *static_cast<N*>(node());
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
  auto* n = new StrNode();
  v.node_ = detail::ValueNodeRef(n);
  n->s = std::move(le_bytes);
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
  auto* n = new StrNode();
  v.node_ = detail::ValueNodeRef(n);
  n->s = std::move(s);
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
  auto* node = new ListNode();
  v.node_ = detail::ValueNodeRef(node);
  node->depth = 1;
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
  v.node_ = detail::ValueNodeRef(new DictNode());
  v.node()->depth = 1;
  for (auto& [k, x] : pairs) v.insert(std::move(k), std::move(x));
  return v;
}
Value Value::ordered_dict() {
  Value v = dict();
  v.node()->ordered = true;
  return v;
}
Value Value::global(std::string module, std::string name) {
  Value v;
  v.kind_ = Kind::Global;
  auto* n = new GlobalNode();
  v.node_ = detail::ValueNodeRef(n);
  n->g = Global{std::move(module), std::move(name)};
  return v;
}
Value Value::object(Global cls, Value args, std::uint64_t offset, bool newobj) {
  Value v;
  v.kind_ = Kind::Object;
  auto* n = new ObjectNode();
  v.node_ = detail::ValueNodeRef(n);
  n->depth = 1;
  n->o.cls = std::move(cls);
  n->o.offset = offset;
  n->o.newobj = newobj;
  v.absorb(args);
  v.node_as<ObjectNode>(Kind::Object).o.args = std::move(args);
  return v;
}
Value Value::tensor(Tensor t) {
  Value v;
  v.kind_ = Kind::Tensor;
  auto* n = new TensorNode();
  v.node_ = detail::ValueNodeRef(n);
  n->t = std::move(t);
  return v;
}

Value Value::storage(Tensor t) {
  Value v = tensor(std::move(t));
  v.node()->storage = true;
  return v;
}

Value Value::numpy_array(Tensor t, bool numpy2) {
  Value v = tensor(std::move(t));
  v.node()->numpy = true;
  v.node()->numpy2 = numpy2;
  return v;
}
bool Value::is_numpy_array() const noexcept {
  return kind_ == Kind::Tensor && node()->numpy;
}
std::string_view Value::numpy_core_module() const noexcept {
  return is_numpy_array() && node()->numpy2 ? "numpy._core" : "numpy.core";
}
bool Value::is_ordered_dict() const noexcept {
  return kind_ == Kind::Dict && node()->ordered;
}
bool Value::is_storage() const noexcept {
  return kind_ == Kind::Tensor && node()->storage;
}

bool Value::is_container() const noexcept {
  return kind_ == Kind::List || kind_ == Kind::Tuple || kind_ == Kind::Dict || kind_ == Kind::Set ||
         kind_ == Kind::Object;
}

std::string_view Value::kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::BigInt:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Complex:
      return "complex";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Set:
      return "set";
    case Kind::Global:
      return "global";
    case Kind::Object:
      return "object";
    case Kind::Tensor:
      return "tensor";
  }
  return "?";
}
std::string_view Value::kind_name() const noexcept {
  return kind_name(kind_);
}

namespace {
[[noreturn]] void wrong_kind(std::string_view want, const Value& v) {
  throw Error(ErrorCode::corrupt, "expected " + std::string(want) + ", found " +
                                      std::string(v.kind_name()) + " " + v.repr(4));
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
    const std::uint64_t h = std::max<std::uint64_t>(str_hash(key), 1);  // as ValueAccess::hash
    for (std::size_t s = h & mask; d.slots[s] != 0; s = (s + 1) & mask) {
      if (slot_tag(d.slots[s]) != slot_tag(h)) continue;
      const auto& [k, v] = d.pairs[slot_index(d.slots[s])];
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
    case Kind::Set:
      return node_as<ListNode>(kind_).items.size();
    case Kind::Dict:
      return node_as<DictNode>(kind_).pairs.size();
    default:
      return 0;
  }
}

void Value::seal() const noexcept {
  if (node_) node()->sealed = true;
}

std::uint32_t Value::depth() const noexcept {
  return node_ ? node()->depth : 0;
}
std::uint64_t Value::weight() const noexcept {
  return node_ ? node()->weight : 1;
}

// Self-references and containers changed after they are nested are what
// CPython builds and this tree does not hold: refused as `unsupported` (not
// `corrupt`, which says Python would refuse the bytes too).
void Value::absorb(const Value& child) {
  // Everything inside a sealed container is sealed, so inserting a value into
  // an unsealed container can only close a cycle through the container itself.
  // (Read through the node here, not seal(), weight() and depth(): a
  // container of n items calls this n times.)
  const Node* c = child.node();
  if (c == nullptr) {  // a scalar: weight 1, depth 0
    node()->weight = sat_add(node()->weight, 1);
    if (node()->depth < 1) node()->depth = 1;
    return;
  }
  if (c == node())
    throw Error(ErrorCode::unsupported,
                "a " + std::string(kind_name()) +
                    " is put inside itself (self-references are not supported)");
  c->sealed = true;
  node()->weight = sat_add(node()->weight, c->weight);
  if (c->depth + 1 > node()->depth) node()->depth = c->depth + 1;
}

void Value::append(Value item) {
  if (kind_ != Kind::List && kind_ != Kind::Set && kind_ != Kind::Tuple)
    wrong_kind("list or set", *this);
  if (node()->sealed)
    throw Error(ErrorCode::unsupported,
                "a " + std::string(kind_name()) +
                    " is modified after being nested in another value (self-references are not "
                    "supported)");
  absorb(item);
  auto& items = node_as<ListNode>(kind_).items;
  detail::count(detail::work().items_inserted);
  if (items.size() == items.capacity()) detail::count(detail::work().items_moved, items.size());
  items.push_back(std::move(item));
}

void Value::set_item(std::size_t i, Value item) {
  if (kind_ != Kind::List) wrong_kind("list", *this);
  if (node()->sealed)
    throw Error(ErrorCode::unsupported,
                "a list is modified after being nested in another value (self-references are not "
                "supported)");
  auto& items = node_as<ListNode>(kind_).items;
  if (i >= items.size())
    throw Error(ErrorCode::corrupt, "list assignment index " + std::to_string(i) + " out of range");
  absorb(item);
  items[i] = std::move(item);
}

void Value::insert(Value key, Value value) {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  if (node()->sealed)
    throw Error(ErrorCode::unsupported,
                "a dict is modified after being nested in another value (self-references are not "
                "supported)");
  auto& d = node_as<DictNode>(kind_);
  absorb(key);
  absorb(value);
  detail::count(detail::work().items_inserted);
  if (d.pairs.size() == d.pairs.capacity())
    detail::count(detail::work().items_moved, d.pairs.size());
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
    detail::count(detail::work().items_moved, d.pairs.size());
    for (std::size_t i = 0; i < d.pairs.size(); ++i) {
      const std::uint64_t h = key_hash(d.pairs[i].first);
      std::size_t s = h & (cap - 1);
      while (d.slots[s] != 0) s = (s + 1) & (cap - 1);
      d.slots[s] = make_slot(h, i);
    }
  }
  const std::size_t mask = d.slots.size() - 1;
  const std::uint64_t h = key_hash(key);
  std::size_t s = h & mask;
  for (; d.slots[s] != 0; s = (s + 1) & mask)
    if (slot_tag(d.slots[s]) == slot_tag(h) &&
        key_equal(d.pairs[slot_index(d.slots[s])].first, key)) {
      d.pairs[slot_index(d.slots[s])].second = std::move(value);
      return;
    }
  d.slots[s] = make_slot(h, d.pairs.size());
  d.pairs.emplace_back(std::move(key), std::move(value));
}

namespace {
// Reserves geometrically: a reader that reserves "size + batch" before each
// batch (SETITEMS, APPENDS) must not reallocate the whole vector each time.
template <class V>
void grow_to(V& v, std::size_t n) {
  if (n <= v.capacity()) return;
  detail::count(detail::work().items_moved, v.size());
  v.reserve(std::max(n, v.capacity() * 2));
}
}  // namespace

void Value::reserve(std::size_t n) {
  if (!node_ || node()->sealed) return;
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set:
      grow_to(node_as<ListNode>(kind_).items, n);
      break;
    case Kind::Dict:
      grow_to(node_as<DictNode>(kind_).pairs, n);
      break;
    default:
      break;
  }
}

void Value::set_tensor(Tensor t) {
  if (kind_ != Kind::Tensor) wrong_kind("tensor", *this);
  if (node()->sealed)
    throw Error(ErrorCode::unsupported,
                "a tensor is given state after being nested in another value");
  node_as<TensorNode>(kind_).t = std::move(t);
}

void Value::set_state(Value state) {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  if (node()->sealed)
    throw Error(ErrorCode::unsupported,
                "an object is given state after being nested in another value");
  absorb(state);
  node_as<ObjectNode>(kind_).o.state = std::move(state);
}

namespace detail {
void destroy_value_node(const ValueNodeHead* node) noexcept {
  ValueAccess::destroy(node);
}

bool take_tensor_dict(Value& root, bool& ordered,
                      const std::function<void(std::string&&, Tensor&&)>& take) {
  return ValueAccess::take_tensor_dict(root, ordered, take);
}
}  // namespace detail

}  // namespace torchport
