#pragma once
// A BERT encoder (Hugging Face's BertModel) and sentence-transformers' mean
// pooling and normalisation, as torchport records with their forward pass:
// the same names as BertModel's state_dict(), so a model folder's
// model.safetensors loads as shipped, with no remapping. The sizes come from
// the folder's config.json, the pipeline from its modules.json and
// 1_Pooling/config.json (`read_config`, `read_pipeline`); nothing runs
// with a setting it was not given, and a setting not implemented here is
// refused.
//
// The reference is transformers 5's modeling_bert.py (BertEmbeddings,
// BertSelfAttention, BertSelfOutput, BertIntermediate, BertOutput,
// BertLayer, BertPooler) and sentence-transformers' Pooling ("mean") and
// Normalize modules; inference only (dropout is the identity).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torchport/torchport.hpp>

namespace minilm {

namespace nn = torchport::nn;
using torchport::DType;
using torchport::Error;
using torchport::ErrorCode;
using torchport::Shape;
using torchport::Tensor;

/// The BertConfig fields the forward pass uses (config.json).
struct BertConfig {
  std::int64_t vocab_size = 0, hidden_size = 0, num_hidden_layers = 0, num_attention_heads = 0,
               intermediate_size = 0, max_position_embeddings = 0, type_vocab_size = 0;
  double layer_norm_eps = 0;
  std::string hidden_act;  ///< "gelu": transformers' GELUActivation, F.gelu (exact, erf)
};

/// What the folder's sentence-transformers pipeline does after the encoder
/// (modules.json and 1_Pooling/config.json).
struct Pipeline {
  bool normalize = false;  ///< a Normalize module follows the pooling
};

namespace detail {

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::io, path.string() + ": cannot be opened; is this a model folder?");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::corrupt, path.string() + ": not JSON (" + e.what() + ")");
  }
}

// config[key] as T, or `fallback` when the key is absent and a fallback is
// given (transformers' default for that field).
template <class T>
T field(const nlohmann::json& j, const std::filesystem::path& path, const char* key,
        std::optional<T> fallback = std::nullopt) {
  if (!j.is_object() || !j.contains(key)) {
    if (fallback) return *fallback;
    throw Error(ErrorCode::missing_key, path.string() + ": no '" + key + "'", key);
  }
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(
        ErrorCode::corrupt,
        path.string() + ": '" + key + "' is " + j.at(key).dump() + ", not the type expected", key);
  }
}

}  // namespace detail

