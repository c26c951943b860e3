#include "input.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "torchport/core/error.hpp"

namespace torchport::cli {
namespace {

[[noreturn]] void too_large(const Limits& limits) {
  throw torchport::Error(ErrorCode::limit_exceeded,
                         "standard input holds more than Limits::max_stdin_bytes (" +
                             std::to_string(limits.max_stdin_bytes) +
                             " bytes), which are read into memory: write it to a file and name "
                             "that",
                         {}, std::nullopt, "<stdin>");
}

}  // namespace

CLI::Validator existing_path_or_stdin() {
  return CLI::Validator(
      [](std::string& s) { return is_stdin(s) ? std::string() : CLI::ExistingPath(s); },
      "PATH or - (standard input)");
}

Source read_stdin(const Limits& limits) {
  // Redirected from a file (`< model.pt`): mapped, as a named file is (no
  // memory of its own, so no limit beyond a named file's).
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
    const Source mapped = Source::map_file("/proc/self/fd/0");
    return mapped.slice(0, mapped.size(), "<stdin>");
  }
  // A pipe: read in pieces, then joined once (twice the input at the peak,
  // never more; growing one buffer would copy and zero-fill as it grows).
  constexpr std::size_t kPiece = std::size_t{16} << 20;
  std::vector<std::vector<std::byte>> pieces;
  std::uint64_t total = 0;
  for (;;) {
    if (pieces.empty() || pieces.back().size() == kPiece) {
      pieces.emplace_back();
      pieces.back().reserve(kPiece);
    }
    std::vector<std::byte>& piece = pieces.back();
    const std::size_t used = piece.size();
    piece.resize(kPiece);
    const ssize_t n = ::read(STDIN_FILENO, piece.data() + used, kPiece - used);
    piece.resize(used + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw torchport::Error(ErrorCode::io,
                             std::string("cannot read standard input: ") + std::strerror(errno), {},
                             std::nullopt, "<stdin>");
    }
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    if (total > limits.max_stdin_bytes) too_large(limits);
  }
  std::vector<std::byte> bytes;
  bytes.reserve(static_cast<std::size_t>(total));
  for (auto& piece : pieces) {
    bytes.insert(bytes.end(), piece.begin(), piece.end());
    std::vector<std::byte>().swap(piece);
  }
  return Source::from_buffer(std::move(bytes), "<stdin>");
}

TensorCatalog open_input(const std::string& path, const OpenOptions& options) {
  if (!is_stdin(path)) return open(path, options);
  return open(read_stdin(options.limits), options);
}

}  // namespace torchport::cli
