#pragma once
/// \file
/// torchport: PyTorch checkpoints in C++, without libtorch or Python.
///
/// \code
/// #include <torchport/torchport.hpp>
/// auto catalog = torchport::open("model.pt");
/// for (const auto& [name, tensor] : catalog.tensors())
///   std::printf("%s %s\n", name.c_str(), tensor.description().c_str());
/// \endcode

#include "torchport/core/convert.hpp"
#include "torchport/core/dtype.hpp"
#include "torchport/core/error.hpp"
#include "torchport/core/half.hpp"
#include "torchport/core/limits.hpp"
#include "torchport/core/storage.hpp"
#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/io/source.hpp"
#include "torchport/version.hpp"
