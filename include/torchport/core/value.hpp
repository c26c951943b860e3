#pragma once
/// \file
/// `Value`: the inert data tree a pickle (or a JSON header, or a record file)
/// describes. Nothing in it can run.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "torchport/core/tensor.hpp"

namespace torchport {

class Value;

/// A reference to a Python global (`module.name`), never resolved.
struct Global {
  std::string module;
  std::string name;
  /// "module.name".
  std::string qualified() const { return module + "." + name; }
  bool is(std::string_view m, std::string_view n) const { return module == m && name == n; }
};

/// An inert Python object: the class (or callable) it names, the arguments it
/// was made with, and the state BUILD gave it. Never instantiated.
struct Object;

/// A node of an inert data tree: None, bool, int, float, complex, str, bytes,
/// list, tuple, dict (ordered, any key), set, a global reference, an inert
/// object, or a tensor.
///
/// Copying a `Value` is cheap: containers are shared (as Python shares them),
/// so a tree may be a DAG. Containers record their nesting depth and their
/// *weight* (how many values the subtree holds when shared references are
/// counted every time they are reached), which is what bounds walks over a
/// hostile DAG. A container becomes *sealed* once it is put inside another;
/// a sealed container cannot be modified, which also rules out cycles.
class Value {
 public:
  enum class Kind : std::uint8_t {
    None,
    Bool,
    Int,     ///< fits int64
    BigInt,  ///< wider integer: little-endian two's complement bytes
    Float,
    Complex,
    Str,
    Bytes,
    List,
    Tuple,
    Dict,
    Set,
    Global,
    Object,
    Tensor,
  };
  using Items = std::vector<Value>;
  using Pairs = std::vector<std::pair<Value, Value>>;

  Value() = default;  ///< None
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value big_integer(std::string le_bytes);
  static Value real(double d);
  static Value complex(double re, double im);
  static Value str(std::string s);
  static Value bytes(std::string b);
  static Value list(Items items = {});
  static Value tuple(Items items = {});
  static Value dict(Pairs pairs = {});
  static Value set(Items items = {});
  static Value global(std::string module, std::string name);
  static Value object(Global cls, Value args, std::uint64_t offset = 0);
  static Value tensor(Tensor t);

  Kind kind() const noexcept { return kind_; }
  bool is_none() const noexcept { return kind_ == Kind::None; }
  bool is(Kind k) const noexcept { return kind_ == k; }
  /// True for List, Tuple, Dict, Set and Object.
  bool is_container() const noexcept;
  /// "int", "dict", "tensor", ... (Python's names where there is one).
  std::string_view kind_name() const noexcept;
  static std::string_view kind_name(Kind k) noexcept;

  // Accessors. Each throws Error(corrupt) naming the expected and actual kind.
  bool as_bool() const;
  std::int64_t as_int() const;
  double as_float() const;  ///< Float, or Int/Bool widened
  std::pair<double, double> as_complex() const;
  const std::string& as_str() const;
  const std::string& as_bytes() const;  ///< Bytes (or BigInt's raw bytes)
  const Items& items() const;            ///< List, Tuple or Set
  const Pairs& pairs() const;            ///< Dict
  const Global& as_global() const;
  const Object& as_object() const;
  const Tensor& as_tensor() const;

  /// Dict lookup by string key; nullptr when absent or not a dict.
  const Value* find(std::string_view key) const;
  /// Number of items or pairs of a container (0 for scalars).
  std::size_t size() const noexcept;

  // Building (used by readers). Each throws Error(corrupt) when this value is
  // not the right container or is sealed, and seals what it inserts.
  void append(Value item);                ///< List, Set
  void insert(Value key, Value value);    ///< Dict (a repeated key replaces the value, as in Python)
  void set_state(Value state);            ///< Object (BUILD)
  /// Makes room for `n` items or pairs in a list, tuple, set or dict (a
  /// hint: does nothing for other values or sealed containers).
  void reserve(std::size_t n);
  /// Marks this container as nested somewhere: it can no longer change.
  void seal() const noexcept;

  /// Nesting depth: 0 for scalars, 1 + the deepest child for containers.
  std::uint32_t depth() const noexcept;
  /// Values in this subtree counting shared references each time (>= 1).
  std::uint64_t weight() const noexcept;
  /// Address of the shared node (nullptr for scalars): equal for two handles
  /// of the same Python object.
  const void* identity() const noexcept { return node_.get(); }

  /// Python-like rendering, shortened past `max_items` items per container.
  std::string repr(std::size_t max_items = 8) const;

 private:
  struct Node;
  struct ListNode;
  struct DictNode;
  struct ObjectNode;
  struct StrNode;
  struct TensorNode;
  struct GlobalNode;
  template <class N>
  N& node_as(Kind k) const;
  void absorb(const Value& child);

  Kind kind_ = Kind::None;
  union {
    bool b_;
    std::int64_t i_;
    double f_;
  };
  std::shared_ptr<Node> node_;
};

struct Object {
  Global cls;
  Value args;   ///< a tuple
  Value state;  ///< None until BUILD
  /// Byte offset of the opcode that made the object, in the file, for messages.
  std::uint64_t offset = 0;
};

/// Lines of Python-like text for a value tree with tensors hidden: dict
/// entries and list items that hold only tensors are dropped. This is what
/// `torchport inspect` shows as "values". Returns None when nothing is left.
Value prune_tensors(const Value& v);

/// JSON text for a value tree (tensors as {"tensor": "F32[3, 4]"}, bytes as
/// {"bytes": N}, non-string keys rendered as strings). `indent` < 0 is compact.
std::string to_json(const Value& v, int indent = -1);

}  // namespace torchport