/// Reads a BERT model folder's config.json and checks that it describes what
/// this file implements: an encoder-only BertModel with absolute position
/// embeddings and the exact GELU.
/// \throws Error(io | corrupt | missing_key) for a missing or malformed file
/// or field, Error(unsupported) for a setting this encoder does not implement.
inline BertConfig read_config(const std::filesystem::path& folder) {
  const auto path = folder / "config.json";
  const nlohmann::json j = detail::read_json(path);
  const auto type = detail::field<std::string>(j, path, "model_type");
  if (type != "bert")
    throw Error(ErrorCode::unsupported, path.string() + ": model_type '" + type + "', not 'bert'",
                "model_type");
  // BertConfig's defaults for the fields older configs leave out.
  const auto position =
      detail::field<std::string>(j, path, "position_embedding_type", std::string("absolute"));
  if (position != "absolute")
    throw Error(ErrorCode::unsupported,
                path.string() + ": position_embedding_type '" + position +
                    "' (only 'absolute' is implemented)",
                "position_embedding_type");
  if (detail::field<bool>(j, path, "is_decoder", false) ||
      detail::field<bool>(j, path, "add_cross_attention", false))
    throw Error(ErrorCode::unsupported,
                path.string() +
                    ": a decoder (is_decoder / add_cross_attention); only the encoder is "
                    "implemented");
  BertConfig c;
  c.vocab_size = detail::field<std::int64_t>(j, path, "vocab_size");
  c.hidden_size = detail::field<std::int64_t>(j, path, "hidden_size");
  c.num_hidden_layers = detail::field<std::int64_t>(j, path, "num_hidden_layers");
  c.num_attention_heads = detail::field<std::int64_t>(j, path, "num_attention_heads");
  c.intermediate_size = detail::field<std::int64_t>(j, path, "intermediate_size");
  c.max_position_embeddings = detail::field<std::int64_t>(j, path, "max_position_embeddings");
  c.type_vocab_size = detail::field<std::int64_t>(j, path, "type_vocab_size");
  c.layer_norm_eps = detail::field<double>(j, path, "layer_norm_eps");
  c.hidden_act = detail::field<std::string>(j, path, "hidden_act");
  using Size = std::pair<const char*, std::int64_t>;
  for (const auto& [name, v] :
       {Size{"vocab_size", c.vocab_size}, Size{"hidden_size", c.hidden_size},
        Size{"num_hidden_layers", c.num_hidden_layers},
        Size{"num_attention_heads", c.num_attention_heads},
        Size{"intermediate_size", c.intermediate_size},
        Size{"max_position_embeddings", c.max_position_embeddings},
        Size{"type_vocab_size", c.type_vocab_size}})
    if (v <= 0 || v > (std::int64_t{1} << 31))
      throw Error(ErrorCode::corrupt, path.string() + ": " + name + " is " + std::to_string(v),
                  name);
  if (c.hidden_size % c.num_attention_heads != 0)
    throw Error(ErrorCode::corrupt,
                path.string() + ": hidden_size " + std::to_string(c.hidden_size) +
                    " is not a multiple of num_attention_heads " +
                    std::to_string(c.num_attention_heads),
                "num_attention_heads");
  if (!(c.layer_norm_eps > 0))
    throw Error(ErrorCode::corrupt, path.string() + ": layer_norm_eps must be positive",
                "layer_norm_eps");
  // ACT2FN["gelu"] is GELUActivation, torch's exact GELU; the tanh
  // approximations ("gelu_new", "gelu_pytorch_tanh") and the others are
  // different functions, not implemented here.
  if (c.hidden_act != "gelu")
    throw Error(ErrorCode::unsupported,
                path.string() + ": hidden_act '" + c.hidden_act + "' (implemented: gelu, exact)",
                "hidden_act");
  return c;
}

/// Reads the folder's sentence-transformers pipeline (modules.json) and
/// checks it is Transformer -> Pooling with mean pooling only
/// (1_Pooling/config.json, or the pooling module's own folder) -> optionally
/// Normalize.
/// \throws Error(io | corrupt | missing_key), Error(unsupported) for another pipeline.
inline Pipeline read_pipeline(const std::filesystem::path& folder) {
  const auto path = folder / "modules.json";
  const nlohmann::json j = detail::read_json(path);
  if (!j.is_array()) throw Error(ErrorCode::corrupt, path.string() + ": not a list of modules");
  std::vector<std::string> kinds;
  std::string pooling_dir;
  for (const auto& m : j) {
    std::string type = detail::field<std::string>(m, path, "type");
    type = type.substr(type.rfind('.') + 1);
    if (type == "Pooling") pooling_dir = detail::field<std::string>(m, path, "path");
    kinds.push_back(type);
  }
  Pipeline p;
  if (kinds.size() == 3 && kinds[2] == "Normalize") p.normalize = true;
  if (kinds.size() < 2 || kinds.size() > 3 || kinds[0] != "Transformer" || kinds[1] != "Pooling" ||
      (kinds.size() == 3 && !p.normalize)) {
    std::string list;
    for (const auto& k : kinds) list += (list.empty() ? "" : " -> ") + k;
    throw Error(ErrorCode::unsupported,
                path.string() + ": pipeline " + list +
                    " (implemented: Transformer -> Pooling [-> Normalize])");
  }
  const auto pool_path = folder / pooling_dir / "config.json";
  const nlohmann::json pool = detail::read_json(pool_path);
  if (!pool.is_object()) throw Error(ErrorCode::corrupt, pool_path.string() + ": not an object");
  for (const auto& [key, value] : pool.items()) {
    if (key.rfind("pooling_mode_", 0) != 0) continue;
    const bool on = value.is_boolean() && value.get<bool>();
    if (on != (key == "pooling_mode_mean_tokens"))
      throw Error(ErrorCode::unsupported,
                  pool_path.string() + ": " + key + " is " + value.dump() +
                      " (implemented: pooling_mode_mean_tokens alone)",
                  key);
  }
  if (!detail::field<bool>(pool, pool_path, "pooling_mode_mean_tokens"))
    throw Error(ErrorCode::unsupported, pool_path.string() + ": no pooling mode on",
                "pooling_mode_mean_tokens");
  return p;
}

