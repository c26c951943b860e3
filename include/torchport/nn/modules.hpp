#pragma once
/// \file
/// The nn modules as records: their parameters and buffers in torchport's
/// layout, their configuration, a kind, and how PyTorch lays them out.
///
/// Layout differences from PyTorch, each declared by its module as
/// `kPyTorchLayout` (see `torchport/record/layout.hpp`; `PyTorchAdapter`
/// applies them on load and undoes them on save):
///
/// | module | PyTorch | here |
/// |---|---|---|
/// | Linear | weight [out, in] | weight [in, out] |
/// | BatchNorm1d/2d, LayerNorm, GroupNorm | weight, bias | gamma, beta |
/// | RMSNorm | weight | gamma |
/// | PReLU | weight | alpha |
/// | MultiheadAttention | in_proj_weight/bias (or q/k/v_proj_weight), out_proj | query, key, value,
/// output (Linear) | | LSTM | weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} (gates i,
/// f, g, o) | layers[k].{input,forget,cell,output}_gate.{input,hidden}_transform | | GRU | the same
/// with gates r, z, n | layers[k].{reset,update,new}_gate.{input,hidden}_transform |
///
/// Convolutions and embeddings keep PyTorch's layout and declare none.
/// A bidirectional recurrent module's `_reverse` entries are no rule's: they
/// stay unused. Constructors make zero-filled parameters of the
/// right shapes (so a load can check every shape) and set the module's
/// configuration. A default-constructed module has undefined tensors, which
/// take their shapes from the file, and an unset configuration (its
/// `Setting` members: a convolution's stride, padding, dilation and groups,
/// a norm's eps, attention's heads), which no checkpoint records: its
/// `forward` throws Error(invalid_argument) naming each unset setting until
/// it is set.
///
/// Each module's `forward` runs on the CPU backend (contiguous F32; F16 and
/// BF16 parameters are computed in F32).

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/nn/conv.hpp"
#include "torchport/nn/types.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/layout.hpp"

namespace torchport::nn {

/// y = x W + b, with W stored [in, out].
struct Linear {
  static constexpr std::string_view kKind = "Linear";  ///< the kind adapters key on
  Tensor weight;                                       ///< [in_features, out_features]
  std::optional<Tensor> bias;                          ///< [out_features]
  TORCHPORT_FIELDS(weight, bias)
  /// PyTorch stores the weight [out_features, in_features].
  static constexpr LayoutRule kPyTorchLayout[] = {LayoutRule::transposed("weight")};

  Linear() = default;
  /// Zero-filled `weight` [in_features, out_features] and, when `with_bias`,
  /// `bias` [out_features], of `dtype`.
  Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias = true,
         DType dtype = DType::F32);
  /// `linear(x, weight, bias)`: [..., in_features] to [..., out_features].
  Tensor forward(const Tensor& x) const;
};

/// Convolution over D spatial dimensions (D = 1 or 2), torch's weight layout
/// [out, in / groups, kernel...]. `stride`, `padding`, `dilation` and
/// `groups` are configuration, not part of the record: the constructor sets
/// them; a default-constructed module leaves them unset, and `forward`
/// refuses to run until each is set to the model's.
template <int D>
struct Conv {
  /// The kind adapters key on.
  static constexpr std::string_view kKind = D == 1 ? "Conv1d" : "Conv2d";
  Tensor weight;                 ///< [out_channels, in_channels / groups, kernel...]
  std::optional<Tensor> bias;    ///< [out_channels]
  Setting<Int2> stride;          ///< step between output positions, >= 1
  Setting<Int2> padding;         ///< zeros added on both sides, >= 0
  Setting<Int2> dilation;        ///< spacing between kernel taps, >= 1
  Setting<std::int64_t> groups;  ///< channel groups; in_channels for depthwise
  TORCHPORT_FIELDS(weight, bias)

