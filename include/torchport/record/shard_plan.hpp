#pragma once
/// \file
/// `ShardPlan`: which part of each tensor a rank of a tensor-parallel model
/// reads (Megatron-LM's column- and row-parallel layers).
///
/// \code
/// // Hugging Face Llama names; torch's Linear weights are [out, in].
/// const auto plan = torchport::ShardPlan::parse(R"(
///   self_attn\.q_proj\.weight$ -> column(0, heads=32)
///   self_attn\.[kv]_proj\.weight$ -> column(0, kv_heads=8)
///   self_attn\.o_proj\.weight$ -> row(1)
///   mlp\.(gate|up)_proj\.weight$ -> column(0)
///   mlp\.down_proj\.weight$ -> row(1)
///   norm\.weight$ -> replicate
/// )");
/// auto report = torchport::load(layer, "model.safetensors", torchport::LoadArgs{}.shard(rank,
/// world, plan)); \endcode
///
/// The plan file format (`ShardPlan::parse`, `torchport inspect --plan`):
/// one rule a line, `REGEX -> ACTION`, split at the last `->`; blank lines
/// and lines starting with `#` are skipped. ACTION is
/// - `replicate`: every rank reads the whole tensor;
/// - `column(DIM, OPTIONS)` / `row(DIM, OPTIONS)`: each rank reads 1/world
///   of dimension DIM (default 0 for column, 1 for row). Column-parallel
///   layers split their output (torch's Linear weight dim 0, and its bias),
///   row-parallel ones their input (dim 1; the partial outputs are summed
///   by an all-reduce). OPTIONS, comma-separated:
///   - `heads=N`: DIM holds N heads; each rank takes N/world whole heads;
///   - `kv_heads=N`: as heads, but with more ranks than heads each head is
///     read by world/N ranks (grouped-query attention's key/value heads);
///   - `heads=N+M, kv_heads=K+K`: a fused projection, segments in this order
///     (fused QKV: `heads=32, kv_heads=8+8`); each is split on its own;
///   - `parts=P`: DIM is P equal fused blocks (gate and up projections in
///     one weight: `parts=2`); each rank takes its share of every block.
///
/// Rules are PCRE2 patterns searched in the file's tensor names (before any
/// remapping, as `LoadArgs::include` sees them; anchor with `^` and `$`);
/// the first rule that matches a name decides. A tensor no rule matches is
/// replicated. Sizes must divide evenly: an uneven split is an error naming
/// the tensor, its shape and the rule.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/slice.hpp"

namespace torchport {

namespace detail {
struct ShardRegex;
}

/// How a rule cuts a tensor.
enum class ShardKind {
  replicate,  ///< every rank reads all of it
  column,     ///< split along the output dimension (no reduction needed)
  row,        ///< split along the input dimension (partial results are summed)
};

/// "replicate", "column" or "row".
std::string_view shard_kind_name(ShardKind kind) noexcept;

/// How a split dimension is laid out (fused and grouped weights).
struct ShardSplit {
  /// Segments holding attention heads, split by whole heads (world must
  /// divide each count).
  std::vector<std::int64_t> heads;
  /// Segments after `heads` holding key/value heads: split by whole heads,
  /// or, with more ranks than heads, each head read by world/count ranks.
  std::vector<std::int64_t> kv_heads;
  /// Equal fused blocks (when no heads are given), each split evenly.
  std::int64_t parts = 1;
};

/// What one rank reads of one tensor.
struct ShardSlice {
  ShardKind kind = ShardKind::replicate;  ///< the rule's kind
  std::int64_t dim = -1;                  ///< the split dimension; -1 when replicated
  std::vector<SliceRange> ranges;         ///< ranges of `dim`, concatenated; empty when replicated
  std::string rule;                       ///< the rule's text; empty when no rule matched
  /// True when the rank reads some heads other ranks read too (kv_heads
  /// with more ranks than heads).
  bool duplicated = false;
  /// The rank's shape of a tensor of shape `whole`.
  Shape shape(std::span<const std::int64_t> whole) const;
};

/// Ordered rules mapping tensor names to how ranks split them. Copies share
/// the compiled patterns; a plan is immutable once built and safe to use
/// from many threads.
class ShardPlan {
 public:
  /// One rule.
  struct Rule {
    std::string pattern;                    ///< the PCRE2 pattern
    ShardKind kind = ShardKind::replicate;  ///< how it splits
    std::int64_t dim = 0;                   ///< the split dimension (negative counts from the end)
    ShardSplit split;                       ///< heads, kv heads, fused parts
    std::string text;                       ///< the rule as a plan line
  };

  ShardPlan();
  ~ShardPlan();
  ShardPlan(const ShardPlan&);                 ///< shares the compiled patterns
  ShardPlan& operator=(const ShardPlan&);      ///< as the copy constructor
  ShardPlan(ShardPlan&&) noexcept;             ///< takes the rules
  ShardPlan& operator=(ShardPlan&&) noexcept;  ///< as the move constructor

  /// Appends a column-parallel rule. \throws Error(invalid_argument) for a
  /// pattern that does not compile or a bad split.
  ShardPlan& column(std::string_view pattern, std::int64_t dim = 0, ShardSplit split = {});
  /// Appends a row-parallel rule. \throws Error(invalid_argument).
  ShardPlan& row(std::string_view pattern, std::int64_t dim = 1, ShardSplit split = {});
  /// Appends a rule reading the whole tensor on every rank. \throws Error(invalid_argument).
  ShardPlan& replicate(std::string_view pattern);
  /// Appends a rule written as a plan line (`REGEX -> ACTION`, see the file
  /// comment). \throws Error(invalid_argument) naming what is wrong.
  ShardPlan& add(std::string_view line);

  /// A plan from text, one rule a line. \throws Error(invalid_argument)
  /// naming `name` and the line.
  static ShardPlan parse(std::string_view text, std::string_view name = "plan");
  /// A plan read from a file. \throws Error(io) or Error(invalid_argument).
  static ShardPlan read_file(const std::filesystem::path& path);

  /// The rules, in order.
  const std::vector<Rule>& rules() const noexcept { return rules_; }
  /// True when the plan has no rule (every tensor is replicated).
  bool empty() const noexcept { return rules_.empty(); }
  /// The first rule whose pattern is found in `name`, or nullptr.
  const Rule* match(std::string_view name) const;
  /// What rank `rank` of `world` reads of the tensor `name` of shape `shape`.
  /// \throws Error(invalid_argument) for a bad rank or world, a split
  /// dimension the tensor lacks, or sizes that do not divide (naming the
  /// key, its shape and the rule).
  ShardSlice resolve(std::string_view name, std::span<const std::int64_t> shape, int rank,
                     int world) const;

 private:
  ShardPlan& push(Rule rule);

  std::vector<Rule> rules_;
  std::vector<std::shared_ptr<const detail::ShardRegex>> regexes_;
};

}  // namespace torchport
