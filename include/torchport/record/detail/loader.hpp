#pragma once
/// \file
/// The engine of typed loading (internal): a non-template `Loader` that knows
/// the file's tree, and the `load_into` templates that walk a module's fields.

#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/precision.hpp"
#include "torchport/record/report.hpp"

namespace torchport::detail {

class Provenance;

/// Where the loader stands in the file's tree: a level or a leaf of the
/// file's keys (unflattened without building a tree of values), or a value
/// (a subtree an adapter made, or inside one). Empty where the file has
/// nothing.
class LoadNode {
 public:
  LoadNode() = default;
  /// A value (viewed: the caller keeps it alive).
  explicit LoadNode(const Value* value) noexcept : value_(value) {}
  /// Node `trie` of the key trie.
  static LoadNode key(std::uint32_t trie) noexcept {
    LoadNode n;
    n.trie_ = trie;
    return n;
  }
  explicit operator bool() const noexcept { return value_ != nullptr || trie_ != kNone; }
  const Value* value() const noexcept { return value_; }  ///< the value, or null
  std::uint32_t trie() const noexcept { return trie_; }   ///< the trie node, or UINT32_MAX

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  const Value* value_ = nullptr;
  std::uint32_t trie_ = kNone;
};

/// What a load converts to and where it leaves the bytes.
struct LoadSettings {
  /// Target dtypes; empty means "the dtype of the field's initial tensor, or
  /// Full when the field has none".
  std::optional<Precision> precision;
  Residence residence = Residence::mapped;
  AdapterChain adapters;
  bool dequantize = false;  ///< LoadArgs::dequantize
};

/// Walks the file's tree alongside a module, filling fields and recording
/// what it does in a `LoadReport`.
class Loader {
 public:
  Loader(LoadSettings settings, LoadReport& report, std::shared_ptr<Provenance> provenance);
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  ~Loader();

  /// The root of the file's tree.
  LoadNode root() const;
  /// The child `name` of a map node (empty when absent or `node` is empty);
  /// of a sequence node, item `name` when it is an index.
  LoadNode child(LoadNode node, std::string_view name) const;
  /// Number of items of a sequence node: a list, or a dict whose keys are all
  /// integers (taken in increasing order). \throws Error(corrupt) otherwise.
  std::size_t length(LoadNode node, const std::string& path) const;
  /// Item `i` of a sequence node (see `length`).
  LoadNode item(LoadNode node, std::size_t i) const;
  /// The keys of a map node, in order.
  std::vector<std::string> keys(LoadNode node, const std::string& path) const;

  /// Runs the adapters' `import_module` for the module `module`.
  Value adapt(const ModuleInfo& module, LoadNode node, const std::string& path);
  /// Fills a tensor field from `node` (checks shape, converts dtype).
  void tensor(LoadNode node, const std::string& path, Tensor& field);
  /// The scalar at `node` (a value, or a one-element tensor) as a Value of
  /// kind Bool, Int, Float or Str; nullopt when `node` is empty (reported missing).
  std::optional<Value> scalar(LoadNode node, const std::string& path, const std::string& type);
  /// Records a field the file lacks.
  void missing(const std::string& path, std::string type);
  /// Records an optional field the file lacks (left empty).
  void absent(const std::string& path);
  /// Drops the mapped pages the load copied from that are still resident
  /// (they go a few ranges at a time, not a system call a tensor).
  void finish();

  /// A loader that only checks (no conversion), reporting into `scratch`:
  /// used to find which alternative of an enum module the file matches.
  Loader trial(LoadReport& scratch) const;
  bool is_trial() const noexcept { return trial_; }
  /// Number of the file's keys this loader consumed so far.
  std::size_t consumed() const;
  /// For each leaf of the provenance (by index): whether a field consumed it.
  std::vector<bool> used() const;
  /// Where the tree's leaves came from.
  const Provenance& provenance() const noexcept { return *provenance_; }

 private:
  struct Pending;  // pages not dropped yet
  void consume(std::uint32_t leaf, const Value* value, const std::string& path);
  // The tensor at a leaf of the trie, or at a value; throws when it is none.
  Tensor leaf_tensor(LoadNode node, const std::string& path, std::uint32_t& leaf) const;

  LoadSettings settings_;
  LoadReport* report_;
  std::shared_ptr<Provenance> provenance_;
  std::vector<std::uint64_t> consumed_;  // bit per provenance index
  // Leaves of no known index, by path (ordered: a file's names, see
  // formats/module_tree.hpp).
  std::set<std::string, std::less<>> consumed_paths_;
  std::unique_ptr<Pending> pending_;
  bool trial_ = false;
};

// The key path of the field being loaded is one buffer for the whole load:
// a segment is appended before a field is loaded and cut off after (also
// when the load throws), instead of a new string for every field and
// level (four a tensor of `layers.3.experts.5.w`).
class PathSegment {
 public:
  PathSegment(std::string& path, std::string_view name) : path_(path), size_(path.size()) {
    if (!path.empty()) path += '.';
    path += name;
  }
  PathSegment(const PathSegment&) = delete;
  PathSegment& operator=(const PathSegment&) = delete;
  ~PathSegment() { path_.resize(size_); }

