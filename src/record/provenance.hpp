#pragma once
// The loader's tree of a catalogue's keys (internal to src/record): the
// trie it walks instead of a tree of values, and the provenance of each
// leaf (which tensor or scalar it is, what adapters derived from it).

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>

#include "torchport/detail/hash.hpp"
#include "torchport/record/load.hpp"

namespace torchport::detail {

inline bool parse_index(std::string_view s, std::size_t& out) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

inline std::string key_text(const Value& k) {
  if (k.is(Value::Kind::Str)) return k.as_str();
  if (k.is(Value::Kind::Int)) return std::to_string(k.as_int());
  return k.repr();
}

// A dict whose keys are all non-negative integers, as (index, value) sorted.
inline bool numeric_items(const Value& node,
                          std::vector<std::pair<std::size_t, const Value*>>& out) {
  out.clear();
  for (const auto& [k, v] : node.pairs()) {
    std::size_t i;
    if (k.is(Value::Kind::Int) && k.as_int() >= 0)
      i = static_cast<std::size_t>(k.as_int());
    else if (!k.is(Value::Kind::Str) || !parse_index(k.as_str(), i))
      return false;
    out.emplace_back(i, &v);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return true;
}

// Dotted keys, unflattened: segments are levels (split as NameTree splits
// them); a level whose keys are all integers is a list, in increasing order,
// gaps closed (fc.0, fc.2, fc.4 -> fc[0], fc[1], fc[2], as nn.Sequential
// with activations leaves them).
//
// The loader walks the trie itself: no tree of values is built for the
// file (a file of many small tensors paid a dict, a list item and a tensor
// value a tensor for it). A node is 32 bytes: its segment is a view into
// the key it was first met in, children are a linked list, and the
// (parent, segment) index is one open-addressed table of node numbers. A
// list level's children are also kept sorted by index, for `item`.
class Provenance;

class Trie {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  explicit Trie(const Provenance& keys) : keys_(keys), nodes_(1) {}

  void reserve(std::size_t leaves) { nodes_.reserve(leaves + leaves / 16 + 1); }

  // Adds leaf `leaf` (an index of the provenance) under its key.
  //
  // The segments it shares with the last key inserted are not looked up
  // again: a state_dict's keys come grouped (layers.3.experts.5.w, then
  // layers.3.experts.6.w), so most of a key's segments are its
  // predecessor's, and each lookup hashes the segment, probes a table as
  // large as the file's keys and compares key text (at 80,000 keys of five
  // segments: two lookups a key instead of five).
  void insert(std::uint32_t leaf) {
    const std::string_view key = key_of(leaf);
    if (key.size() > UINT32_MAX) throw Error(ErrorCode::limit_exceeded, "a key of 4 GiB or more");
    const std::string_view last = last_path_.empty() ? std::string_view() : key_of(last_leaf_);
    std::uint32_t node = 0;
    std::uint32_t prefix = kNone;  // the shallowest ancestor that is a value
    std::size_t depth = 0;
    bool shared = true;  // every segment so far is the last key's
    for (std::size_t start = 0;;) {
      const std::size_t dot = key.find('.', start);
      const std::size_t end = dot == std::string_view::npos ? key.size() : dot;
      if (node != 0 && prefix == kNone && nodes_[node].leaf != kNone) prefix = node;
      // Segment `depth` is the last key's when it ends where that one's did
      // with the same bytes (the bytes before it being the same already).
      shared = shared && depth < last_path_.size() && last_path_[depth].end == end &&
               key.substr(start, end - start) == last.substr(start, end - start);
      node = shared ? last_path_[depth].node
                    : child(node, leaf, static_cast<std::uint32_t>(start),
                            static_cast<std::uint32_t>(end - start));
      if (depth == path_.size()) path_.emplace_back();
      path_[depth++] = {node, static_cast<std::uint32_t>(end)};
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    path_.resize(depth);
    std::swap(path_, last_path_);
    last_leaf_ = leaf;
    if (prefix != kNone)
      throw Error(ErrorCode::corrupt,
                  "key is both a value and the prefix of '" + std::string(key) + "'", path(prefix));
    if (nodes_[node].leaf != kNone)
      throw Error(ErrorCode::corrupt, "two values for the same key (after remapping)",
                  std::string(key));
    if (nodes_[node].first != kNone)
      throw Error(ErrorCode::corrupt,
                  "key is both a value and the prefix of '" + path(nodes_[node].first) + "...'",
                  std::string(key));
    nodes_[node].leaf = leaf;
  }

  // After the last insert: which levels are lists, their children sorted.
  void finish() {
    if (nodes_.capacity() - nodes_.size() > nodes_.size() / 4) nodes_.shrink_to_fit();
    std::vector<std::pair<std::size_t, std::uint32_t>> items;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      Node& n = nodes_[i];
      n.last = kNone;  // from here on: where a list's children are listed
      items.clear();
      bool indexed = n.first != kNone;
      for (std::uint32_t c = n.first; c != kNone && indexed; c = nodes_[c].next) {
        std::size_t k;
        indexed = parse_index(segment(nodes_[c]), k);
        if (indexed) items.emplace_back(k, c);
      }
      if (!indexed) continue;
      std::sort(items.begin(), items.end());
      if (lists_.size() + items.size() + 1 > UINT32_MAX)
        throw Error(ErrorCode::limit_exceeded, "more than 2^32 - 2 key segments in one load");
      n.last = static_cast<std::uint32_t>(lists_.size());
      lists_.push_back(static_cast<std::uint32_t>(items.size()));
      for (const auto& [k, c] : items) lists_.push_back(c);
    }
    lists_.shrink_to_fit();
  }

  std::uint32_t leaf(std::uint32_t node) const { return nodes_[node].leaf; }
  bool is_list(std::uint32_t node) const { return nodes_[node].last != kNone; }
  // The number of children of a list level.
  std::size_t list_size(std::uint32_t node) const { return lists_[nodes_[node].last]; }
  // Child `i` of a list level, in index order (kNone past the end).
  std::uint32_t list_item(std::uint32_t node, std::size_t i) const {
    return i < list_size(node) ? lists_[nodes_[node].last + 1 + i] : kNone;
  }
  // The child named `seg` (kNone when there is none). A level of a few
  // children (a module's fields) is searched in its list, compared by
  // length first, without hashing or probing the table of every key.
  std::uint32_t find(std::uint32_t parent, std::string_view seg) const {
    constexpr int kListed = 8;
    std::uint32_t c = nodes_[parent].first;
    for (int i = 0; i < kListed && c != kNone; ++i, c = nodes_[c].next)
      if (nodes_[c].size == seg.size() && segment(nodes_[c]) == seg) return c;
    if (c == kNone || slots_.empty()) return kNone;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = hash(parent, seg) & mask; slots_[s] != 0; s = (s + 1) & mask) {
      const Node& n = nodes_[slots_[s] - 1];
      if (n.parent == parent && segment(n) == seg) return slots_[s] - 1;
    }
    return kNone;
  }
  // The children's segments, in the order the keys came.
  std::vector<std::string> segments(std::uint32_t node) const {
    std::vector<std::string> out;
    for (std::uint32_t c = nodes_[node].first; c != kNone; c = nodes_[c].next)
      out.emplace_back(segment(nodes_[c]));
    return out;
  }
  bool has_children(std::uint32_t node) const { return nodes_[node].first != kNone; }

  // The subtree at `node` as values: a dict or list a level, `leaf_value`
  // at the ends. Segment names repeated across levels ("weight", "w") share
  // one string value. For the adapters, and for messages.
  template <class LeafValue>
  Value build(std::uint32_t node, const LeafValue& leaf_value) const {
    detail::StringViewMap<Value> names;
    return build(node, leaf_value, names);
  }

 private:
  struct Node {
    std::uint32_t key = 0, offset = 0,
                  size = 0;  // the segment: key_of(key).substr(offset, size)
    std::uint32_t parent = kNone, first = kNone, last = kNone, next = kNone;
    std::uint32_t leaf = kNone;
  };

  std::string_view key_of(std::uint32_t leaf) const;  // the provenance's key
  std::string_view segment(const Node& n) const { return key_of(n.key).substr(n.offset, n.size); }
  static std::size_t hash(std::uint32_t parent, std::string_view seg) {
    return static_cast<std::size_t>(detail::seeded_hash(seg)) ^
           (std::size_t{parent} * 0x9E3779B97F4A7C15ULL);
  }

  // The child of `parent` named by `size` bytes at `offset` of key `key`,
  // made when missing.
  std::uint32_t child(std::uint32_t parent, std::uint32_t key, std::uint32_t offset,
                      std::uint32_t size) {
    const std::string_view seg = key_of(key).substr(offset, size);
    if (2 * (nodes_.size() + 1) > slots_.size()) rehash();
    const std::size_t mask = slots_.size() - 1;
    std::size_t s = hash(parent, seg) & mask;
    for (; slots_[s] != 0; s = (s + 1) & mask) {
      const Node& n = nodes_[slots_[s] - 1];
      if (n.parent == parent && segment(n) == seg) return slots_[s] - 1;
    }
    if (nodes_.size() >= kNone - 1)
      throw Error(ErrorCode::limit_exceeded, "more than 2^32 - 2 key segments in one load");
    const auto made = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(Node{key, offset, size, parent, kNone, kNone, kNone, kNone});
    Node& p = nodes_[parent];
    (p.first == kNone ? p.first : nodes_[p.last].next) = made;
    p.last = made;
    slots_[s] = made + 1;
    return made;
  }

  void rehash() {
    // At most half full after growing (slots of 4 bytes: 8 to 16 bytes a node).
    std::size_t cap = 64;
    while (cap < 4 * nodes_.size()) cap *= 2;
    std::vector<std::uint32_t> slots(cap, 0);
    const std::size_t mask = slots.size() - 1;
    for (std::uint32_t i = 1; i < nodes_.size(); ++i) {
      std::size_t s = hash(nodes_[i].parent, segment(nodes_[i])) & mask;
      while (slots[s] != 0) s = (s + 1) & mask;
      slots[s] = i + 1;
    }
    slots_ = std::move(slots);
  }

  std::string path(std::uint32_t node) const {
    std::vector<std::string_view> up;
    for (std::uint32_t i = node; i != 0 && i != kNone; i = nodes_[i].parent)
      up.push_back(segment(nodes_[i]));
    std::string out;
    for (auto it = up.rbegin(); it != up.rend(); ++it)
      out += (it == up.rbegin() ? "" : ".") + std::string(*it);
    return out;
  }

  template <class LeafValue>
  Value build(std::uint32_t node, const LeafValue& leaf_value,
              detail::StringViewMap<Value>& names) const {
    const Node& n = nodes_[node];
    if (n.leaf != kNone) return leaf_value(n.leaf);
    if (is_list(node)) {
      Value list = Value::list();
      for (std::size_t i = 0; i < list_size(node); ++i)
        list.append(build(list_item(node, i), leaf_value, names));
      return list;
    }
    Value dict = Value::dict();
    for (std::uint32_t c = n.first; c != kNone; c = nodes_[c].next) {
      const std::string_view seg = segment(nodes_[c]);
      auto it = names.find(seg);
      if (it == names.end()) it = names.emplace(seg, Value::str(std::string(seg))).first;
      dict.insert(it->second, build(c, leaf_value, names));
    }
    return dict;
  }

  const Provenance& keys_;
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> slots_;  // node index + 1; 0 is empty
  // The last key inserted (`last_leaf_`'s), as the node each of its
  // segments led to and the offset the segment ended at; `path_` is the
  // key being inserted (kept to reuse its memory).
  struct Step {
    std::uint32_t node, end;
  };
  std::vector<Step> last_path_, path_;
  std::uint32_t last_leaf_ = kNone;
  std::vector<std::uint32_t> lists_;  // for each list level: its size, then its children
};

// Where each leaf of the tree came from: the file's key (after remapping)
// and its tensor or scalar, by the leaf's index, and the key trie over
// them. Indices, not key strings, are what the loader passes around, and a
// leaf of the catalogue is its index there (4 bytes: its name is the key
// when no rule renames it, its tensor the leaf's): a file of many small
// tensors pays for each key once, in the catalogue.
//
// Adapters see values: the subtree of a module they adapt is built from
// the trie when they ask (`value_at`), each leaf's value made once and kept;
// tensors an adapter derived point to the index of the leaf they were made
// from (by the identity of their value). Scalars have no identity: they are
// found by their path, which adapters do not rename.
class Provenance : public AdapterContext {
 public:
  static constexpr std::uint32_t npos = UINT32_MAX;

