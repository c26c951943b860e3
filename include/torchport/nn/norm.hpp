#pragma once
/// \file
/// Normalisation layers' forward passes (inference): batch, layer, group and
/// RMS norm.
///
/// Common contract (see `torchport/nn/ops.hpp`): any floating dtype and any
/// strides in (F16/BF16 compute in F32); a fresh contiguous F32 (F64 when
/// any operand is F64) tensor of the input's shape out. Optional affine
/// parameters are passed as undefined tensors (`Tensor()`) when absent.
/// Statistics accumulate in double.

#include <cstdint>
#include <optional>

#include "torchport/core/tensor.hpp"
#include "torchport/nn/types.hpp"

namespace torchport::nn {

/// Batch norm with running statistics (torch's eval mode):
/// `(x - running_mean) / sqrt(running_var + eps) * weight + bias` per channel,
/// the channel being dimension 1 of `x` ([N, C], [N, C, L], [N, C, H, W], ...).
/// `running_mean`, `running_var`, `weight` and `bias` have C elements.
/// \throws Error(invalid_argument) when `x` has fewer than 2 dimensions;
/// Error(shape_mismatch) naming the shapes when a parameter does not have C elements.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

/// Layer norm over the last `normalized_shape.size()` dimensions, which must
/// equal `normalized_shape`; uses the biased variance. `weight`/`bias`, when
/// given, have shape `normalized_shape`.
/// \throws Error(shape_mismatch) naming the shapes.
Tensor layer_norm(const Tensor& x, const Dims& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

/// Group norm: the C channels (dimension 1 of `x`, [N, C, ...]) are split
/// into `num_groups` groups normalised together; `weight`/`bias` have C elements.
/// \throws Error(invalid_argument) when C is not divisible by `num_groups`
/// or `x` has fewer than 2 dimensions; Error(shape_mismatch) for parameters.
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

/// RMS norm over the last `normalized_shape.size()` dimensions (torch's
/// `F.rms_norm`, Llama's `RMSNorm`): `x / sqrt(mean(x^2) + eps) * weight`.
/// Without `eps` it is the compute dtype's machine epsilon, as torch; Llama
/// checkpoints name theirs (`rms_norm_eps`, typically 1e-5 or 1e-6).
/// \throws Error(shape_mismatch) naming the shapes.
Tensor rms_norm(const Tensor& x, const Dims& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

}  // namespace torchport::nn
