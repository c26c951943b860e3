#include "input.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "torchport/core/error.hpp"

namespace torchport::cli {

CLI::Validator existing_path_or_stdin() {
  return CLI::Validator(
      [](std::string& s) { return is_stdin(s) ? std::string() : CLI::ExistingPath(s); },
      "PATH or - (standard input)");
}

Source read_stdin(const Limits& limits) {
  std::vector<std::byte> bytes;
  std::size_t used = 0;
  for (;;) {
    if (bytes.size() - used < (std::size_t{1} << 20))
      bytes.resize(std::max<std::size_t>(bytes.size() * 2, std::size_t{1} << 20));
    const ssize_t n = ::read(STDIN_FILENO, bytes.data() + used, bytes.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw torchport::Error(ErrorCode::io,
                             std::string("cannot read standard input: ") + std::strerror(errno), {},
                             std::nullopt, "<stdin>");
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
    if (used > limits.max_stdin_bytes)
      throw torchport::Error(
          ErrorCode::limit_exceeded,
          "standard input holds more than Limits::max_stdin_bytes (" +
              std::to_string(limits.max_stdin_bytes) +
              " bytes), which are read into memory: write it to a file and name that",
          {}, std::nullopt, "<stdin>");
  }
  bytes.resize(used);
  bytes.shrink_to_fit();
  return Source::from_buffer(std::move(bytes), "<stdin>");
}

TensorCatalog open_input(const std::string& path, const OpenOptions& options) {
  if (!is_stdin(path)) return open(path, options);
  return open(read_stdin(options.limits), options);
}

}  // namespace torchport::cli