  /// Leaves of `catalog` (which must outlive the load, or be kept with
  /// `keep`); `renames`: every key is owned (remap rules rename them).
  Provenance(const TensorCatalog& catalog, bool renames)
      : catalog_(&catalog), renames_(renames), trie_(*this) {}

  void reserve(std::size_t n) {
    source_.reserve(n);
    if (renames_) keys_.reserve(n);
    trie_.reserve(n);
  }
  /// Keeps `catalog` alive (a selection made for the load).
  void keep(std::shared_ptr<const TensorCatalog> catalog) { kept_ = std::move(catalog); }
  /// Adds tensor `index` of the catalogue as a leaf, under its name or (with
  /// renames) `renamed`; `replaced`, when defined, stands for its tensor (a
  /// rank's slice). Returns the leaf's index.
  std::uint32_t add_tensor(std::uint32_t index, std::string renamed, Tensor replaced) {
    const std::uint32_t i = next();
    source_.push_back(index);
    if (renames_) keys_.push_back(own(std::move(renamed)));
    if (replaced.defined()) replaced_.emplace(i, std::move(replaced));
    trie_.insert(i);
    return i;
  }
  /// Adds a scalar leaf under `key`. Returns its index.
  std::uint32_t add_scalar(std::string key, Value scalar) {
    const std::uint32_t i = next();
    source_.push_back(kScalar);
    const std::string_view k = own(std::move(key));
    if (renames_) keys_.push_back(k);
    scalars_.emplace(i, std::make_pair(k, std::move(scalar)));
    by_path_.emplace(std::string(k), i);
    trie_.insert(i);
    return i;
  }
  void finish() { trie_.finish(); }

