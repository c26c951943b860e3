#pragma once
/// \file
/// The nn modules as records: their parameters and buffers in torchport's
/// layout, their configuration, and a kind the adapters key on.
///
/// Layout differences from PyTorch (handled by `PyTorchAdapter`): Linear's
/// weight is [in, out]; norms name their affine parameters gamma and beta;
/// PReLU's weight is alpha; attention and recurrent modules hold one Linear
/// per projection or gate. Constructors make zero-filled parameters of the
/// right shapes (so a load can check every shape); a default-constructed
/// module has undefined tensors and takes its shapes from the file.
///
/// Each module's `forward` runs on the CPU backend (contiguous F32; F16 and
/// BF16 parameters are computed in F32).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/nn/types.hpp"
#include "torchport/record/fields.hpp"

namespace torchport::nn {

/// y = x W + b, with W stored [in, out].
struct Linear {
  static constexpr std::string_view kKind = "Linear";
  Tensor weight;               ///< [in_features, out_features]
  std::optional<Tensor> bias;  ///< [out_features]
  TORCHPORT_FIELDS(weight, bias)

  Linear() = default;
  Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias = true, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};

/// Convolution over D spatial dimensions (D = 1 or 2), torch's weight layout
/// [out, in / groups, kernel...].
template <int D>
struct Conv {
  static constexpr std::string_view kKind = D == 1 ? "Conv1d" : "Conv2d";
  Tensor weight;
  std::optional<Tensor> bias;  ///< [out_channels]
  Int2 stride{1};
  Int2 padding{0};
  Int2 dilation{1};
  std::int64_t groups = 1;
  TORCHPORT_FIELDS(weight, bias)

  Conv() = default;
  /// For D == 1 only the first value of `kernel`, `stride`, `padding`, `dilation` counts.
  Conv(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel, Int2 stride_ = 1, Int2 padding_ = 0,
       Int2 dilation_ = 1, std::int64_t groups_ = 1, bool with_bias = true, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};
using Conv1d = Conv<1>;
using Conv2d = Conv<2>;

/// Transposed convolution, torch's weight layout [in, out / groups, kernel...].
template <int D>
struct ConvTranspose {
  static constexpr std::string_view kKind = D == 1 ? "ConvTranspose1d" : "ConvTranspose2d";
  Tensor weight;
  std::optional<Tensor> bias;
  Int2 stride{1};
  Int2 padding{0};
  Int2 output_padding{0};
  Int2 dilation{1};
  std::int64_t groups = 1;
  TORCHPORT_FIELDS(weight, bias)

  ConvTranspose() = default;
  ConvTranspose(std::int64_t in_channels, std::int64_t out_channels, Int2 kernel, Int2 stride_ = 1,
                Int2 padding_ = 0, Int2 output_padding_ = 0, Int2 dilation_ = 1, std::int64_t groups_ = 1,
                bool with_bias = true, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};
using ConvTranspose1d = ConvTranspose<1>;
using ConvTranspose2d = ConvTranspose<2>;

/// Batch normalisation with running statistics (inference).
template <int D>
struct BatchNorm {
  static constexpr std::string_view kKind = D == 1 ? "BatchNorm1d" : "BatchNorm2d";
  std::optional<Tensor> gamma;  ///< [num_features]; absent when affine=False
  std::optional<Tensor> beta;
  std::optional<Tensor> running_mean;  ///< absent when track_running_stats=False
  std::optional<Tensor> running_var;
  std::optional<Tensor> num_batches_tracked;  ///< I64 scalar, kept so a round trip to PyTorch is faithful
  double eps = 1e-5;
  TORCHPORT_FIELDS(gamma, beta, running_mean, running_var, num_batches_tracked)

  BatchNorm() = default;
  explicit BatchNorm(std::int64_t num_features, double eps_ = 1e-5, bool affine = true, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};
using BatchNorm1d = BatchNorm<1>;
using BatchNorm2d = BatchNorm<2>;

/// Layer normalisation over the last dimensions.
struct LayerNorm {
  static constexpr std::string_view kKind = "LayerNorm";
  std::optional<Tensor> gamma;
  std::optional<Tensor> beta;
  Dims normalized_shape;
  double eps = 1e-5;
  TORCHPORT_FIELDS(gamma, beta)

