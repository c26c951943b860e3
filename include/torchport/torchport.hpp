#pragma once
/// \file
/// torchport: PyTorch checkpoints in C++, without libtorch or Python. This
/// header includes every component's (CMake `torchport::torchport`); a
/// program that only reads includes `torchport/read.hpp` and links
/// `torchport::read`.
///
/// \code
/// #include <torchport/torchport.hpp>
/// auto catalog = torchport::open("model.pt");
/// for (const auto& [name, tensor] : catalog.tensors())
///   std::printf("%s %s\n", name.c_str(), tensor.description().c_str());
/// \endcode

#include "torchport/nn.hpp"
#include "torchport/read.hpp"
#include "torchport/record.hpp"