  Value derive(Tensor t, const Value& from) override {
    Value v = Value::tensor(std::move(t));
    const auto it = origin_.find(from.identity());
    if (it != origin_.end()) origin_[v.identity()] = it->second;
    return v;
  }
  /// The index of the leaf value `leaf` reached at `path` (npos when it is
  /// no leaf of the file).
  std::uint32_t index_of(const Value& leaf, const std::string& path) const {
    if (leaf.identity() != nullptr) {
      const auto it = origin_.find(leaf.identity());
      if (it != origin_.end()) return it->second;
    }
    const auto it = by_path_.find(path);
    return it == by_path_.end() ? npos : it->second;
  }
  std::size_t size() const noexcept { return source_.size(); }
  std::string_view key_view(std::uint32_t i) const {
    if (renames_) return keys_[i];
    if (source_[i] == kScalar) return scalars_.at(i).first;
    return catalog_->tensors()[source_[i]].name;
  }
  std::string key(std::uint32_t i) const { return std::string(key_view(i)); }
  /// Leaf `i`'s tensor (undefined for a scalar).
  const Tensor& tensor(std::uint32_t i) const {
    static const Tensor none;
    if (source_[i] == kScalar) return none;
    if (!replaced_.empty())
      if (const auto it = replaced_.find(i); it != replaced_.end()) return it->second;
    return catalog_->tensors()[source_[i]].tensor;
  }
  /// Leaf `i` as a value: its scalar, or a tensor value made once (whose
  /// identity names it).
  const Value& leaf_value(std::uint32_t i) {
    if (source_[i] == kScalar) return scalars_.at(i).second;
    auto [it, fresh] = values_.try_emplace(i);
    if (fresh) {
      it->second = Value::tensor(tensor(i));
      origin_[it->second.identity()] = i;
    }
    return it->second;
  }
  /// The trie node `node` as values (see `leaf_value`).
  Value value_at(std::uint32_t node) {
    return trie_.build(node, [this](std::uint32_t i) { return leaf_value(i); });
  }
  /// The shape of leaf `i` as the file holds it (before the adapters);
  /// `otherwise` for a leaf that is no tensor.
  Shape file_shape(std::uint32_t i, const Shape& otherwise) const {
    return i < size() && tensor(i).defined() ? tensor(i).shape() : otherwise;
  }
  const Trie& trie() const noexcept { return trie_; }

