#include "format.hpp"

#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include <fmt/format.h>

namespace torchport::cli {

std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string grouped(std::uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

std::string counted(std::uint64_t n, std::string_view noun, std::string_view plural) {
  if (n == 1) return fmt::format("1 {}", noun);
  if (!plural.empty()) return fmt::format("{} {}", n, plural);
  return fmt::format("{} {}s", n, noun);
}

bool colour_enabled(int fd) {
  const char* no_colour = std::getenv("NO_COLOR");
  if (no_colour != nullptr && no_colour[0] != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  return ::isatty(fd) == 1;
}

std::string styled(std::string_view text, Style style, bool on) {
  if (!on) return std::string(text);
  const char* code = "";
  switch (style) {
    case Style::bold:
      code = "1";
      break;
    case Style::dim:
      code = "2";
      break;
    case Style::green:
      code = "32";
      break;
    case Style::yellow:
      code = "33";
      break;
    case Style::red:
      code = "31";
      break;
  }
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

}  // namespace torchport::cli