  /// Undefined tensors (the file gives them) and an unset configuration.
  Conv() = default;
  /// Zero-filled `weight` and, when `with_bias`, `bias`, of `dtype`, with the
  /// configuration given. For D == 1 only the first value of `kernel`,
  /// `stride`, `padding`, `dilation` counts.
  /// \throws Error(invalid_argument) when `groups_` is not positive or does
  /// not divide both channel counts.
  Conv(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel, Int2 stride_ = 1,
       Int2 padding_ = 0, Int2 dilation_ = 1, std::int64_t groups_ = 1, bool with_bias = true,
       DType dtype = DType::F32);
  /// The options of `conv1d` or `conv2d`, whose defaults are torch's.
  using Options = std::conditional_t<D == 1, Conv1dOptions, Conv2dOptions>;
  /// Sets the whole configuration: `conv.configure({.stride = 2, .padding = 3})`
  /// sets stride and padding and, as torch's constructor does, dilation 1
  /// and groups 1.
  Conv& configure(const Options& options);
  /// `conv1d` or `conv2d` of `x` ([N, C_in, ...] or unbatched [C_in, ...])
  /// with this module's parameters and configuration.
  /// \throws Error(invalid_argument) naming the settings that are unset.
  Tensor forward(const Tensor& x) const;
};
using Conv1d = Conv<1>;  ///< torch.nn.Conv1d
using Conv2d = Conv<2>;  ///< torch.nn.Conv2d

/// Transposed convolution over D spatial dimensions (D = 1 or 2), torch's
/// weight layout [in, out / groups, kernel...]. As for `Conv`, the members
/// after `bias` are configuration, not part of the record.
template <int D>
struct ConvTranspose {
  /// The kind adapters key on.
  static constexpr std::string_view kKind = D == 1 ? "ConvTranspose1d" : "ConvTranspose2d";
  Tensor weight;                 ///< [in_channels, out_channels / groups, kernel...]
  std::optional<Tensor> bias;    ///< [out_channels]
  Setting<Int2> stride;          ///< >= 1
  Setting<Int2> padding;         ///< removed from both sides of the full output, >= 0
  Setting<Int2> output_padding;  ///< extra rows/columns on one side; < stride or < dilation
  Setting<Int2> dilation;        ///< >= 1
  Setting<std::int64_t> groups;  ///< >= 1
  TORCHPORT_FIELDS(weight, bias)

  /// Undefined tensors (the file gives them) and an unset configuration.
  ConvTranspose() = default;
  /// Zero-filled `weight` and, when `with_bias`, `bias`, of `dtype`, with the
  /// configuration given. For D == 1 only the first value of each `Int2` counts.
  /// \throws Error(invalid_argument) when `groups_` is not positive or does
  /// not divide both channel counts.
  ConvTranspose(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel, Int2 stride_ = 1,
                Int2 padding_ = 0, Int2 output_padding_ = 0, Int2 dilation_ = 1,
                std::int64_t groups_ = 1, bool with_bias = true, DType dtype = DType::F32);
  /// The options of `conv_transpose1d` or `conv_transpose2d`, whose defaults are torch's.
  using Options = std::conditional_t<D == 1, ConvTranspose1dOptions, ConvTranspose2dOptions>;
  /// Sets the whole configuration, the options not given at torch's defaults.
  ConvTranspose& configure(const Options& options);
  /// `conv_transpose1d` or `conv_transpose2d` of `x` ([N, C_in, ...] or
  /// unbatched [C_in, ...]) with this module's parameters and configuration.
  /// \throws Error(invalid_argument) naming the settings that are unset.
  Tensor forward(const Tensor& x) const;
};
using ConvTranspose1d = ConvTranspose<1>;  ///< torch.nn.ConvTranspose1d
using ConvTranspose2d = ConvTranspose<2>;  ///< torch.nn.ConvTranspose2d

