#pragma once
/// \file
/// `Value`: the inert data tree a pickle (or a JSON header, or a record file)
/// describes. Nothing in it can run.
///
/// The model and Python key equality are in src/core/value.cpp, `repr` in
/// value_repr.cpp, `to_json` in value_json.cpp; the "values" view that hides
/// tensors (`prune_tensors`) is in torchport/formats/prune.hpp.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "torchport/core/tensor.hpp"

namespace torchport {

class Value;

namespace detail {
/// The head of every node of a `Value` tree (the rest of the node is
/// private to value.cpp): its reference count (see `CountedRef`).
struct ValueNodeHead {
  RefCount refs;
};
/// Deletes a node whose last reference went (value.cpp knows its type).
void destroy_value_node(const ValueNodeHead* node) noexcept;
/// A counted reference to a node; copies share it.
using ValueNodeRef = CountedRef<ValueNodeHead, destroy_value_node>;
}  // namespace detail

/// A reference to a Python global (`module.name`), never resolved.
struct Global {
  std::string module;  ///< the module path ("collections", "torch._utils")
  std::string name;    ///< the name inside the module ("OrderedDict")
  /// "module.name".
  std::string qualified() const { return module + "." + name; }
  /// True when this is `m.n` (both compared exactly).
  bool is(std::string_view m, std::string_view n) const { return module == m && name == n; }
};

struct Object;  // defined after Value

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
  /// What a value holds; one per Python type the tree can describe.
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
  using Items = std::vector<Value>;                    ///< the items of a list, tuple or set
  using Pairs = std::vector<std::pair<Value, Value>>;  ///< a dict's (key, value) pairs, in order

  Value() = default;  ///< None

  /// \name Factories
  /// One per kind. The container factories seal the values they are given
  /// (see `seal()`).
  ///@{
  static Value boolean(bool b);          ///< a Bool
  static Value integer(std::int64_t i);  ///< an Int
  /// A BigInt from its little-endian two's complement bytes (an integer wider than int64).
  static Value big_integer(std::string le_bytes);
  static Value real(double d);                 ///< a Float
  static Value complex(double re, double im);  ///< a Complex: real and imaginary parts
  static Value str(std::string s);             ///< a Str (UTF-8)
  static Value bytes(std::string b);           ///< a Bytes, raw
  static Value list(Items items = {});         ///< a List of `items`
  static Value tuple(Items items = {});        ///< a Tuple of `items`
  static Value dict(Pairs pairs = {});         ///< a Dict; a repeated key keeps the last value
  static Value set(Items items = {});          ///< a Set of `items`, in the order given
  /// An empty Dict that a pickle made as collections.OrderedDict (a writer
  /// gives it back as one; it is a Dict in every other way).
  static Value ordered_dict();
  /// A Global reference to `module.name`, never resolved.
  static Value global(std::string module, std::string name);
  /// An Object of class `cls` made with `args` (a tuple), without state;
  /// `offset` is the byte offset of the opcode that made it, for messages.
  /// `newobj`: made by NEWOBJ (`cls.__new__(cls, *args)`), not by a call.
  static Value object(Global cls, Value args, std::uint64_t offset = 0, bool newobj = false);
  static Value tensor(Tensor t);  ///< a Tensor
  /// A typed storage, what torch's persistent_load gives: a Tensor kind
  /// (1-D, over all of `t`'s storage) that `is_storage()` tells apart from
  /// the tensors rebuilt over it, as Python tells a storage from a tensor.
  static Value storage(Tensor t);
  ///@}

  Kind kind() const noexcept { return kind_; }                   ///< what this value holds
  bool is_none() const noexcept { return kind_ == Kind::None; }  ///< `kind() == Kind::None`
  bool is(Kind k) const noexcept { return kind_ == k; }          ///< `kind() == k`
  /// True for List, Tuple, Dict, Set and Object.
  bool is_container() const noexcept;
  /// "int", "dict", "tensor", ... (Python's names where there is one).
  std::string_view kind_name() const noexcept;
  /// The name of kind `k`, as `kind_name()` gives it (BigInt is "int").
  static std::string_view kind_name(Kind k) noexcept;

  /// \name Accessors
  /// Each throws Error(corrupt) naming the expected and actual kind.
  ///@{
  bool as_bool() const;                          ///< Bool
  std::int64_t as_int() const;                   ///< Int, or Bool as 0/1
  double as_float() const;                       ///< Float, or Int/Bool widened
  std::pair<double, double> as_complex() const;  ///< Complex, as (real, imaginary)
  const std::string& as_str() const;             ///< Str
  const std::string& as_bytes() const;           ///< Bytes (or BigInt's raw bytes)
  const Items& items() const;                    ///< List, Tuple or Set
  const Pairs& pairs() const;                    ///< Dict
  const Global& as_global() const;               ///< Global
  const Object& as_object() const;               ///< Object
  const Tensor& as_tensor() const;               ///< Tensor
  ///@}

