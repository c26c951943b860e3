#pragma once
// Text helpers for the tool's human output.

#include <cstdint>
#include <string>
#include <string_view>

namespace torchport::cli {

/// "241.7 MB" (decimal units, as file managers show sizes).
std::string human_bytes(std::uint64_t n);
/// "11,689,512".
std::string grouped(std::uint64_t n);
/// "1 tensor", "2 tensors", "0 tensors": `n` and `noun`, plural unless n is
/// 1 (`plural` when the noun does not take an s).
std::string counted(std::uint64_t n, std::string_view noun, std::string_view plural = {});

/// Terminal styles for human output.
enum class Style { bold, dim, green, yellow, red };
/// True when `fd` (1 or 2) is a terminal, `NO_COLOR` is unset or empty
/// (https://no-color.org) and `TERM` is not "dumb".
bool colour_enabled(int fd);
/// `text` wrapped in the style's escape codes when `on`, else `text`.
std::string styled(std::string_view text, Style style, bool on);

}  // namespace torchport::cli
