// Constructors and forward passes of the nn module records.

#include "torchport/nn/modules.hpp"

#include <string>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/nn/ops.hpp"

namespace torchport::nn {
namespace {

Tensor zeros(DType dtype, Shape shape) {
  return Tensor::zeros(dtype, std::move(shape));
}

Tensor filled(DType dtype, Shape shape, double value) {
  const std::int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<std::size_t>(n), value);
  return Tensor::from(std::span<const double>(v), std::move(shape)).to(dtype);
}

const Tensor& opt(const std::optional<Tensor>& t) {
  static const Tensor kNone;
  return t ? *t : kNone;
}

}  // namespace

namespace detail {
void unset_setting() {
  throw Error(ErrorCode::invalid_argument,
              "a module's setting was read before it was set: no checkpoint records it (torch "
              "keeps it in the module's constructor arguments); set it, or construct the module "
              "with it");
}
}  // namespace detail

void require_settings(std::string_view kind,
                      std::initializer_list<std::pair<std::string_view, bool>> names_set,
                      std::string_view how) {
  std::vector<std::string_view> unset;
  for (const auto& [name, set] : names_set)
    if (!set) unset.push_back(name);
  if (unset.empty()) return;
  std::string names;
  for (std::size_t i = 0; i < unset.size(); ++i) {
    if (i > 0) names += i + 1 == unset.size() ? " and " : ", ";
    names += unset[i];
  }
  throw Error(ErrorCode::invalid_argument,
              std::string(kind) + ": " + names + (unset.size() == 1 ? " is" : " are") +
                  " not set. A checkpoint does not record " + (unset.size() == 1 ? "it" : "them") +
                  " (torch keeps them in the module's constructor arguments), so a "
                  "default-constructed " +
                  std::string(kind) + " takes its tensors from the file and " +
                  (unset.size() == 1 ? "this" : "these") + " from you: " + std::string(how));
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias, DType dtype)
    : weight(zeros(dtype, {in_features, out_features})) {
  if (with_bias) bias = zeros(dtype, {out_features});
}

Tensor Linear::forward(const Tensor& x) const {
  return linear(x, weight, opt(bias));
}

template <int D>
Conv<D>::Conv(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel, Int2 stride_,
              Int2 padding_, Int2 dilation_, std::int64_t groups_, bool with_bias, DType dtype)
    : stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  if (groups_ <= 0 || in_channels % groups_ != 0 || out_channels % groups_ != 0)
    throw Error(ErrorCode::invalid_argument, "channels must divide into groups");
  Shape w{out_channels, in_channels / groups_, kernel.h};
  if constexpr (D == 2) w.push_back(kernel.w);
  weight = zeros(dtype, w);
  if (with_bias) bias = zeros(dtype, {out_channels});
}

template <int D>
Conv<D>& Conv<D>::configure(const Options& o) {
  stride = Int2(o.stride);
  padding = Int2(o.padding);
  dilation = Int2(o.dilation);
  groups = o.groups;
  return *this;
}

template <int D>
Tensor Conv<D>::forward(const Tensor& x) const {
  require_settings(kKind,
                   {{"stride", stride.is_set()},
                    {"padding", padding.is_set()},
                    {"dilation", dilation.is_set()},
                    {"groups", groups.is_set()}},
                   std::string("construct it with them, ") + std::string(kKind) +
                       "(in_channels, out_channels, kernel, stride, padding, dilation, groups, "
                       "bias), or set them: conv.configure({.stride = 2, .padding = 1}) (the "
                       "others at torch's defaults), or each alone (conv.stride = 2)");
  if constexpr (D == 1)
    return conv1d(x, weight, opt(bias), {stride->h, padding->h, dilation->h, groups});
  else
    return conv2d(x, weight, opt(bias), {stride, padding, dilation, groups});
}

template <int D>
ConvTranspose<D>::ConvTranspose(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel,
                                Int2 stride_, Int2 padding_, Int2 output_padding_, Int2 dilation_,
                                std::int64_t groups_, bool with_bias, DType dtype)
    : stride(stride_),
      padding(padding_),
      output_padding(output_padding_),
      dilation(dilation_),
      groups(groups_) {
  if (groups_ <= 0 || in_channels % groups_ != 0 || out_channels % groups_ != 0)
    throw Error(ErrorCode::invalid_argument, "channels must divide into groups");
  Shape w{in_channels, out_channels / groups_, kernel.h};
  if constexpr (D == 2) w.push_back(kernel.w);
  weight = zeros(dtype, w);
  if (with_bias) bias = zeros(dtype, {out_channels});
}