/// Batch normalisation with running statistics (inference).
template <int D>
struct BatchNorm {
  /// The kind adapters key on.
  static constexpr std::string_view kKind = D == 1 ? "BatchNorm1d" : "BatchNorm2d";
  std::optional<Tensor> gamma;         ///< [num_features]; absent when affine=False
  std::optional<Tensor> beta;          ///< [num_features]; absent when affine=False
  std::optional<Tensor> running_mean;  ///< absent when track_running_stats=False
  std::optional<Tensor> running_var;   ///< [num_features]; absent when track_running_stats=False
  std::optional<Tensor>
      num_batches_tracked;  ///< I64 scalar, kept so a round trip to PyTorch is faithful
  Setting<double> eps;      ///< added to the variance (configuration, not recorded)
  TORCHPORT_FIELDS(gamma, beta, running_mean, running_var, num_batches_tracked)
  /// PyTorch names the affine parameters weight and bias.
  static constexpr LayoutRule kPyTorchLayout[] = {LayoutRule::renamed("weight", "gamma"),
                                                  LayoutRule::renamed("bias", "beta")};

  BatchNorm() = default;
  /// Running mean 0 and variance 1 ([num_features], `dtype`),
  /// `num_batches_tracked` 0, and when `affine` gamma 1 and beta 0.
  explicit BatchNorm(std::int64_t num_features, double eps_ = 1e-5, bool affine = true,
                     DType dtype = DType::F32);
  /// `batch_norm` of `x` ([N, C, ...], channels in dimension 1) with the
  /// running statistics.
  /// \throws Error(unsupported) without running statistics (normalising by
  /// batch statistics is training-mode behaviour); Error(invalid_argument)
  /// when `eps` is unset.
  Tensor forward(const Tensor& x) const;
};
using BatchNorm1d = BatchNorm<1>;  ///< torch.nn.BatchNorm1d
using BatchNorm2d = BatchNorm<2>;  ///< torch.nn.BatchNorm2d

/// Layer normalisation over the last dimensions.
struct LayerNorm {
  static constexpr std::string_view kKind = "LayerNorm";  ///< the kind adapters key on
  std::optional<Tensor> gamma;  ///< [normalized_shape]; absent when elementwise_affine=False
  std::optional<Tensor> beta;   ///< [normalized_shape]; absent also when bias=False
  /// The trailing dimensions normalised over; when empty, `gamma`'s shape
  /// (configuration, not recorded).
  Dims normalized_shape;
  Setting<double> eps;  ///< added to the variance (configuration, not recorded)
  TORCHPORT_FIELDS(gamma, beta)
  /// PyTorch names the affine parameters weight and bias.
  static constexpr LayoutRule kPyTorchLayout[] = {LayoutRule::renamed("weight", "gamma"),
                                                  LayoutRule::renamed("bias", "beta")};

  LayerNorm() = default;
  /// When `affine`, gamma 1 and (when `with_bias`) beta 0, of shape
  /// `normalized_shape_` and `dtype`.
  explicit LayerNorm(Dims normalized_shape_, double eps_ = 1e-5, bool affine = true,
                     bool with_bias = true, DType dtype = DType::F32);
  /// `layer_norm` of `x` over its last `normalized_shape.size()` dimensions.
  /// \throws Error(invalid_argument) when `eps` is unset, or the shape is
  /// neither given nor `gamma`'s.
  Tensor forward(const Tensor& x) const;
};

/// Group normalisation.
struct GroupNorm {
  static constexpr std::string_view kKind = "GroupNorm";  ///< the kind adapters key on
  std::optional<Tensor> gamma;       ///< [num_channels]; absent when affine=False
  std::optional<Tensor> beta;        ///< [num_channels]; absent when affine=False
  Setting<std::int64_t> num_groups;  ///< groups the channels split into (configuration)
  Setting<double> eps;               ///< added to the variance (configuration, not recorded)
  TORCHPORT_FIELDS(gamma, beta)
  /// PyTorch names the affine parameters weight and bias.
  static constexpr LayoutRule kPyTorchLayout[] = {LayoutRule::renamed("weight", "gamma"),
                                                  LayoutRule::renamed("bias", "beta")};

