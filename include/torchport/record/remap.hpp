#pragma once
/// \file
/// Regex rules that rename tensor keys and select which keys to keep
/// (PCRE2 syntax), shared by `torchport convert` and the record loaders.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace torchport {

namespace detail {
struct CompiledRegex;
}

/// Ordered regex rename rules; each rule sees the previous rule's output.
///
/// A rule replaces *every* non-overlapping match of its pattern in the key
/// (global, like Python's `re.sub` and like Burn's key remapping, which uses
/// `Regex::replace_all`); a key the pattern does not match passes through
/// unchanged. Matching is unanchored: write `^` and `$` to match whole keys.
///
/// Patterns are PCRE2 (Perl) syntax, compiled in UTF mode; keys that are not
/// valid UTF-8 are still matched (PCRE2_MATCH_INVALID_UTF). Replacements
/// use PCRE2's syntax: `$1` or `${1}` for a numbered group, `$name` or
/// `${name}` for a named group, `$$` for a dollar; everything else
/// (backslashes too) is literal.
///
/// \code
/// KeyRemap remap;
/// remap.add(R"(^model\.)", "")                       // drop a prefix
///      .add(R"(\.layers\.(\d+)\.)", ".blocks.$1.");  // rename a level
/// remap.apply("model.layers.3.weight");              // "blocks.3.weight"
/// \endcode
///
/// Thread safety: `add` is not; `apply` on a const object is (each call
/// uses its own match data).
class KeyRemap {
 public:
  /// No rules: `apply` returns keys unchanged.
  KeyRemap();
  ~KeyRemap();
  /// Copies share the compiled patterns (immutable); rules added to one
  /// copy afterwards do not affect the other.
  KeyRemap(const KeyRemap&);
  KeyRemap& operator=(const KeyRemap&);  ///< as the copy constructor
  KeyRemap(KeyRemap&&) noexcept;         ///< takes the rules; the source is left valid, unspecified
  KeyRemap& operator=(KeyRemap&&) noexcept;  ///< as the move constructor

  /// Appends a rule. \throws Error(invalid_argument) naming the pattern, the
  /// offset in it and PCRE2's message for a pattern that does not compile,
  /// or naming the reference for a replacement that uses a group the
  /// pattern does not have.
  KeyRemap& add(std::string_view pattern, std::string_view replacement);
  /// `key` after every rule, in order. \throws Error(invalid_argument) when
  /// PCRE2 fails at match time (a match limit hit by a pathological pattern).
  std::string apply(std::string_view key) const;
  /// True when there are no rules.
  bool empty() const noexcept { return rules_.empty(); }
  /// Number of rules.
  std::size_t size() const noexcept { return rules_.size(); }

 private:
  struct Rule {
    std::shared_ptr<const detail::CompiledRegex> regex;
    std::string replacement;
  };
  std::vector<Rule> rules_;
};

/// Include/exclude regex filters: a key passes when it matches any include
/// (or there are none) and no exclude.
///
/// Matching is a search (unanchored, like Python's `re.search`): `attn`
/// selects every key containing "attn"; `^encoder\.` only keys starting
/// with "encoder.". Same PCRE2 syntax and thread safety as `KeyRemap`.
class KeyFilter {
 public:
  /// No patterns: every key passes.
  KeyFilter();
  ~KeyFilter();
  /// Copies share the compiled patterns, as `KeyRemap`'s do.
  KeyFilter(const KeyFilter&);
  KeyFilter& operator=(const KeyFilter&);  ///< as the copy constructor
  KeyFilter(KeyFilter&&) noexcept;  ///< takes the patterns; the source is left valid, unspecified
  KeyFilter& operator=(KeyFilter&&) noexcept;  ///< as the move constructor

  /// Adds an include pattern. \throws Error(invalid_argument) as `KeyRemap::add`.
  KeyFilter& include(std::string_view re);
  /// Adds an exclude pattern. \throws Error(invalid_argument) as `KeyRemap::add`.
  KeyFilter& exclude(std::string_view re);
  /// True when `key` matches an include (or there are none) and no exclude.
  bool accepts(std::string_view key) const;
  /// True when there are no patterns (every key passes).
  bool empty() const noexcept { return includes_.empty() && excludes_.empty(); }

 private:
  std::vector<std::shared_ptr<const detail::CompiledRegex>> includes_;
  std::vector<std::shared_ptr<const detail::CompiledRegex>> excludes_;
};

}  // namespace torchport