template <int D>
ConvTranspose<D>& ConvTranspose<D>::configure(const Options& o) {
  stride = Int2(o.stride);
  padding = Int2(o.padding);
  output_padding = Int2(o.output_padding);
  dilation = Int2(o.dilation);
  groups = o.groups;
  return *this;
}

template <int D>
Tensor ConvTranspose<D>::forward(const Tensor& x) const {
  require_settings(kKind,
                   {{"stride", stride.is_set()},
                    {"padding", padding.is_set()},
                    {"output_padding", output_padding.is_set()},
                    {"dilation", dilation.is_set()},
                    {"groups", groups.is_set()}},
                   std::string("construct it with them, ") + std::string(kKind) +
                       "(in_channels, out_channels, kernel, stride, padding, output_padding, "
                       "dilation, groups, bias), or set them: conv.configure({.stride = 2}) (the "
                       "others at torch's defaults), or each alone (conv.stride = 2)");
  if constexpr (D == 1)
    return conv_transpose1d(x, weight, opt(bias),
                            {stride->h, padding->h, output_padding->h, dilation->h, groups});
  else
    return conv_transpose2d(x, weight, opt(bias),
                            {stride, padding, output_padding, dilation, groups});
}

template <int D>
BatchNorm<D>::BatchNorm(std::int64_t num_features, double eps_, bool affine, DType dtype)
    : running_mean(zeros(dtype, {num_features})),
      running_var(filled(dtype, {num_features}, 1.0)),
      num_batches_tracked(zeros(DType::I64, {})),
      eps(eps_) {
  if (affine) {
    gamma = filled(dtype, {num_features}, 1.0);
    beta = zeros(dtype, {num_features});
  }
}

template <int D>
Tensor BatchNorm<D>::forward(const Tensor& x) const {
  require_settings(kKind, {{"eps", eps.is_set()}},
                   std::string("construct it with it, ") + std::string(kKind) +
                       "(num_features, eps), or set it (norm.eps = 1e-5, torch's default)");
  if (!running_mean || !running_var)
    throw Error(ErrorCode::unsupported,
                "BatchNorm without running statistics (track_running_stats=False) "
                "normalises by batch statistics, which inference does not do");
  return batch_norm(x, *running_mean, *running_var, opt(gamma), opt(beta), eps);
}

template struct Conv<1>;
template struct Conv<2>;
template struct ConvTranspose<1>;
template struct ConvTranspose<2>;
template struct BatchNorm<1>;
template struct BatchNorm<2>;

LayerNorm::LayerNorm(Dims normalized_shape_, double eps_, bool affine, bool with_bias, DType dtype)
    : normalized_shape(std::move(normalized_shape_)), eps(eps_) {
  if (affine) {
    gamma = filled(dtype, normalized_shape, 1.0);
    if (with_bias) beta = zeros(dtype, normalized_shape);
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  require_settings(
      kKind, {{"eps", eps.is_set()}, {"normalized_shape", !normalized_shape.empty() || gamma}},
      "construct it with them, LayerNorm(normalized_shape, eps), or set them "
      "(norm.eps = 1e-5, torch's default; the shape is gamma's when there is one)");
  Dims shape = normalized_shape;
  if (shape.empty() && gamma) shape = gamma->shape();
  return layer_norm(x, shape, opt(gamma), opt(beta), eps);
}

GroupNorm::GroupNorm(std::int64_t num_groups_, std::int64_t num_channels, double eps_, bool affine,
                     DType dtype)
    : num_groups(num_groups_), eps(eps_) {
  if (affine) {
    gamma = filled(dtype, {num_channels}, 1.0);
    beta = zeros(dtype, {num_channels});
  }
}

Tensor GroupNorm::forward(const Tensor& x) const {
  require_settings(kKind, {{"num_groups", num_groups.is_set()}, {"eps", eps.is_set()}},
                   "construct it with them, GroupNorm(num_groups, num_channels, eps), or set "
                   "them (norm.num_groups = 32; norm.eps = 1e-5, torch's default)");
  return group_norm(x, num_groups, opt(gamma), opt(beta), eps);
}

RMSNorm::RMSNorm(Dims normalized_shape_, double eps_, bool affine, DType dtype)
    : normalized_shape(std::move(normalized_shape_)), eps(eps_) {
  if (affine) gamma = filled(dtype, normalized_shape, 1.0);
}

Tensor RMSNorm::forward(const Tensor& x) const {
  require_settings(
      kKind, {{"eps", eps.is_set()}, {"normalized_shape", !normalized_shape.empty() || gamma}},
      "construct it with them, RMSNorm(normalized_shape, eps), or set them "
      "(norm.eps = the model's rms_norm_eps; the shape is gamma's when there is one)");
  Dims shape = normalized_shape;
  if (shape.empty() && gamma) shape = gamma->shape();
  return rms_norm(x, shape, opt(gamma), eps);
}

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, DType dtype)
    : weight(zeros(dtype, {num_embeddings, embedding_dim})) {}

