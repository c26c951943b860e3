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
#include "torchport/formats/compare.hpp"
#include "torchport/formats/densify.hpp"
#include "torchport/formats/module_tree.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/open/format.hpp"
#include "torchport/formats/quantize.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/formats/slice.hpp"
#include "torchport/formats/transform.hpp"
#include "torchport/io/atomic_file.hpp"
#include "torchport/io/gzip.hpp"
#include "torchport/io/source.hpp"
#include "torchport/io/zip_writer.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/nn/ops.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/load.hpp"
#include "torchport/record/precision.hpp"
#include "torchport/record/remap.hpp"
#include "torchport/record/report.hpp"
#include "torchport/record/save.hpp"
#include "torchport/record/shard_plan.hpp"
#include "torchport/record/shard_reads.hpp"
#include "torchport/recorders/recorder.hpp"
#include "torchport/version.hpp"