/// `[b, t, h * d]` viewed as `[b, h, t, d]` (one copy at most).
inline Tensor split_heads(const Tensor& x, std::int64_t heads) {
  const std::int64_t b = x.size(0), t = x.size(1), d = x.size(2) / heads;
  const Shape order{0, 2, 1, 3};
  return x.reshape({b, t, heads, d}).permute(order);
}

/// `[b, h, t, d]` back to a contiguous `[b, t, h * d]`.
inline Tensor merge_heads(const Tensor& x) {
  const Shape order{0, 2, 1, 3};
  return x.permute(order).contiguous().reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

/// BertEmbeddings: word + token type + absolute position embeddings, LayerNorm.
struct BertEmbeddings {
  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm LayerNorm;  // NOLINT(readability-identifier-naming): the checkpoint's name
  /// Older checkpoints carry transformers' `position_ids` buffer (arange over
  /// max_position_embeddings, [1, max]); transformers 5 registers it as
  /// non-persistent, so it never loads the file's copy and always uses
  /// positions 0..t-1. The field takes the key (so no key goes unused) and
  /// `check_position_ids` checks that it says the same.
  std::optional<Tensor> position_ids;
  TORCHPORT_FIELDS(word_embeddings, position_embeddings, token_type_embeddings, LayerNorm,
                   position_ids)

  /// An empty string when the file's `position_ids` (if any) are 0..max-1,
  /// else what differs (the forward pass uses 0..t-1 regardless, as
  /// transformers does).
  std::string check_position_ids() const {
    if (!position_ids) return {};
    const Tensor p = position_ids->to(DType::I64);
    const auto v = p.span<std::int64_t>();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] != static_cast<std::int64_t>(i))
        return "embeddings.position_ids[0][" + std::to_string(i) + "] is " + std::to_string(v[i]) +
               ", not " + std::to_string(i) +
               " (transformers ignores the file's copy, and so do we)";
    return {};
  }

  /// `ids`, `token_types` [b, t] (I64) -> [b, t, hidden].
  Tensor forward(const Tensor& ids, const Tensor& token_types) const {
    const std::int64_t t = ids.size(1), max = position_embeddings.weight.size(0);
    if (t > max)
      throw Error(
          ErrorCode::invalid_argument,
          std::to_string(t) + " tokens, more than max_position_embeddings " + std::to_string(max));
    std::vector<std::int64_t> positions(static_cast<std::size_t>(t));
    for (std::int64_t i = 0; i < t; ++i) positions[static_cast<std::size_t>(i)] = i;
    const Tensor pos = Tensor::from(std::span<const std::int64_t>(positions), {1, t});
    Tensor e = nn::add(word_embeddings.forward(ids), token_type_embeddings.forward(token_types));
    e = nn::add(e, position_embeddings.forward(pos));
    return LayerNorm.forward(e);
  }
};

/// BertSelfAttention: query, key, value projections; scaled dot-product
/// attention over the tokens the mask allows.
struct BertSelfAttention {
  nn::Linear query, key, value;
  std::int64_t heads = 0;  ///< num_attention_heads (configuration)
  TORCHPORT_FIELDS(query, key, value)

