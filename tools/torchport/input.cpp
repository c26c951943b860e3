#include "input.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "torchport/core/error.hpp"
#include "torchport/pickle/globals.hpp"
#ifdef TORCHPORT_HAVE_REMOTE
#include "torchport/io/remote.hpp"
#endif

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

void add_trust_options(CLI::App* sub, Trust& trust, bool allow) {
  std::string names;
  for (const pickle::Profile& p : pickle::profiles())
    names += std::string(names.empty() ? "" : ", ") + std::string(p.name);
  sub->add_option("--profile", trust.profiles,
                  "Trust a profile of a library's classes, each only in the one form in which "
                  "Python builds it without running its code (repeatable; known: " +
                      names + "; `torchport scan --list-profiles` lists them)");
  if (allow)
    sub->add_option("--allow", trust.allow,
                    "Trust a global beyond the allow-list: an exact module.name or module.* "
                    "(repeatable)");
}

void apply_trust(const Trust& trust, OpenOptions& options) {
  usage_checked([&] {
    pickle::validate_profiles(trust.profiles);
    pickle::validate_allow_patterns(trust.allow);
  });
  options.profiles = trust.profiles;
  options.allow = trust.allow;
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

OpenOptions with_remote(OpenOptions options) {
#ifdef TORCHPORT_HAVE_REMOTE
  if (!options.remote) options.remote = remote::opener();
#endif
  return options;
}

TensorCatalog open_input(const std::string& path, const OpenOptions& options) {
  note_input(path);
  if (!is_stdin(path)) return open(path, with_remote(options));
  return open(read_stdin(options.limits), options);
}

namespace {
std::vector<std::string>& noted() {
  static std::vector<std::string> inputs;
  return inputs;
}
}  // namespace

void note_input(const std::string& path) {
  const std::string shown = display_name(path);
  if (std::find(noted().begin(), noted().end(), shown) == noted().end()) noted().push_back(shown);
}

std::string error_line(const Error& e) {
  namespace fs = std::filesystem;
  std::string where = e.where();
  // The file the place starts with, up to a part of it (':' or '!'), as
  // the user typed it: an input named by its base name gets its folder back.
  const std::size_t cut = std::min(where.find(':'), where.find('!'));
  const std::string head = where.substr(0, cut);
  const std::string rest = cut == std::string::npos ? std::string() : where.substr(cut);
  for (const std::string& input : noted()) {
    if (head.empty() || head == input) break;
    std::error_code ec;
    const fs::path p(input);
    if (p.filename() == head) {
      where = input + rest;
      break;
    }
    if (head.find('/') == std::string::npos && fs::is_directory(p, ec) &&
        fs::exists(p / head, ec)) {  // a shard of a directory input
      where = (p / head).string() + rest;
      break;
    }
  }
  if (where.empty() && !noted().empty()) where = noted().front();
  std::string out = where.empty() ? std::string() : where + ": ";
  if (!e.key().empty()) out += "'" + e.key() + "': ";
  out += e.message();
  if (e.offset()) out += " (byte " + std::to_string(*e.offset()) + ")";
  return out;
}

bool is_trouble(const Error& e) {
  return e.code() == ErrorCode::io || e.code() == ErrorCode::not_a_checkpoint;
}

}  // namespace torchport::cli