 private:
  static constexpr std::uint32_t kScalar = UINT32_MAX;

  std::uint32_t next() const {
    if (source_.size() >= npos)
      throw Error(ErrorCode::limit_exceeded, "more than 2^32 - 1 keys in one load");
    return static_cast<std::uint32_t>(source_.size());
  }
  std::string_view own(std::string s) {
    owned_.push_back(std::move(s));
    return owned_.back();
  }

  const TensorCatalog* catalog_;
  std::shared_ptr<const TensorCatalog> kept_;
  bool renames_;
  std::vector<std::uint32_t> source_;                   // the catalogue's tensor index, or kScalar
  std::vector<std::string_view> keys_;                  // with renames: every key (in owned_)
  std::deque<std::string> owned_;                       // keys no catalogue name holds
  std::unordered_map<std::uint32_t, Tensor> replaced_;  // a rank's slices
  std::unordered_map<std::uint32_t, std::pair<std::string_view, Value>> scalars_;
  detail::StringMap<std::uint32_t> by_path_;         // scalars
  std::unordered_map<std::uint32_t, Value> values_;  // leaves made values for adapters
  std::unordered_map<const void*, std::uint32_t> origin_;
  Trie trie_;
};

inline std::string_view Trie::key_of(std::uint32_t leaf) const {
  return keys_.key_view(leaf);
}

}  // namespace torchport::detail
