// NameTree (dotted names at their dots) and module_tree().

#include "torchport/formats/module_tree.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

// The key of a child: its parent's index in 8 bytes, then its segment.
void child_key(std::string& key, std::size_t parent, std::string_view segment) {
  const std::uint64_t p = parent;
  key.assign(sizeof p, '\0');
  std::memcpy(key.data(), &p, sizeof p);
  key.append(segment);
}

// A canonical non-negative integer: digits, no leading zero, fits size_t.
bool parse_index(std::string_view s, std::size_t& out) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string dotted_path(std::size_t index, std::size_t count,
                        const auto& name_of /* (i) -> const std::string& */,
                        const auto& parent_of /* (i) -> std::size_t */) {
  if (index >= count)
    throw Error(ErrorCode::invalid_argument, "node " + std::to_string(index) + " of a tree of " +
                                                 std::to_string(count) + " nodes");
  std::vector<std::size_t> up;
  for (std::size_t i = index; i != 0 && i != NameTree::npos; i = parent_of(i)) up.push_back(i);
  std::string out;
  for (auto it = up.rbegin(); it != up.rend(); ++it) {
    if (it != up.rbegin()) out += '.';
    out += name_of(*it);
  }
  return out;
}

}  // namespace

NameTree::NameTree() : nodes_(1) {}

std::size_t NameTree::child(std::size_t parent, std::string_view segment) const {
  std::string key;
  child_key(key, parent, segment);
  const auto it = children_.find(key);
  return it == children_.end() ? npos : it->second;
}

std::size_t NameTree::insert(std::string_view name, std::size_t leaf) {
  std::size_t node = 0;
  std::string key;
  for (std::size_t start = 0;;) {
    const std::size_t dot = name.find('.', start);
    const std::string_view segment =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    child_key(key, node, segment);
    const auto [it, fresh] = children_.try_emplace(key, nodes_.size());
    if (fresh) {
      nodes_[node].children.push_back(nodes_.size());
      nodes_.push_back(Node{std::string(segment), node, {}, npos});
    }
    node = it->second;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (nodes_[node].leaf == npos) nodes_[node].leaf = leaf;
  return node;
}

const NameTree::Node& NameTree::node(std::size_t index) const {
  if (index >= nodes_.size())
    throw Error(ErrorCode::invalid_argument, "node " + std::to_string(index) + " of a tree of " +
                                                 std::to_string(nodes_.size()) + " nodes");
  return nodes_[index];
}

std::size_t NameTree::find(std::string_view name) const {
  std::size_t node = 0;
  for (std::size_t start = 0;;) {
    const std::size_t dot = name.find('.', start);
    node = child(node, name.substr(start, dot == std::string_view::npos ? std::string_view::npos
                                                                        : dot - start));
    if (node == npos || dot == std::string_view::npos) return node;
    start = dot + 1;
  }
}

std::string NameTree::path(std::size_t index) const {
  return dotted_path(
      index, nodes_.size(), [this](std::size_t i) -> const std::string& { return nodes_[i].name; },
      [this](std::size_t i) { return nodes_[i].parent; });
}

std::optional<std::vector<std::pair<std::size_t, std::size_t>>> NameTree::indexed_children(
    std::size_t index) const {
  const Node& n = node(index);
  if (n.children.empty()) return std::nullopt;
  std::vector<std::pair<std::size_t, std::size_t>> out;
  out.reserve(n.children.size());
  for (const std::size_t c : n.children) {
    std::size_t i;
    if (!parse_index(nodes_[c].name, i)) return std::nullopt;
    out.emplace_back(i, c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ModuleTree::path(std::size_t index) const {
  return dotted_path(
      index, nodes.size(), [this](std::size_t i) -> const std::string& { return nodes[i].name; },
      [this](std::size_t i) { return nodes[i].parent; });
}

ModuleTree module_tree(const TensorCatalog& catalog) try {
  NameTree names;
  const auto& tensors = catalog.tensors();
  std::vector<std::size_t> ends(tensors.size());  // the node each name ends at
  for (std::size_t i = 0; i < tensors.size(); ++i) ends[i] = names.insert(tensors[i].name, i);
  ModuleTree tree;
  tree.nodes.reserve(names.size());
  for (const auto& n : names.nodes())
    tree.nodes.push_back(ModuleTree::Node{n.name, n.parent, n.children, n.leaf, 0, 0, 0});
  // Each tensor counts in its node and every node above it: linear in the
  // total number of segments, as the insertion.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].tensor;
    const auto numel = static_cast<std::uint64_t>(t.numel());
    const std::uint64_t bytes = t.nbytes();
    for (std::size_t n = ends[i]; n != ModuleTree::npos; n = tree.nodes[n].parent) {
      tree.nodes[n].tensors += 1;
      tree.nodes[n].params += numel;
      tree.nodes[n].bytes += bytes;
    }
  }
  return tree;
} catch (...) {
  rethrow_as_error("module_tree");
}

}  // namespace torchport