  GroupNorm() = default;
  /// When `affine`, gamma 1 and beta 0 ([num_channels], `dtype`).
  GroupNorm(std::int64_t num_groups_, std::int64_t num_channels, double eps_ = 1e-5,
            bool affine = true, DType dtype = DType::F32);
  /// `group_norm` of `x` ([N, C, ...], channels in dimension 1).
  /// \throws Error(invalid_argument) naming the settings that are unset.
  Tensor forward(const Tensor& x) const;
};

/// Root-mean-square normalisation (Llama's RMSNorm, torch.nn.RMSNorm).
struct RMSNorm {
  static constexpr std::string_view kKind = "RMSNorm";  ///< the kind adapters key on
  std::optional<Tensor> gamma;  ///< [normalized_shape]; absent when elementwise_affine=False
  /// The trailing dimensions normalised over; when empty, `gamma`'s shape
  /// (configuration, not recorded).
  Dims normalized_shape;
  /// Added to the mean square (configuration, not recorded). Set the model's
  /// value (`rms_norm_eps`): torch's default, the dtype's epsilon, is not applied.
  Setting<double> eps;
  TORCHPORT_FIELDS(gamma)
  /// PyTorch names the scale weight.
  static constexpr LayoutRule kPyTorchLayout[] = {LayoutRule::renamed("weight", "gamma")};

  RMSNorm() = default;
  /// When `affine`, gamma 1 of shape `normalized_shape_` and `dtype`.
  explicit RMSNorm(Dims normalized_shape_, double eps_ = 1e-6, bool affine = true,
                   DType dtype = DType::F32);
  /// `rms_norm` of `x` over its last `normalized_shape.size()` dimensions.
  /// \throws Error(invalid_argument) when `eps` is unset, or the shape is
  /// neither given nor `gamma`'s.
  Tensor forward(const Tensor& x) const;
};

/// A lookup table of embeddings.
struct Embedding {
  static constexpr std::string_view kKind = "Embedding";  ///< the kind adapters key on
  Tensor weight;                                          ///< [num_embeddings, embedding_dim]
  TORCHPORT_FIELDS(weight)

  Embedding() = default;
  /// Zero-filled `weight` [num_embeddings, embedding_dim] of `dtype`.
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, DType dtype = DType::F32);
  /// `embedding(indices, weight)`: the rows picked by an I64 or I32 `indices`
  /// of any shape, giving `indices.shape() + [embedding_dim]`.
  Tensor forward(const Tensor& indices) const;
};

/// Parametric ReLU.
struct PReLU {
  static constexpr std::string_view kKind = "PReLU";  ///< the kind adapters key on
  Tensor alpha;                                       ///< [num_parameters]
  TORCHPORT_FIELDS(alpha)
  /// PyTorch names the slopes weight.
  static constexpr LayoutRule kPyTorchLayout[] = {LayoutRule::renamed("weight", "alpha")};

  /// An undefined `alpha`: its shape comes from the file.
  PReLU() = default;
  /// `alpha` [num_parameters] of `dtype`, every value `init`.
  explicit PReLU(std::int64_t num_parameters, double init = 0.25, DType dtype = DType::F32);
  /// `prelu(x, alpha)`: one slope shared, or one per channel (dimension 1).
  Tensor forward(const Tensor& x) const;
};

/// torch.nn.MultiheadAttention with its projections split.
struct MultiheadAttention {
  static constexpr std::string_view kKind = "MultiheadAttention";  ///< the kind adapters key on
  /// \var Linear query
  /// The query projection ([in, out] like every `Linear`): [E, E].
  /// \var Linear key
  /// The key projection: [kdim, E].
  /// \var Linear value
  /// The value projection: [vdim, E].
  /// \var Linear output
  /// The output projection: [E, E].
  Linear query, key, value, output;
  std::optional<Tensor> bias_k;     ///< add_bias_kv
  std::optional<Tensor> bias_v;     ///< add_bias_kv
  Setting<std::int64_t> num_heads;  ///< must divide the embedding size (configuration)
  Setting<bool> batch_first;        ///< inputs are [N, L, E], not [L, N, E] (configuration)
  TORCHPORT_FIELDS(query, key, value, output, bias_k, bias_v)
  /// PyTorch fuses the input projections into in_proj_weight [3E, E] and
  /// in_proj_bias [3E] (q, k, v), or keeps q/k/v_proj_weight apart when kdim
  /// or vdim differ from E; the output projection is out_proj.
  static constexpr LayoutRule kPyTorchLayout[] = {
      LayoutRule::fused("in_proj_weight", "{part}.weight", {"query", "key", "value"},
                        {"q_proj_weight", "k_proj_weight", "v_proj_weight"}),
      LayoutRule::fused("in_proj_bias", "{part}.bias", {"query", "key", "value"}),
      LayoutRule::renamed("out_proj", "output"),
  };

