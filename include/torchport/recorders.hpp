#pragma once
/// \file
/// The `recorders` component (CMake `torchport::recorders`, pkg-config
/// `torchport-recorders`): typed modules saved in and loaded from our own
/// record files (`save(module, path, NamedMpk{})`, `save_to_bytes`,
/// `load_from_bytes`). Header-only, over the `record` component.

#include "torchport/record.hpp"
#include "torchport/recorders/recorder.hpp"
