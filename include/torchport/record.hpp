#pragma once
/// \file
/// The `record` component (CMake `torchport::record`, pkg-config
/// `torchport-record`): typed modules, the user's structs (`TORCHPORT_FIELDS`,
/// typed `load()`, key remapping and filters, adapters, precision, the load
/// report, `to_value()` export, and modules saved to and loaded from our
/// record files with `save_record`), over the `read` component. Adds PCRE2
/// (the remap and filter patterns).

#include "torchport/read.hpp"
#include "torchport/record/adapter.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/files.hpp"
#include "torchport/record/load.hpp"
#include "torchport/record/precision.hpp"
#include "torchport/record/remap.hpp"
#include "torchport/record/report.hpp"
#include "torchport/record/shard_plan.hpp"
#include "torchport/record/shard_reads.hpp"