Tensor Embedding::forward(const Tensor& indices) const {
  return embedding(indices, weight);
}

PReLU::PReLU(std::int64_t num_parameters, double init, DType dtype)
    : alpha(filled(dtype, {num_parameters}, init)) {}

Tensor PReLU::forward(const Tensor& x) const {
  return prelu(x, alpha);
}

MultiheadAttention::MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads_,
                                       bool with_bias, bool batch_first_, std::int64_t kdim,
                                       std::int64_t vdim, DType dtype)
    : query(embed_dim, embed_dim, with_bias, dtype),
      key(kdim > 0 ? kdim : embed_dim, embed_dim, with_bias, dtype),
      value(vdim > 0 ? vdim : embed_dim, embed_dim, with_bias, dtype),
      output(embed_dim, embed_dim, with_bias, dtype),
      num_heads(num_heads_),
      batch_first(batch_first_) {}

MultiheadAttention::Output MultiheadAttention::forward(const Tensor& q, const Tensor& k,
                                                       const Tensor& v,
                                                       const Tensor& key_padding_mask,
                                                       const Tensor& attn_mask,
                                                       bool need_weights) const {
  require_settings(kKind,
                   {{"num_heads", num_heads.is_set()}, {"batch_first", batch_first.is_set()}},
                   "construct it with them, MultiheadAttention(embed_dim, num_heads, bias, "
                   "batch_first), or set them (attn.num_heads = 8; attn.batch_first = false, "
                   "torch's default)");
  if (bias_k || bias_v)
    throw Error(ErrorCode::unsupported,
                "MultiheadAttention with add_bias_kv=True: its forward pass is not implemented");
  MultiheadAttentionOptions o;
  o.num_heads = num_heads;
  o.batch_first = batch_first;
  o.attn_mask = attn_mask;
  o.key_padding_mask = key_padding_mask;
  o.need_weights = need_weights;
  auto r = multi_head_attention(q, k, v, query.weight, key.weight, value.weight, opt(query.bias),
                                opt(key.bias), opt(value.bias), output.weight, opt(output.bias), o);
  return {std::move(r.output), std::move(r.weights)};
}

GateController::GateController(std::int64_t input_size, std::int64_t hidden_size, bool with_bias,
                               DType dtype)
    : input_transform(input_size, hidden_size, with_bias, dtype),
      hidden_transform(hidden_size, hidden_size, with_bias, dtype) {}

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers,
           bool with_bias, bool batch_first_, DType dtype)
    : batch_first(batch_first_) {
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const std::int64_t in = l == 0 ? input_size : hidden_size;
    layers.push_back({GateController(in, hidden_size, with_bias, dtype),
                      GateController(in, hidden_size, with_bias, dtype),
                      GateController(in, hidden_size, with_bias, dtype),
                      GateController(in, hidden_size, with_bias, dtype)});
  }
}

LSTM::Output LSTM::forward(const Tensor& input, const Tensor& h0, const Tensor& c0) const {
  require_settings(kKind, {{"batch_first", batch_first.is_set()}},
                   "construct it with it, LSTM(input_size, hidden_size, num_layers, bias, "
                   "batch_first), or set it (lstm.batch_first = false, torch's default)");
  std::vector<LstmLayerWeights> weights;
  for (const auto& layer : layers) {
    LstmLayerWeights w;
    const GateController* gates[] = {&layer.input_gate, &layer.forget_gate, &layer.cell_gate,
                                     &layer.output_gate};
    for (std::size_t g = 0; g < 4; ++g) {
      w.w_ih[g] = gates[g]->input_transform.weight;
      w.w_hh[g] = gates[g]->hidden_transform.weight;
      w.b_ih[g] = opt(gates[g]->input_transform.bias);
      w.b_hh[g] = opt(gates[g]->hidden_transform.bias);
    }
    weights.push_back(std::move(w));
  }
  LstmOptions o;
  o.batch_first = batch_first;
  o.h0 = h0;
  o.c0 = c0;
  auto r = lstm(input, weights, o);
  return {std::move(r.output), std::move(r.h_n), std::move(r.c_n)};
}

GRU::GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, bool with_bias,
         bool batch_first_, DType dtype)
    : batch_first(batch_first_) {
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const std::int64_t in = l == 0 ? input_size : hidden_size;
    layers.push_back({GateController(in, hidden_size, with_bias, dtype),
                      GateController(in, hidden_size, with_bias, dtype),
                      GateController(in, hidden_size, with_bias, dtype)});
  }
}

}  // namespace torchport::nn
