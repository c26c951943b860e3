#pragma once
/// \file
/// The `record` component (CMake `torchport::record`, pkg-config
/// `torchport-record`): typed loading and saving of the user's modules
/// (`TORCHPORT_FIELDS`, `load()`, `to_value()`, key remapping and filters,
/// adapters, precision, the load report), over the `read` component. Adds
/// PCRE2 (the remap and filter patterns).

#include "torchport/read.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/load.hpp"
#include "torchport/record/precision.hpp"
#include "torchport/record/remap.hpp"
#include "torchport/record/report.hpp"
#include "torchport/record/save.hpp"
#include "torchport/record/shard_plan.hpp"
#include "torchport/record/shard_reads.hpp"
