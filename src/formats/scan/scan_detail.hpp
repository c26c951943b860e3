#pragma once
// What the scan's two files share (internal to src/formats/scan): a file
// scanned with access to the files beside it, which a loader reads together
// (shelve over dbm.dumb reads `NAME.dat` at the offsets `NAME.dir` lists).

#include <functional>
#include <optional>
#include <string>

#include "torchport/formats/scan.hpp"

namespace torchport::scan_detail {

/// Opens the file named `name` in the folder of the file being scanned (a
/// name the scan makes, never one the file holds), or nothing when there
/// is no such regular file (or, in a folder's scan, it lies outside).
using Beside = std::function<std::optional<Source>(const std::string& name)>;

/// `scan(source, options)` of the file `file_name` (its name in its
/// folder), whose neighbours `beside` opens.
ScanReport scan_beside(const Source& source, const OpenOptions& options,
                       const std::string& file_name, const Beside& beside);

}  // namespace torchport::scan_detail