  /// `x` [b, t, hidden], `allowed` [b, 1, 1, t] (U8, 1 where a key may be
  /// attended to) -> [b, t, hidden].
  Tensor forward(const Tensor& x, const Tensor& allowed) const {
    const Tensor a = nn::scaled_dot_product_attention(
        split_heads(query.forward(x), heads), split_heads(key.forward(x), heads),
        split_heads(value.forward(x), heads), allowed);
    return merge_heads(a);
  }
};

/// BertSelfOutput and BertOutput: dense, then LayerNorm of it plus the residual.
struct BertDenseNorm {
  nn::Linear dense;
  nn::LayerNorm LayerNorm;  // NOLINT(readability-identifier-naming): the checkpoint's name
  TORCHPORT_FIELDS(dense, LayerNorm)
  Tensor forward(const Tensor& x, const Tensor& residual) const {
    return LayerNorm.forward(nn::add(dense.forward(x), residual));
  }
};

/// BertAttention: self-attention, then its output sublayer.
struct BertAttention {
  BertSelfAttention self;
  BertDenseNorm output;
  TORCHPORT_FIELDS(self, output)
  Tensor forward(const Tensor& x, const Tensor& allowed) const {
    return output.forward(self.forward(x, allowed), x);
  }
};

/// BertIntermediate: dense, then hidden_act "gelu" (the only one
/// `read_config` accepts): torch's exact GELU, `x/2 * (1 + erf(x/sqrt(2)))`.
struct BertIntermediate {
  nn::Linear dense;
  TORCHPORT_FIELDS(dense)
  Tensor forward(const Tensor& x) const { return nn::gelu(dense.forward(x)); }
};

/// BertLayer: attention, then the feed-forward block.
struct BertLayer {
  BertAttention attention;
  BertIntermediate intermediate;
  BertDenseNorm output;
  TORCHPORT_FIELDS(attention, intermediate, output)
  Tensor forward(const Tensor& x, const Tensor& allowed) const {
    const Tensor a = attention.forward(x, allowed);
    return output.forward(intermediate.forward(a), a);
  }
};

struct BertEncoder {
  std::vector<BertLayer> layer;
  TORCHPORT_FIELDS(layer)
};

/// BertPooler: tanh(dense(first token)). Part of BertModel (its
/// `pooler_output`) and of the file; sentence embeddings do not use it
/// (they mean-pool the last hidden state).
struct BertPooler {
  nn::Linear dense;
  TORCHPORT_FIELDS(dense)
  /// `hidden` [b, t, h] -> [b, h].
  Tensor forward(const Tensor& hidden) const {
    const Tensor first = hidden.narrow(1, 0, 1).reshape({hidden.size(0), hidden.size(2)});
    return nn::tanh(dense.forward(first.contiguous()));
  }
};

/// The attention mask (I64/I32 [b, t], 1 for a token, 0 for padding) as
/// scaled_dot_product_attention's [b, 1, 1, t] U8 "may attend" mask.
/// \throws Error(invalid_argument) for a value other than 0 and 1, or a row
/// with no token.
inline Tensor attention_allowed(const Tensor& mask) {
  const Tensor m = mask.to(DType::I64);
  const std::int64_t b = m.size(0), t = m.size(1);
  const auto v = m.span<std::int64_t>();
  std::vector<std::uint8_t> out(v.size());
  for (std::int64_t r = 0; r < b; ++r) {
    std::int64_t tokens = 0;
    for (std::int64_t c = 0; c < t; ++c) {
      const std::int64_t x = v[static_cast<std::size_t>(r * t + c)];
      if (x != 0 && x != 1)
        throw Error(ErrorCode::invalid_argument, "attention_mask[" + std::to_string(r) + "][" +
                                                     std::to_string(c) + "] is " +
                                                     std::to_string(x) + ", not 0 or 1");
      tokens += x;
      out[static_cast<std::size_t>(r * t + c)] = static_cast<std::uint8_t>(x);
    }
    if (tokens == 0)
      throw Error(ErrorCode::invalid_argument,
                  "attention_mask row " + std::to_string(r) + " has no token");
  }
  return Tensor::from(std::span<const std::uint8_t>(out), {b, 1, 1, t});
}

