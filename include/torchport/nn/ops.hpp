#pragma once
/// \file
/// The CPU reference backend: free-function forward ops whose results match
/// PyTorch's, for the nn modules built on top of them.
///
/// \code
/// #include <torchport/nn/ops.hpp>
/// namespace nn = torchport::nn;
/// auto cat = torchport::open("model.pt");
/// torchport::Tensor y = nn::conv2d(x, *cat.find("conv1.weight"), *cat.find("conv1.bias"),
///                                  {.stride = 2, .padding = 1});
/// y = nn::relu(nn::batch_norm(y, mean, var, gamma, beta));
/// \endcode
///
/// Contract shared by every op (each header states its exceptions):
/// - Inputs are `const Tensor&` of any strides (views are read through
///   their strides or made contiguous first); nothing is modified.
/// - Arithmetic happens in F32, or in F64 when an operand is F64. F16 and
///   BF16 operands are converted to F32 first (`Tensor::to`), so a BF16
///   checkpoint runs in F32; integer operands are refused except where an
///   op takes indices. Ops that only move elements (`concat`, `slice`,
///   `flatten`, `repeat_kv`) keep the dtype.
/// - Results are fresh, owned, contiguous tensors sharing no storage with
///   the inputs.
/// - Optional operands (biases, affine parameters, masks, initial states)
///   are undefined tensors (`Tensor()`) when absent.
/// - Errors are `torchport::Error`: `shape_mismatch` when shapes disagree,
///   `invalid_argument` for bad arguments, undefined required operands and
///   unsupported dtypes, `limit_exceeded` for sizes beyond BLAS's 32-bit
///   integers; messages start with the op's name and give the shapes. No op
///   asserts or aborts on bad input.
/// - Layout: `linear`, `multi_head_attention` and `lstm` take weights as
///   **[in, out]** (torch's nn.Linear stores [out, in]: pass its transpose;
///   a transposed view costs no copy in `linear`). Convolutions take torch's
///   layouts unchanged.
/// - Dropout is the identity at inference, so there is no dropout op; the
///   ops that torch would apply dropout in (attention, LSTM) skip it.
/// - Threads: matrix products use OpenBLAS (and its thread pool); the other
///   loops run on the calling thread. The ops keep no state of their own,
///   so they may be called from several threads at once.

#include "torchport/nn/activation.hpp"
#include "torchport/nn/attention.hpp"
#include "torchport/nn/conv.hpp"
#include "torchport/nn/elementwise.hpp"
#include "torchport/nn/embedding.hpp"
#include "torchport/nn/linalg.hpp"
#include "torchport/nn/norm.hpp"
#include "torchport/nn/pool.hpp"
#include "torchport/nn/recurrent.hpp"
#include "torchport/nn/reduce.hpp"
#include "torchport/nn/shape.hpp"
#include "torchport/nn/types.hpp"
