#pragma once
/// \file
/// Activation functions, elementwise (torch.nn.functional's).
///
/// Common contract (see `torchport/nn/ops.hpp`): any floating dtype and any
/// strides in; a fresh contiguous F32 (F64 for F64 input) tensor out.
/// \throws Error(invalid_argument) on a non-floating or undefined input.

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// `max(x, 0)` (NaN stays NaN, as torch).
Tensor relu(const Tensor& x);

/// Which GELU formula to use (torch's `approximate=` argument).
enum class GeluApproximation {
  none,  ///< exact: `x/2 * (1 + erf(x/sqrt(2)))`
  tanh,  ///< `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`
};
/// GELU (torch.nn.functional.gelu).
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::none);
/// SiLU / swish: `x * sigmoid(x)`.
Tensor silu(const Tensor& x);
/// Logistic sigmoid `1 / (1 + e^-x)`.
Tensor sigmoid(const Tensor& x);
/// Hyperbolic tangent.
Tensor tanh(const Tensor& x);
/// `x` where positive, else `negative_slope * x`.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// PReLU: `x` where positive, else `weight[c] * x`, with `c` the channel,
/// i.e. dimension 1 of `x`. `weight` holds one value (shared by all
/// channels) or `x.size(1)` values; a 0- or 1-d `x` has no channel dimension
/// and needs a single value.
/// \throws Error(shape_mismatch) naming both shapes when `weight` has another
/// number of elements.
Tensor prelu(const Tensor& x, const Tensor& weight);

}  // namespace torchport::nn
