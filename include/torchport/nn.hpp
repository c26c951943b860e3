#pragma once
/// \file
/// The `nn` component (CMake `torchport::nn`, pkg-config `torchport-nn`):
/// the module records (`nn::Linear`, `nn::Conv2d`, ...) with their forward
/// passes and the CPU operations, over the `record` component. Adds
/// OpenBLAS.

#include "torchport/nn/modules.hpp"
#include "torchport/nn/ops.hpp"
#include "torchport/record.hpp"