  MultiheadAttention() = default;
  /// Zero-filled projections, with biases when `with_bias`, of `dtype`; a
  /// `kdim` or `vdim` of 0 means `embed_dim`.
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads_, bool with_bias = true,
                     bool batch_first_ = false, std::int64_t kdim = 0, std::int64_t vdim = 0,
                     DType dtype = DType::F32);

  /// What `forward` returns (torch's `attn_output, attn_output_weights`).
  struct Output {
    Tensor output;   ///< [L, N, E] ([N, L, E] with batch_first; [L, E] unbatched)
    Tensor weights;  ///< averaged over heads; undefined unless asked for
  };
  /// `multi_head_attention` with this module's projections: `q` [L, N, E],
  /// `k` [S, N, kdim], `v` [S, N, vdim] (batch first with `batch_first`; no
  /// N unbatched). `attn_mask`: bool (true = masked) or additive float, [L, S] or
  /// [batch * heads, L, S]; `key_padding_mask`: [batch, S]. `need_weights`
  /// also returns the attention weights.
  /// \throws Error(unsupported) when `bias_k` or `bias_v` is set;
  /// Error(invalid_argument) naming the settings that are unset; otherwise
  /// as `multi_head_attention`.
  Output forward(const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& key_padding_mask = Tensor(), const Tensor& attn_mask = Tensor(),
                 bool need_weights = false) const;
};

/// One gate of a recurrent cell: input and hidden projections.
struct GateController {
  Linear input_transform;   ///< the layer's input to the gate, [input_size, hidden_size]
  Linear hidden_transform;  ///< the previous hidden state to the gate, [hidden_size, hidden_size]
  TORCHPORT_FIELDS(input_transform, hidden_transform)

  GateController() = default;
  /// Zero-filled transforms of `dtype`, with biases when `with_bias`.
  GateController(std::int64_t input_size, std::int64_t hidden_size, bool with_bias, DType dtype);
};

/// PyTorch's layout of a stacked recurrent module whose layers hold one
/// GateController a gate: each layer's gates (`gates`, in the order PyTorch
/// stacks them) fused into weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k} and
/// bias_hh_l{k}.
constexpr std::array<LayoutRule, 4> recurrent_pytorch_layout(LayoutNames gates) {
  return {
      LayoutRule::fused("weight_ih_l{index}", "layers.{index}.{part}.input_transform.weight",
                        gates),
      LayoutRule::fused("bias_ih_l{index}", "layers.{index}.{part}.input_transform.bias", gates),
      LayoutRule::fused("weight_hh_l{index}", "layers.{index}.{part}.hidden_transform.weight",
                        gates),
      LayoutRule::fused("bias_hh_l{index}", "layers.{index}.{part}.hidden_transform.bias", gates),
  };
}

/// One LSTM layer: gates i, f, g, o.
struct LstmLayer {
  /// The gates' fields in PyTorch's order of the fused gate blocks.
  static constexpr LayoutNames kGates{"input_gate", "forget_gate", "cell_gate", "output_gate"};
  /// \var GateController input_gate
  /// Gate i, how much of the candidate enters the cell.
  /// \var GateController forget_gate
  /// Gate f, how much of the cell state is kept.
  /// \var GateController cell_gate
  /// Gate g, the candidate cell state (tanh).
  /// \var GateController output_gate
  /// Gate o, how much of the cell state is output.
  GateController input_gate, forget_gate, cell_gate, output_gate;
  TORCHPORT_FIELDS(input_gate, forget_gate, cell_gate, output_gate)
};