/// BertModel (embeddings, encoder, pooler), with the names of its state_dict().
struct BertModel {
  BertEmbeddings embeddings;
  BertEncoder encoder;
  std::optional<BertPooler> pooler;  ///< BertModel(add_pooling_layer=True)'s
  TORCHPORT_FIELDS(embeddings, encoder, pooler)

  /// Zero parameters of the config's shapes (so a load checks every shape).
  static BertModel make(const BertConfig& c) {
    const std::int64_t h = c.hidden_size;
    BertModel m;
    m.embeddings.word_embeddings = nn::Embedding(c.vocab_size, h);
    m.embeddings.position_embeddings = nn::Embedding(c.max_position_embeddings, h);
    m.embeddings.token_type_embeddings = nn::Embedding(c.type_vocab_size, h);
    m.embeddings.LayerNorm = nn::LayerNorm({h}, c.layer_norm_eps);
    m.embeddings.position_ids = Tensor::zeros(DType::I64, {1, c.max_position_embeddings});
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
      BertLayer l;
      l.attention.self.query = nn::Linear(h, h);
      l.attention.self.key = nn::Linear(h, h);
      l.attention.self.value = nn::Linear(h, h);
      l.attention.self.heads = c.num_attention_heads;
      l.attention.output = BertDenseNorm{nn::Linear(h, h), nn::LayerNorm({h}, c.layer_norm_eps)};
      l.intermediate.dense = nn::Linear(h, c.intermediate_size);
      l.output =
          BertDenseNorm{nn::Linear(c.intermediate_size, h), nn::LayerNorm({h}, c.layer_norm_eps)};
      m.encoder.layer.push_back(std::move(l));
    }
    m.pooler = BertPooler{nn::Linear(h, h)};
    return m;
  }

  /// `ids`, `token_types`, `mask` [b, t] -> the last hidden state [b, t, hidden].
  Tensor forward(const Tensor& ids, const Tensor& token_types, const Tensor& mask) const {
    const Tensor allowed = attention_allowed(mask);
    Tensor x = embeddings.forward(ids, token_types);
    for (const BertLayer& l : encoder.layer) x = l.forward(x, allowed);
    return x;
  }
};

/// sentence-transformers' Pooling("mean"): the mean of the token embeddings
/// the mask keeps, `sum(x * mask) / clamp(sum(mask), min=1e-9)`.
/// `tokens` [b, t, h], `mask` [b, t] -> [b, h].
inline Tensor mean_pool(const Tensor& tokens, const Tensor& mask) {
  const Tensor m = mask.to(DType::F32);
  const Tensor summed = nn::sum(nn::mul(tokens, m.reshape({m.size(0), m.size(1), 1})), {1});
  Tensor counts = nn::sum(m, {1}, /*keepdim*/ true);
  for (float& c : counts.mutable_span<float>()) c = std::max(c, 1e-9f);
  return nn::div(summed, counts);
}

/// sentence-transformers' Normalize: `F.normalize(x, p=2, dim=-1)`, i.e.
/// `x / max(||x||, 1e-12)`.
inline Tensor l2_normalize(const Tensor& x) {
  Tensor norm = nn::sqrt(nn::sum(nn::mul(x, x), {-1}, /*keepdim*/ true));
  for (float& n : norm.mutable_span<float>()) n = std::max(n, 1e-12f);
  return nn::div(x, norm);
}

/// A sentence-transformers model over BERT: encoder, mean pooling, and
/// (when the pipeline says so) L2 normalisation.
struct SentenceEncoder {
  BertModel bert;
  Pipeline pipeline;

  /// [b, t] ids, token types and mask -> [b, hidden] sentence embeddings.
  Tensor encode(const Tensor& ids, const Tensor& token_types, const Tensor& mask) const {
    const Tensor pooled = mean_pool(bert.forward(ids, token_types, mask), mask);
    return pipeline.normalize ? l2_normalize(pooled) : pooled;
  }
};

}  // namespace minilm
