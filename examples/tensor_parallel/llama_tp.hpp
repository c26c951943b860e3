#pragma once
// A Llama decoder layer split over ranks as Megatron-LM splits it: the q, k,
// v, gate and up projections column-parallel (each rank computes its heads
// and its share of the MLP's hidden units), o and down row-parallel (each
// rank a partial sum, added up by an all-reduce). The layer itself is the
// one of tests/record/transformer_blocks.hpp (RMSNorm, Hugging Face's
// rotary embeddings, grouped-query attention with a causal mask, SwiGLU),
// built with this rank's shapes; this header knows nothing of MPI.

#include <cstdint>
#include <functional>
#include <string>

#include <torchport/torchport.hpp>

#include "transformer_blocks.hpp"

namespace llama_tp {

using namespace torchport;
using transformer_blocks::LlamaBlock;

/// The sizes of a Llama layer, read from its weights.
struct Dims {
  std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
};

/// The split of a Hugging Face LlamaDecoderLayer's weights (torch's Linear
/// weights are [out, in]); names may carry a prefix ("model.layers.0.").
inline ShardPlan plan(std::int64_t heads, std::int64_t kv_heads) {
  const std::string h = std::to_string(heads), k = std::to_string(kv_heads);
  const std::string text = R"((^|\.)self_attn\.q_proj\.weight$ -> column(0, heads=)" + h + ")\n" +
                           R"((^|\.)self_attn\.[kv]_proj\.weight$ -> column(0, kv_heads=)" + k +
                           ")\n" + R"((^|\.)self_attn\.o_proj\.weight$ -> row(1, heads=)" + h +
                           ")\n" +
                           R"((^|\.)mlp\.(gate|up)_proj\.weight$ -> column(0))"
                           "\n"
                           R"((^|\.)mlp\.down_proj\.weight$ -> row(1))"
                           "\n"
                           R"((^|\.)(input|post_attention)_layernorm\.weight$ -> replicate)"
                           "\n";
  return ShardPlan::parse(text, "llama plan");
}

/// The layer's sizes from the weights' shapes. \throws Error when a weight
/// is missing or the head counts do not fit.
inline Dims dims_of(const TensorCatalog& cat, std::int64_t heads, std::int64_t kv_heads) {
  auto shape = [&](const char* name) {
    const Tensor* t = cat.find(name);
    if (t == nullptr || t->dim() < 1)
      throw Error(ErrorCode::missing_key,
                  "the weights have no tensor named '" + std::string(name) + "'", name);
    return t->shape();
  };
  Dims d;
  d.hidden = shape("input_layernorm.weight")[0];
  d.heads = heads;
  d.kv_heads = kv_heads;
  const std::int64_t q_out = shape("self_attn.q_proj.weight")[0];
  if (heads <= 0 || kv_heads <= 0 || q_out % heads != 0 || heads % kv_heads != 0)
    throw Error(ErrorCode::invalid_argument, "q_proj has " + std::to_string(q_out) +
                                                 " outputs: not " + std::to_string(heads) +
                                                 " heads in groups of " + std::to_string(kv_heads));
  d.head_dim = q_out / heads;
  d.intermediate = shape("mlp.gate_proj.weight")[0];
  return d;
}

/// Rank `rank`'s layer of `world`: heads/world query heads, its key/value
/// heads (one when ranks outnumber them), intermediate/world MLP units,
/// whole norms; f32 fields (a bf16 file is converted as it loads).
inline LlamaBlock rank_block(const Dims& d, int world, double eps, double rope_theta) {
  const std::int64_t w = world;
  const std::int64_t h = d.heads / w, kv = d.kv_heads >= w ? d.kv_heads / w : 1,
                     inter = d.intermediate / w;
  LlamaBlock blk;
  blk.input_layernorm = nn::RMSNorm({d.hidden}, eps);
  blk.post_attention_layernorm = nn::RMSNorm({d.hidden}, eps);
  blk.self_attn.q_proj = nn::Linear(d.hidden, h * d.head_dim, false);
  blk.self_attn.k_proj = nn::Linear(d.hidden, kv * d.head_dim, false);
  blk.self_attn.v_proj = nn::Linear(d.hidden, kv * d.head_dim, false);
  blk.self_attn.o_proj = nn::Linear(h * d.head_dim, d.hidden, false);
  blk.self_attn.n_heads = h;
  blk.self_attn.n_kv_heads = kv;
  blk.self_attn.rope_theta = rope_theta;
  blk.mlp = transformer_blocks::LlamaMlp{nn::Linear(d.hidden, inter, false),
                                         nn::Linear(d.hidden, inter, false),
                                         nn::Linear(inter, d.hidden, false)};
  return blk;
}

/// Sums a tensor over the ranks in place (an all-reduce); the identity for one process.
using AllReduce = std::function<void(Tensor&)>;

/// The layer's forward on one rank: each sublayer's partial output summed
/// over the ranks before its residual. `x` [b, t, hidden], `positions` [b, t].
inline Tensor forward(const LlamaBlock& blk, const Tensor& x, const Tensor& positions,
                      const AllReduce& all_reduce) {
  Tensor a = blk.self_attn.forward(blk.input_layernorm.forward(x), positions).clone();
  all_reduce(a);
  const Tensor h = nn::add(x, a);
  Tensor m = blk.mlp.forward(blk.post_attention_layernorm.forward(h)).clone();
  all_reduce(m);
  return nn::add(h, m);
}

}  // namespace llama_tp
