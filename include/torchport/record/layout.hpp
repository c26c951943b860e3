#pragma once
/// \file
/// The vocabulary in which a module declares how PyTorch lays out its
/// record differently from it: which entries PyTorch names differently,
/// which 2-D tensors it stores transposed, and which fields it fuses into
/// one tensor. A module declares its rules next to its fields, as
/// `kPyTorchLayout`; `PyTorchAdapter` reads them when it loads a PyTorch
/// checkpoint into the module and when it saves the module for PyTorch. The
/// record layer itself knows no module by name.
///
/// \code
/// // PyTorch: in_proj_weight [3E, E], in_proj_bias [3E], out_proj.{weight,bias}
/// struct SelfAttention {
///   using Rule = torchport::LayoutRule;
///   static constexpr std::string_view kKind = "SelfAttention";
///   torchport::nn::Linear query, key, value, output;
///   TORCHPORT_FIELDS(query, key, value, output)
///   static constexpr Rule kPyTorchLayout[] = {
///       Rule::fused("in_proj_weight", "{part}.weight", {"query", "key", "value"}),
///       Rule::fused("in_proj_bias", "{part}.bias", {"query", "key", "value"}),
///       Rule::renamed("out_proj", "output"),
///   };
/// };
/// \endcode
///
/// Rules speak of the module's own entries only (one level of its record);
/// a submodule's layout is its own declaration (above, `Linear` declares that
/// its weight is transposed, which applies to the parts `fused` placed in
/// it). Names in rules are the keys of the module's state_dict subtree,
/// without the module's prefix.
///
/// Placeholders: `{part}` in a fused rule's field pattern stands for each of
/// its parts in turn; `{index}` stands for 0, 1, 2, ... (a stacked module's
/// layer): in the PyTorch name anywhere ("weight_ih_l{index}"), in the field
/// pattern as a whole segment, which is then a list ("layers.{index}....").

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace torchport {

/// What a `LayoutRule` says.
enum class LayoutOp : std::uint8_t {
  renamed,     ///< PyTorch's entry `torch` is the field `ours` (a tensor, a submodule, anything)
  transposed,  ///< the 2-D tensor field `ours` is PyTorch's transposed (dimensions 0 and 1 swapped)
  fused,  ///< PyTorch's tensor `torch` stacks the fields `ours` of every part along dimension 0
};

/// The names a fused rule lists, in order; unused slots stay empty.
using LayoutNames = std::array<std::string_view, 8>;

namespace detail {
/// Reports a malformed layout rule: throws Error(invalid_argument) with `why`.
/// Not constexpr, so that a malformed `static constexpr` declaration does not
/// compile: the compiler stops at the call, on the line saying why.
[[noreturn]] void invalid_layout_rule(std::string_view why);

/// Number of `{...}` placeholders named `what` in `s`.
constexpr std::size_t count_placeholder(std::string_view s, std::string_view what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string_view::npos; at = s.find(what, at + what.size()))
    ++n;
  return n;
}
}  // namespace detail

/// One rule of a module's PyTorch layout. Make rules with `renamed`,
/// `transposed` and `fused`, which check them (at compile time in a
/// `static constexpr` declaration).
///
/// On load, the rules turn the module's subtree in the file into the
/// module's layout: fused tensors are split (views, no copy) and placed at
/// their fields, renamed entries take the field's name, transposed tensors
/// become transposed views; entries no rule names pass as they are. On save,
/// the same rules run backwards: fields are transposed back (contiguous
/// copies), renamed back, and the parts of each fused tensor concatenated
/// (the fused entries first, in rule order, then the other entries in field
/// order).
struct LayoutRule {
  LayoutOp op = LayoutOp::renamed;  ///< what the rule says
  /// PyTorch's key in the module's subtree ("weight", "in_proj_weight",
  /// "weight_ih_l{index}"). Empty for `transposed`.
  std::string_view torch;
  /// The module's field (renamed, transposed: one key), or for `fused` the
  /// dotted path of each part's field, with `{part}` ("{part}.weight",
  /// "layers.{index}.{part}.input_transform.weight").
  std::string_view ours;
  /// `fused`: the value of `{part}` for each block of the fused tensor, in
  /// PyTorch's order. The blocks have equal rows.
  LayoutNames parts{};
  /// `fused`, optional: PyTorch's own keys of the parts when it stores them
  /// apart (MultiheadAttention's q/k/v_proj_weight when kdim or vdim differ),
  /// one per part. On load they are read when the fused key is absent; on
  /// save they are written when the parts differ in shape.
  LayoutNames separate{};

  /// The number of parts (non-empty leading names of `parts`).
  constexpr std::size_t part_count() const {
    std::size_t n = 0;
    while (n < parts.size() && !parts[n].empty()) ++n;
    return n;
  }
  /// True when separate names are given.
  constexpr bool has_separate() const {
    for (std::string_view s : separate)
      if (!s.empty()) return true;
    return false;
  }
  /// True when the rule repeats over `{index}`.
  constexpr bool indexed() const { return detail::count_placeholder(torch, "{index}") != 0; }

