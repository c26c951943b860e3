#pragma once
/// \file
/// The `read` component (CMake `torchport::read`, pkg-config
/// `torchport-read`): checkpoints read and written with no dependency beyond
/// zlib. `open()` and `TensorCatalog`, `Tensor` and `Value`, `save()` of
/// catalogues (safetensors, PyTorch, sharded), our own record files
/// (`write_record`, `read_record`), `scan()`, slices and transforms.
///
/// \code
/// #include <torchport/read.hpp>
/// auto catalog = torchport::open("model.pt");
/// for (const auto& [name, tensor] : catalog.tensors())
///   std::printf("%s %s\n", name.c_str(), tensor.description().c_str());
/// torchport::save(catalog, "model.safetensors", torchport::SaveFormat::safetensors);
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
#include "torchport/formats/compare.hpp"
#include "torchport/formats/densify.hpp"
#include "torchport/formats/format.hpp"
#include "torchport/formats/module_tree.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/prune.hpp"
#include "torchport/formats/quantize.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/formats/scan_json.hpp"
#include "torchport/formats/slice.hpp"
#include "torchport/formats/transform.hpp"
#include "torchport/io/atomic_file.hpp"
#include "torchport/io/source.hpp"
#include "torchport/version.hpp"