  /// Dict lookup by string key; nullptr when absent or not a dict.
  const Value* find(std::string_view key) const;
  /// Number of items or pairs of a container (0 for scalars).
  std::size_t size() const noexcept;

  // Building (used by readers). Each throws Error(corrupt) when this value is
  // not the right container or is sealed, and seals what it inserts.
  void append(Value item);  ///< List, Set
  /// List: replaces item `i` (< size()), as Python's `list[i] = item`.
  void set_item(std::size_t i, Value item);
  void insert(Value key, Value value);  ///< Dict (a repeated key replaces the value, as in Python)
  void set_state(Value state);          ///< Object (BUILD)
  /// Tensor (BUILD): replaces the tensor this value holds, for every handle
  /// of it (as Python mutates an object in place); refused once sealed.
  void set_tensor(Tensor t);
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
  /// A Tensor that a pickle made as a numpy array (a writer gives it back
  /// as one: it is a Tensor in every other way). `numpy2`: the pickle
  /// spelled numpy's core module as numpy 2 does (numpy._core, not
  /// numpy.core), which a writer keeps: torch's weights_only allow-list
  /// matches globals by that name.
  static Value numpy_array(Tensor t, bool numpy2 = false);
  /// True for a Tensor made by `numpy_array()` (and its handles).
  bool is_numpy_array() const noexcept;
  /// How the pickle that made this numpy array spelled numpy's core module:
  /// "numpy._core" (numpy 2) or "numpy.core" (numpy 1, and any other value).
  std::string_view numpy_core_module() const noexcept;
  /// True for a Dict made by `ordered_dict()` (and its handles).
  bool is_ordered_dict() const noexcept;
  /// True for a value made by `storage()` (and its handles).
  bool is_storage() const noexcept;

  /// Characters `repr` produces at most (before its closing "...").
  static constexpr std::size_t kReprChars = 1024;
  /// Bytes of one string or bytes object `repr` shows before eliding the rest.
  static constexpr std::size_t kReprStringChars = 200;

  /// Python-like rendering, shortened past `max_items` items per container,
  /// past `kReprStringChars` bytes per string and past `kReprChars` characters
  /// in all. Its cost is bounded by that budget, whatever the tree (a DAG
  /// whose shared references expand exponentially costs no more).
  std::string repr(std::size_t max_items = 8) const { return repr(max_items, kReprChars); }
  /// The same with a budget of `max_chars` characters.
  std::string repr(std::size_t max_items, std::size_t max_chars) const;

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
  // The node, typed (null for scalars). Inline, and defined in value.cpp,
  // the only user: an exported function of a shared library is not
  // inlined (it could be interposed), and this is called per node.
  inline Node* node() const noexcept;
  void absorb(const Value& child);
  friend struct ValueAccess;  // key hashing and equality in value.cpp

  Kind kind_ = Kind::None;
  union {
    bool b_;
    std::int64_t i_;
    double f_;
  };
  detail::ValueNodeRef node_;
};

/// An inert Python object: the class (or callable) it names, the arguments it
/// was made with, and the state BUILD gave it. Never instantiated.
struct Object {
  Global cls;   ///< the class or callable the pickle called
  Value args;   ///< a tuple
  Value state;  ///< None until BUILD
  /// Byte offset of the opcode that made the object, in the file, for messages.
  std::uint64_t offset = 0;
  /// Made by NEWOBJ (`cls.__new__(cls, *args)`, which runs no `__init__`),
  /// not by REDUCE, INST or OBJ (`cls(*args)`).
  bool newobj = false;
};

/// Bounds of `to_json`'s output.
struct JsonBudget {
  /// Characters of output; past them, each open container ends with a
  /// `"...": "truncated"` member (objects) or a `"... truncated"` item (arrays).
  std::size_t max_chars = 64u << 20;
  /// Bytes of one string shown; a longer one ends with "... (N bytes)".
  std::size_t max_string_bytes = 64u << 10;
};

/// JSON text for a value tree (tensors as {"tensor": "F32[3, 4]"}, bytes as
/// {"bytes": N}, non-string keys rendered as strings by `repr`). `indent` < 0
/// is compact. A container of more than 16 values or a string of more than
/// 64 bytes that is reached again (a shared reference of the pickle) is
/// printed once; later occurrences are {"shared": N}, N counting such
/// values from 0 in printing order.
/// So the output is linear in the tree's distinct nodes and bounded by
/// `budget`; invalid UTF-8 is replaced by U+FFFD.
std::string to_json(const Value& v, int indent = -1, const JsonBudget& budget = {});

/// Python's repr of a float, as `repr` and `to_json` print one: the
/// shortest digits that read back to the same double ("0.9", not
/// "0.90000000000000002"), in fixed notation from 1e-4 up to below 1e16,
/// else with an exponent ("1e-05", "1e+16"); "inf", "-inf", "nan".
/// `dot_zero` writes a whole number as "2.0" (a float's repr does, a
/// complex's parts do not: "(1+2j)").
std::string float_repr(double d, bool dot_zero = true);

}  // namespace torchport