  /// PyTorch's entry `torch` is the module's field `ours` (both plain keys,
  /// no dots): BatchNorm's `renamed("weight", "gamma")`.
  static constexpr LayoutRule renamed(std::string_view torch, std::string_view ours) {
    LayoutRule r;
    r.op = LayoutOp::renamed;
    r.torch = torch;
    r.ours = ours;
    r.check();
    return r;
  }
  /// The module's 2-D tensor field `field` is stored transposed by PyTorch
  /// (Linear's weight: [in, out] here, [out, in] in PyTorch). Tensors of
  /// another rank are left as they are. Applies after `renamed` on load (it
  /// names the field by the module's name).
  static constexpr LayoutRule transposed(std::string_view field) {
    LayoutRule r;
    r.op = LayoutOp::transposed;
    r.ours = field;
    r.check();
    return r;
  }
  /// PyTorch's tensor `torch` is the fields `ours` of every part of `parts`
  /// stacked along dimension 0, in that order (an LSTM's gates, attention's
  /// in_proj). `separate`: PyTorch's keys of the parts when it stores them
  /// apart. With `{index}` in `torch` and `ours`, the rule repeats for index
  /// 0, 1, ... as long as the file has an entry of some indexed rule of the
  /// module (on load), or for every item of the field's list (on save).
  /// A part missing on save leaves the fused entry out.
  static constexpr LayoutRule fused(std::string_view torch, std::string_view ours,
                                    LayoutNames parts, LayoutNames separate = {}) {
    LayoutRule r;
    r.op = LayoutOp::fused;
    r.torch = torch;
    r.ours = ours;
    r.parts = parts;
    r.separate = separate;
    r.check();
    return r;
  }

  /// Checks the rule's form (what the three makers check).
  /// \throws Error(invalid_argument) saying what is wrong, at run time; in a
  /// constant expression, a compile error.
  constexpr void check() const {
    auto plain = [](std::string_view s) {
      return !s.empty() && s.find('.') == std::string_view::npos &&
             s.find('{') == std::string_view::npos;
    };
    switch (op) {
      case LayoutOp::renamed:
        if (!plain(torch) || !plain(ours))
          detail::invalid_layout_rule(
              "renamed: both names must be plain keys (no '.', no placeholder)");
        return;
      case LayoutOp::transposed:
        if (!plain(ours)) detail::invalid_layout_rule("transposed: the field must be a plain key");
        return;
      case LayoutOp::fused:
        break;
    }
    const std::size_t n = part_count();
    if (n == 0) detail::invalid_layout_rule("fused: needs at least one part");
    for (std::size_t i = n; i < parts.size(); ++i)
      if (!parts[i].empty())
        detail::invalid_layout_rule("fused: the parts must be listed without gaps");
    if (torch.empty() || torch.find('.') != std::string_view::npos ||
        detail::count_placeholder(torch, "{part}") != 0)
      detail::invalid_layout_rule("fused: PyTorch's name must be one key, without {part}");
    if (detail::count_placeholder(ours, "{part}") != 1)
      detail::invalid_layout_rule("fused: the field pattern must hold {part} once");
    if (ours.empty() || ours.front() == '.' || ours.back() == '.' ||
        ours.find("..") != std::string_view::npos)
      detail::invalid_layout_rule("fused: the field pattern has an empty segment");
    const std::size_t idx = detail::count_placeholder(torch, "{index}");
    if (idx > 1 || detail::count_placeholder(ours, "{index}") != idx)
      detail::invalid_layout_rule("fused: {index} must appear once in both names, or in neither");
    if (idx == 1) {
      const auto at = ours.find("{index}");
      const bool whole =
          at > 0 && ours[at - 1] == '.' && (at + 7 == ours.size() || ours[at + 7] == '.');
      if (!whole)
        detail::invalid_layout_rule(
            "fused: {index} must be a whole segment of the field pattern, not the first");
    }
    if (has_separate()) {
      for (std::size_t i = 0; i < separate.size(); ++i) {
        if (separate[i].empty() != (i >= n))
          detail::invalid_layout_rule("fused: give one separate name per part, or none");
        if (i < n && (separate[i].find('.') != std::string_view::npos ||
                      detail::count_placeholder(separate[i], "{index}") != idx ||
                      detail::count_placeholder(separate[i], "{part}") != 0))
          detail::invalid_layout_rule(
              "fused: a separate name is one key, with {index} as PyTorch's name has it");
      }
    }
  }
};

/// A module's PyTorch layout: its rules, in order. A module declares it as
/// `static constexpr torchport::LayoutRule kPyTorchLayout[] = {...};` (or
/// a constexpr std::array of them).
using PyTorchLayout = std::span<const LayoutRule>;

/// True for modules that declare a PyTorch layout (`kPyTorchLayout`).
template <class T>
concept DeclaresPyTorchLayout = requires {
  PyTorchLayout(T::kPyTorchLayout);
};

/// The PyTorch layout `T` declares; empty when it declares none (PyTorch
/// lays it out as we do).
template <class T>
constexpr PyTorchLayout pytorch_layout_of() {
  if constexpr (DeclaresPyTorchLayout<T>) {
    return PyTorchLayout(T::kPyTorchLayout);
  } else {
    return {};
  }
}

}  // namespace torchport
