#pragma once
// Text helpers for the tool's human output.

#include <cstdint>
#include <string>

namespace torchport::cli {

/// "241.7 MB" (decimal units, as file managers show sizes).
std::string human_bytes(std::uint64_t n);
/// "11,689,512".
std::string grouped(std::uint64_t n);

}  // namespace torchport::cli