/// A (stacked) LSTM.
struct LSTM {
  static constexpr std::string_view kKind = "LSTM";         ///< the kind adapters key on
  static constexpr LayoutNames kGates = LstmLayer::kGates;  ///< the gates, in PyTorch's order
  std::vector<LstmLayer> layers;                            ///< bottom first, each feeding the next
  /// Input and output are [N, T, *] rather than [T, N, *] (configuration, not recorded).
  Setting<bool> batch_first;
  TORCHPORT_FIELDS(layers)
  /// PyTorch fuses each layer's gates (i, f, g, o) into weight_ih_l{k}
  /// [4 * hidden, input], weight_hh_l{k}, bias_ih_l{k} and bias_hh_l{k}.
  static constexpr auto kPyTorchLayout = recurrent_pytorch_layout(kGates);

  LSTM() = default;
  /// `num_layers` layers of zero-filled gates of `dtype`, with biases when
  /// `with_bias`: the first layer's input size is `input_size`, the others'
  /// `hidden_size`.
  LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
       bool with_bias = true, bool batch_first_ = false, DType dtype = DType::F32);

  /// What `forward` returns (torch's `output, (h_n, c_n)`).
  struct Output {
    Tensor output;  ///< every step of the last layer
    Tensor h_n;     ///< [num_layers, batch, hidden]
    Tensor c_n;     ///< every layer's final cell state, like h_n
  };
  /// `lstm` with this module's layers: `input` is [T, N, input_size]
  /// ([N, T, input_size] with batch_first, [T, input_size] unbatched); `h0`
  /// and `c0` are [num_layers, N, hidden], or undefined for zeros.
  /// \throws Error(invalid_argument | shape_mismatch) as `lstm`, or naming
  /// `batch_first` when it is unset.
  Output forward(const Tensor& input, const Tensor& h0 = Tensor(),
                 const Tensor& c0 = Tensor()) const;
};

/// One GRU layer: gates r, z, n.
struct GruLayer {
  /// The gates' fields in PyTorch's order of the fused gate blocks.
  static constexpr LayoutNames kGates{"reset_gate", "update_gate", "new_gate"};
  /// \var GateController reset_gate
  /// Gate r, how much of the hidden state the candidate sees.
  /// \var GateController update_gate
  /// Gate z, how much of the hidden state is kept.
  /// \var GateController new_gate
  /// Gate n, the candidate hidden state (tanh).
  GateController reset_gate, update_gate, new_gate;
  TORCHPORT_FIELDS(reset_gate, update_gate, new_gate)
};

/// A (stacked) GRU (record only; its forward pass is not implemented).
struct GRU {
  static constexpr std::string_view kKind = "GRU";         ///< the kind adapters key on
  static constexpr LayoutNames kGates = GruLayer::kGates;  ///< the gates, in PyTorch's order
  std::vector<GruLayer> layers;                            ///< bottom first, each feeding the next
  /// Input and output are [N, T, *] rather than [T, N, *] (configuration, not recorded).
  Setting<bool> batch_first;
  TORCHPORT_FIELDS(layers)
  /// PyTorch fuses each layer's gates (r, z, n) into weight_ih_l{k}
  /// [3 * hidden, input], weight_hh_l{k}, bias_ih_l{k} and bias_hh_l{k}.
  static constexpr auto kPyTorchLayout = recurrent_pytorch_layout(kGates);

  GRU() = default;
  /// `num_layers` layers of zero-filled gates of `dtype`, with biases when
  /// `with_bias`: the first layer's input size is `input_size`, the others'
  /// `hidden_size`.
  GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
      bool with_bias = true, bool batch_first_ = false, DType dtype = DType::F32);
};

}  // namespace torchport::nn
