#pragma once
/// \file
/// `scan_json()`: a `ScanReport` as the JSON `torchport scan --json` prints
/// (schema: docs/guide/8-cli.md), for programs that keep or forward it.

#include <string>

#include "torchport/formats/scan.hpp"

namespace torchport {

/// The report (and its members, nested) as `torchport scan --json FILE`
/// prints it for one file: keys in that order, `indent` spaces per level
/// (< 0: compact), invalid UTF-8 in names and messages replaced by U+FFFD.
/// Never throws for any report `scan()` returns.
std::string scan_json(const ScanReport& report, int indent = 2);

}  // namespace torchport