  LayerNorm() = default;
  explicit LayerNorm(Dims normalized_shape_, double eps_ = 1e-5, bool affine = true, bool with_bias = true,
                     DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};

/// Group normalisation.
struct GroupNorm {
  static constexpr std::string_view kKind = "GroupNorm";
  std::optional<Tensor> gamma;
  std::optional<Tensor> beta;
  std::int64_t num_groups = 1;
  double eps = 1e-5;
  TORCHPORT_FIELDS(gamma, beta)

  GroupNorm() = default;
  GroupNorm(std::int64_t num_groups_, std::int64_t num_channels, double eps_ = 1e-5, bool affine = true,
            DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};

/// Root-mean-square normalisation (Llama's RMSNorm, torch.nn.RMSNorm).
struct RMSNorm {
  static constexpr std::string_view kKind = "RMSNorm";
  std::optional<Tensor> gamma;
  Dims normalized_shape;
  double eps = 1e-6;
  TORCHPORT_FIELDS(gamma)

  RMSNorm() = default;
  explicit RMSNorm(Dims normalized_shape_, double eps_ = 1e-6, bool affine = true, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};

/// A lookup table of embeddings.
struct Embedding {
  static constexpr std::string_view kKind = "Embedding";
  Tensor weight;  ///< [num_embeddings, embedding_dim]
  TORCHPORT_FIELDS(weight)

  Embedding() = default;
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, DType dtype = DType::F32);
  Tensor forward(const Tensor& indices) const;
};

/// Parametric ReLU.
struct PReLU {
  static constexpr std::string_view kKind = "PReLU";
  Tensor alpha;  ///< [num_parameters]
  TORCHPORT_FIELDS(alpha)

  PReLU() = default;
  explicit PReLU(std::int64_t num_parameters = 1, double init = 0.25, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
};

/// torch.nn.MultiheadAttention with its projections split.
struct MultiheadAttention {
  static constexpr std::string_view kKind = "MultiheadAttention";
  Linear query, key, value, output;
  std::optional<Tensor> bias_k;  ///< add_bias_kv
  std::optional<Tensor> bias_v;
  std::int64_t num_heads = 1;
  bool batch_first = false;
  TORCHPORT_FIELDS(query, key, value, output, bias_k, bias_v)

  MultiheadAttention() = default;
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads_, bool with_bias = true, bool batch_first_ = false,
                     std::int64_t kdim = 0, std::int64_t vdim = 0, DType dtype = DType::F32);

  struct Output {
    Tensor output;
    Tensor weights;  ///< averaged over heads; undefined unless asked for
  };
  /// `attn_mask`: bool (true = masked) or additive float, [L, S] or
  /// [batch * heads, L, S]; `key_padding_mask`: [batch, S].
  Output forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask = Tensor(),
                 const Tensor& attn_mask = Tensor(), bool need_weights = false) const;
};

/// One gate of a recurrent cell: input and hidden projections.
struct GateController {
  Linear input_transform;
  Linear hidden_transform;
  TORCHPORT_FIELDS(input_transform, hidden_transform)

  GateController() = default;
  GateController(std::int64_t input_size, std::int64_t hidden_size, bool with_bias, DType dtype);
};

/// One LSTM layer: gates i, f, g, o.
struct LstmLayer {
  GateController input_gate, forget_gate, cell_gate, output_gate;
  TORCHPORT_FIELDS(input_gate, forget_gate, cell_gate, output_gate)
};

/// A (stacked) LSTM.
struct LSTM {
  static constexpr std::string_view kKind = "LSTM";
  std::vector<LstmLayer> layers;
  bool batch_first = false;
  TORCHPORT_FIELDS(layers)

  LSTM() = default;
  LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool with_bias = true,
       bool batch_first_ = false, DType dtype = DType::F32);

  struct Output {
    Tensor output;  ///< every step of the last layer
    Tensor h_n;     ///< [num_layers, batch, hidden]
    Tensor c_n;
  };
  Output forward(const Tensor& input, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor()) const;
};

/// One GRU layer: gates r, z, n.
struct GruLayer {
  GateController reset_gate, update_gate, new_gate;
  TORCHPORT_FIELDS(reset_gate, update_gate, new_gate)
};

/// A (stacked) GRU (record only; its forward pass is not implemented).
struct GRU {
  static constexpr std::string_view kKind = "GRU";
  std::vector<GruLayer> layers;
  bool batch_first = false;
  TORCHPORT_FIELDS(layers)

  GRU() = default;
  GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool with_bias = true,
      bool batch_first_ = false, DType dtype = DType::F32);
};

}  // namespace torchport::nn