 private:
  std::string& path_;
  std::size_t size_;
};

template <class T>
void load_into(Loader& ld, LoadNode node, std::string& path, T& field);

// Loads `field` at `path` + "." + `name`.
template <class T>
void load_field(Loader& ld, LoadNode node, std::string& path, std::string_view name, T& field) {
  const PathSegment segment(path, name);
  load_into(ld, node, path, field);
}

template <class T>
void load_scalar(Loader& ld, LoadNode node, const std::string& path, T& field) {
  const std::optional<Value> v = ld.scalar(node, path, type_name<T>());
  if (!v) return;
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      field = v->as_str();
    } else if constexpr (std::is_same_v<T, bool>) {
      field = v->is(Value::Kind::Bool) ? v->as_bool() : v->as_int() != 0;
    } else if constexpr (std::is_integral_v<T>) {
      const std::int64_t i = v->as_int();
      if constexpr (std::is_unsigned_v<T>) {
        if (i < 0 || static_cast<std::uint64_t>(i) > std::numeric_limits<T>::max())
          throw Error(ErrorCode::dtype_mismatch,
                      std::to_string(i) + " does not fit a " + type_name<T>());
      } else {
        if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max())
          throw Error(ErrorCode::dtype_mismatch,
                      std::to_string(i) + " does not fit a " + type_name<T>());
      }
      field = static_cast<T>(i);
    } else {
      field = static_cast<T>(v->as_float());
    }
  } catch (const Error& e) {
    throw Error(e.code(), e.message(), path);
  }
}

template <class T>
void load_sequence(Loader& ld, LoadNode node, std::string& path, T& seq, bool resizable) {
  if (!node && seq.empty()) {
    ld.missing(path, type_name<T>());
    return;
  }
  const std::size_t n = node ? ld.length(node, path) : 0;
  if constexpr (requires { seq.resize(n); })
    if (resizable && seq.empty()) seq.resize(n);
  std::size_t i = 0;
  for (auto& item : seq) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, i).ptr;
    load_field(ld, i < n ? ld.item(node, i) : LoadNode{}, path,
               std::string_view(digits, static_cast<std::size_t>(end - digits)), item);
    ++i;
  }
  // Items past the module's length stay unconsumed: the report lists them.
}

template <class... A>
void load_variant(Loader& ld, LoadNode node, std::string& path, std::variant<A...>& field) {
  if (!node) {
    ld.missing(path, type_name<std::variant<A...>>());
    return;
  }
  // Try each alternative without converting anything; keep the one that
  // leaves nothing missing or mismatched and uses the most keys (ties go
  // to the alternative already held, then to the first).
  std::size_t best = sizeof...(A);
  std::size_t best_bad = std::numeric_limits<std::size_t>::max(), best_used = 0;
  auto score = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    using Alt = std::variant_alternative_t<I, std::variant<A...>>;
    LoadReport scratch;
    Loader trial = ld.trial(scratch);
    Alt candidate = field.index() == I ? std::get<I>(field) : Alt{};
    load_into(trial, node, path, candidate);
    const std::size_t bad = scratch.missing.size() + scratch.mismatched.size();
    const std::size_t used = trial.consumed();
    const bool better = bad < best_bad || (bad == best_bad && used > best_used) ||
                        (bad == best_bad && used == best_used && I == field.index());
    if (better) {
      best = I;
      best_bad = bad;
      best_used = used;
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (score(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::index_sequence_for<A...>{});
  auto apply = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    if (I != best) return;
    using Alt = std::variant_alternative_t<I, std::variant<A...>>;
    if (field.index() != I) field.template emplace<I>(Alt{});
    load_into(ld, node, path, std::get<I>(field));
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (apply(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::index_sequence_for<A...>{});
}

template <class T>
void load_into(Loader& ld, LoadNode node, std::string& path, T& field) {
  if constexpr (std::is_same_v<T, Tensor>) {
    ld.tensor(node, path, field);
  } else if constexpr (Module<T>) {
    Value adapted;
    if constexpr (AdaptedModule<T>) {
      if (node) {
        adapted = ld.adapt(module_info<T>(), node, path);
        node = LoadNode(&adapted);
      }
    }
    visit_fields(field, [&](const char* name, auto& f) {
      load_field(ld, ld.child(node, name), path, name, f);
    });
  } else if constexpr (is_optional<T>::value) {
    if (!node) {
      // An engaged optional is part of the module as built (a convolution
      // constructed with its bias): the file lacking it is a missing field,
      // as torch's load_state_dict reports it, and the field keeps its
      // value. An empty one stays empty.
      if (field) {
        load_into(ld, LoadNode{}, path, *field);
        return;
      }
      ld.absent(path);
      return;
    }
    typename T::value_type value = field ? std::move(*field) : typename T::value_type{};
    load_into(ld, node, path, value);
    field = std::move(value);
  } else if constexpr (is_vector<T>::value) {
    load_sequence(ld, node, path, field, true);
  } else if constexpr (is_array<T>::value) {
    load_sequence(ld, node, path, field, false);
  } else if constexpr (is_string_map<T>::value) {
    if (!node) {
      if (field.empty()) ld.missing(path, type_name<T>());
      for (auto& [k, v] : field) load_field(ld, LoadNode{}, path, k, v);
      return;
    }
    if (field.empty())
      for (const auto& k : ld.keys(node, path)) field.emplace(k, typename T::mapped_type{});
    for (auto& [k, v] : field) load_field(ld, ld.child(node, k), path, k, v);
  } else if constexpr (is_variant<T>::value) {
    load_variant(ld, node, path, field);
  } else if constexpr (is_scalar_v<T> || std::is_same_v<T, std::string>) {
    load_scalar(ld, node, path, field);
  } else {
    static_assert(sizeof(T) == 0,
                  "this field type cannot be recorded; see torchport/record/fields.hpp");
  }
}

}  // namespace torchport::detail
