// scan_directory(): every file of a folder, each scanned by its content,
// following symbolic links only where the one shard resolver lets `open()`
// follow a shard's (inside the folder, or inside a Hugging Face cache
// repository for a snapshot folder).

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "formats/scan/scan_detail.hpp"
#include "torchport/core/error.hpp"
#include "torchport/detail/work.hpp"
#include "torchport/formats/scan.hpp"

namespace torchport {
namespace {

namespace fs = std::filesystem;

// fnmatch-like matching of one pattern against one path, '/' separated.
bool match(std::string_view p, std::string_view s) {
  // Iterative with one backtrack point for '*' and one for '**'.
  std::size_t pi = 0, si = 0;
  std::size_t star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi + 1 < p.size() && p[pi] == '*' && p[pi + 1] == '*') {
      // '**' (and a '/' after it) matches any number of folders.
      std::size_t next = pi + 2;
      if (next < p.size() && p[next] == '/') ++next;
      for (std::size_t k = si; k <= s.size(); ++k)
        if ((k == si || s[k - 1] == '/' || next == p.size()) && match(p.substr(next), s.substr(k)))
          return true;
      return false;
    }
    if (pi < p.size() && p[pi] == '*') {
      star_p = pi++;
      star_s = si;
      continue;
    }
    if (pi < p.size() && p[pi] == '[') {
      const std::size_t close = p.find(']', pi + 2);
      if (close != std::string_view::npos && s[si] != '/') {
        std::string_view set = p.substr(pi + 1, close - pi - 1);
        const bool negate = !set.empty() && (set[0] == '!' || set[0] == '^');
        if (negate) set.remove_prefix(1);
        bool in = false;
        for (std::size_t k = 0; k < set.size(); ++k) {
          if (k + 2 < set.size() && set[k + 1] == '-') {
            in = in || (s[si] >= set[k] && s[si] <= set[k + 2]);
            k += 2;
          } else {
            in = in || s[si] == set[k];
          }
        }
        if (in != negate) {
          pi = close + 1;
          ++si;
          continue;
        }
      }
    } else if (pi < p.size() && (p[pi] == s[si] || (p[pi] == '?' && s[si] != '/'))) {
      ++pi;
      ++si;
      continue;
    }
    // Backtrack: the last '*' takes one more character (never a '/').
    if (star_p != std::string_view::npos && s[star_s] != '/') {
      pi = star_p + 1;
      si = ++star_s;
      continue;
    }
    return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

ScanReport refused(const fs::path& f, const std::string& why) {
  ScanReport r;
  r.path = f.string();
  r.verdict = ScanVerdict::malformed;
  r.findings.push_back(
      {ScanVerdict::malformed, "malformed", "", false, why, f.string(), std::nullopt});
  return r;
}

}  // namespace

bool glob_matches(std::string_view pattern, std::string_view path) noexcept {
  return match(pattern, path);
}

namespace {

// An open directory, for openat-style steps: each folder is opened from its
// parent's descriptor by its name alone, so a folder 1,000 levels deep
// costs one step, not a resolution of its whole path (fs::canonical at
// each level made such a walk quadratic: 13 s of system time).
struct Dir {
  int fd = -1;
  explicit Dir(int f) : fd(f) {}
  ~Dir() {
    if (fd >= 0) ::close(fd);
  }
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
};

// One file found by the walk.
struct Found {
  fs::path path;    // as listed: the directory's path, then the names walked
  std::string rel;  // relative to the directory, '/' separated
  std::uint64_t size = 0;
  bool in_dcp = false;  // its folder holds a distributed checkpoint's .metadata
};

}  // namespace

std::vector<ScanReport> scan_directory(
    const fs::path& dir, const OpenOptions& options, const ScanFilter& filter,
    const std::function<void(std::uint64_t done, std::uint64_t total)>& progress) try {
  pickle::validate_allow_patterns(options.allow);
  const fs::path root = formats::shard_root(dir);
  const int top_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top_fd < 0)
    throw Error(ErrorCode::io, std::string("cannot list the directory: ") + std::strerror(errno),
                {}, std::nullopt, dir.string());
  std::vector<Found> files;
  std::vector<std::pair<fs::path, std::string>>
      bad;  // (path, why): links that lead out, FIFOs, ...
  std::vector<std::string> bad_rel;
  std::set<std::pair<dev_t, ino_t>> visited;  // real folders, against link cycles
  struct Todo {
    std::shared_ptr<Dir> dir;  // the folder, open
    fs::path path;
    std::string rel;
  };
  std::vector<Todo> todo;
  {
    auto d = std::make_shared<Dir>(top_fd);
    struct stat st {};
    if (::fstat(top_fd, &st) == 0) visited.insert({st.st_dev, st.st_ino});
    todo.push_back({std::move(d), dir, ""});
  }
  const auto too_many = [&] {
    throw Error(ErrorCode::limit_exceeded,
                "more than " + std::to_string(options.limits.max_entries) +
                    " files: exceeds Limits::max_entries; scan a smaller directory",
                {}, std::nullopt, dir.string());
  };
  // A folder to walk: opened from its parent by name (by its whole path
  // only when descriptors run out), once per real folder.
  const auto enter = [&](const Dir& parent, const char* name, const fs::path& path,
                         const std::string& rel, bool follow) {
    detail::count(detail::work().scan_steps, std::strlen(name) + 1);  // the name the OS resolves
    int fd =
        ::openat(parent.fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0 && (errno == EMFILE || errno == ENFILE))
      fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0)
      throw Error(ErrorCode::io, std::string("cannot list the directory: ") + std::strerror(errno),
                  {}, std::nullopt, path.string());
    auto d = std::make_shared<Dir>(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !visited.insert({st.st_dev, st.st_ino}).second) return;
    todo.push_back({std::move(d), path, rel});
  };
  while (!todo.empty()) {
    Todo t = std::move(todo.back());
    todo.pop_back();
    // Its own descriptor for the listing (closedir closes it); t.dir stays
    // open for the openat steps below.
    const int list_fd = ::dup(t.dir->fd);
    DIR* listing = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
    if (listing == nullptr) {
      if (list_fd >= 0) ::close(list_fd);
      throw Error(ErrorCode::io, std::string("cannot list the directory: ") + std::strerror(errno),
                  {}, std::nullopt, t.path.string());
    }
    std::unique_ptr<DIR, int (*)(DIR*)> closer(listing, ::closedir);
    struct stat meta {};
    const bool in_dcp =
        ::fstatat(t.dir->fd, ".metadata", &meta, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(meta.st_mode);
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(listing)) {
      const std::string_view n = e->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
    }
    if (errno != 0)
      throw Error(ErrorCode::io, std::string("cannot list the directory: ") + std::strerror(errno),
                  {}, std::nullopt, t.path.string());
    for (const std::string& n : names) {
      const fs::path path = t.path / n;
      const std::string rel = t.rel.empty() ? n : t.rel + "/" + n;
      struct stat st {};
      detail::count(detail::work().scan_steps, n.size() + 1);
      if (::fstatat(t.dir->fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
      if (S_ISLNK(st.st_mode)) {
        struct stat target {};
        const bool is_dir =
            ::fstatat(t.dir->fd, n.c_str(), &target, 0) == 0 && S_ISDIR(target.st_mode);
        try {
          (void)formats::resolve_inside(root, path, is_dir);
          if (is_dir) {
            enter(*t.dir, n.c_str(), path, rel, true);
          } else {
            files.push_back({path, rel, static_cast<std::uint64_t>(target.st_size), in_dcp});
          }
        } catch (const Error& e) {
          bad.emplace_back(path, e.message());
          bad_rel.push_back(rel);
        }
      } else if (S_ISDIR(st.st_mode)) {
        enter(*t.dir, n.c_str(), path, rel, false);
      } else if (S_ISREG(st.st_mode)) {
        files.push_back({path, rel, static_cast<std::uint64_t>(st.st_size), in_dcp});
      } else {
        bad.emplace_back(path, "not a regular file (a FIFO, device or socket); it is not read");
        bad_rel.push_back(rel);
      }
      if (files.size() + bad.size() > options.limits.max_entries) too_many();
    }
  }
  auto selected = [&](const std::string& rel) {
    if (!filter.include.empty() &&
        std::none_of(filter.include.begin(), filter.include.end(),
                     [&](const std::string& g) { return glob_matches(g, rel); }))
      return false;
    return std::none_of(filter.exclude.begin(), filter.exclude.end(),
                        [&](const std::string& g) { return glob_matches(g, rel); });
  };
  std::vector<ScanReport> out;
  for (std::size_t i = 0; i < bad.size(); ++i)
    if (selected(bad_rel[i])) out.push_back(refused(bad[i].first, bad[i].second));
  std::uint64_t total = 0, done = 0;
  if (progress)
    for (const Found& f : files)
      if (selected(f.rel)) total += f.size;
  for (const Found& f : files) {
    if (!selected(f.rel)) continue;
    if (progress) {
      progress(done, total);
      done += f.size;
    }
    OpenOptions o = options;
    o.format.reset();
    detail::count(detail::work().scan_steps, f.path.native().size());  // the path map_file opens
    try {
      // A distributed checkpoint is one unit: its .metadata names the
      // blobs in its .distcp files that a loader unpickles (a .distcp is
      // zips back to back, no file of its own); each is judged there.
      if (f.in_dcp) {
        if (f.path.extension() == ".distcp") continue;
        if (f.path.filename() == ".metadata") {
          ScanReport r = scan(f.path.parent_path(), o);
          r.path = f.path.parent_path().string();
          out.push_back(std::move(r));
          continue;
        }
      }
      // Each file by its content: an *.index.json is JSON here, and its
      // shards files of their own.
      // (With its neighbours: shelve's dbm.dumb reads NAME.dat through
      // NAME.dir; one inside the folder, as a shard would be.)
      const scan_detail::Beside beside = [&](const std::string& name) -> std::optional<Source> {
        const fs::path p = f.path.parent_path() / name;
        std::error_code ec;
        if (!fs::is_regular_file(p, ec)) return std::nullopt;
        return Source::map_file(formats::resolve_inside(root, p), o.map);
      };
      ScanReport r = scan_detail::scan_beside(Source::map_file(f.path, o.map), o,
                                              f.path.filename().string(), beside);
      r.path = f.path.string();
      out.push_back(std::move(r));
    } catch (const Error& e) {
      out.push_back(refused(f.path, e.what()));
    }
  }
  if (progress) progress(total, total);
  std::sort(out.begin(), out.end(),
            [](const ScanReport& a, const ScanReport& b) { return a.path < b.path; });
  return out;
} catch (...) {
  rethrow_as_error("scan", dir.string());  // no bare std:: exception leaves the library
}

}  // namespace torchport
