#pragma once
/// \file
/// Dotted names unflattened at their dots: `NameTree` (the splitting the
/// typed loader's tree and `module_tree()` share) and `module_tree()` (a
/// catalogue's nested module structure with each subtree's counts, what
/// `torchport inspect --tree` shows).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "torchport/formats/catalog.hpp"

namespace torchport {

/// Names split at every '.' into a tree of segments: "layer1.0.conv1.weight"
/// is the path layer1 -> 0 -> conv1 -> weight from the root. Names sharing
/// a prefix share its nodes; children keep the order in which they were
/// first inserted. Every segment is kept as it is, empty ones too ("a..b"
/// has three segments; "" has one, empty); a name can end at a node that
/// other names pass through ("x" and "x.y").
///
/// Building is linear in the total length of the names (children are found
/// by hash). A value type: copies are independent.
class NameTree {
 public:
  /// "No node" / "no leaf".
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  /// One segment of one or more names.
  struct Node {
    std::string name;                   ///< the segment; empty for the root
    std::size_t parent = npos;          ///< the parent's index; npos for the root
    std::vector<std::size_t> children;  ///< the children's indices, in order of first insertion
    /// The `leaf` given to `insert()` with the name that ends here (the
    /// first one, when several did), else npos.
    std::size_t leaf = npos;
  };

  /// A tree of the root alone (node 0).
  NameTree();

  /// Adds `name`: the nodes of its segments below the root (existing ones
  /// reused), and `leaf` on its last node unless that node has one already.
  /// Returns the index of the last node: its `leaf` differs from `leaf`
  /// when the name had been inserted before.
  std::size_t insert(std::string_view name, std::size_t leaf);

  /// The node at `index` (0: the root). \throws Error(invalid_argument) when out of range.
  const Node& node(std::size_t index) const;
  /// Every node; `nodes()[0]` is the root, a parent comes before its children.
  const std::vector<Node>& nodes() const noexcept { return nodes_; }
  /// Number of nodes, the root included.
  std::size_t size() const noexcept { return nodes_.size(); }
  /// The node `name` ends at, or npos when it was never inserted (nor is a
  /// prefix of an inserted name at a dot).
  std::size_t find(std::string_view name) const;
  /// The dotted name of the path from the root to `index` ("" for the root).
  /// \throws Error(invalid_argument) when out of range.
  std::string path(std::size_t index) const;

  /// When the children of `index` are all named by canonical non-negative
  /// integers ("0", "12"; not "01", "-1", "+1"), as an nn.Sequential or
  /// ModuleList names its items: the (integer, child index) pairs sorted by
  /// integer. Otherwise, or when there are no children, nullopt.
  std::optional<std::vector<std::pair<std::size_t, std::size_t>>> indexed_children(
      std::size_t index) const;

 private:
  std::size_t child(std::size_t parent, std::string_view segment) const;

  std::vector<Node> nodes_;
  /// (parent index, segment) -> child index; keys are the parent's index in
  /// 8 bytes followed by the segment.
  // Ordered, not hashed: the names are a file's, and a hash a file can
  // predict lets it make every lookup a scan (detail/hash.hpp, not
  // installed, has the seeded tables).
  std::map<std::string, std::size_t, std::less<>> children_;
};

/// A catalogue's nested module structure: the tensor names unflattened at
/// their dots, as `NameTree` splits them, with what each subtree holds.
/// Indices in numbered levels ("blocks.0", "blocks.2") are kept as the file
/// names them.
struct ModuleTree {
  /// "No node" / "no tensor".
  static constexpr std::size_t npos = NameTree::npos;

  /// A module, a tensor, or both (a tensor whose name is also a prefix).
  struct Node {
    std::string name;                   ///< the segment ("conv1"); empty for the root
    std::size_t parent = npos;          ///< the parent's index; npos for the root
    std::vector<std::size_t> children;  ///< in the catalogue's order of their first tensors
    /// The index, in the catalogue's `tensors()`, of the tensor this node's
    /// path names, or npos.
    std::size_t tensor = npos;
    std::uint64_t tensors = 0;  ///< tensors in the subtree, this node's included
    std::uint64_t params = 0;   ///< their elements (`numel()`, summed)
    std::uint64_t bytes = 0;    ///< their `nbytes()`, summed (shared storages count each time)
  };

  /// The nodes; `nodes[0]` is the root (the whole catalogue), a parent
  /// comes before its children.
  std::vector<Node> nodes;

  /// The root: the totals of the whole catalogue.
  const Node& root() const { return nodes.front(); }
  /// The dotted name from the root to node `index` ("" for the root).
  /// \throws Error(invalid_argument) when out of range.
  std::string path(std::size_t index) const;
};

/// The nested module structure of `catalog`'s tensor names (see
/// `ModuleTree`). Reads no tensor bytes. Its `tensor` indices refer to
/// `catalog.tensors()`; the tree holds no reference to the catalogue.
ModuleTree module_tree(const TensorCatalog& catalog);

}  // namespace torchport
