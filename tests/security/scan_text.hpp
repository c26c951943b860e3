#pragma once
// A scan report as text, for the scan tests' failure messages: the verdict,
// format and reading, each finding, and each member's report indented.

#include <string>

#include "torchport/formats/scan.hpp"

namespace torchport::test {

inline std::string describe(const ScanReport& r, const std::string& indent = "") {
  std::string s = indent + std::string(scan_verdict_name(r.verdict)) + " (" + r.format +
                  ", reading " + r.reading + ")";
  for (const auto& f : r.findings)
    s += "\n" + indent + "  " + std::string(scan_verdict_name(f.severity)) + ": " + f.where + ": " +
         f.reason + " [" + f.global + "] " + f.message;
  for (const auto& m : r.members) s += "\n" + describe(m, indent + "  ");
  return s;
}

}  // namespace torchport::test
