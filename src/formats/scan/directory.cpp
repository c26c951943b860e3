// scan_directory(): every file of a folder, each scanned by its content,
// following symbolic links only where the one shard resolver lets `open()`
// follow a shard's (inside the folder, or inside a Hugging Face cache
// repository for a snapshot folder).

#include <algorithm>
#include <set>

#include "formats/read/readers.hpp"
#include "formats/read/shards.hpp"
#include "torchport/core/error.hpp"
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

std::vector<ScanReport> scan_directory(
    const fs::path& dir, const OpenOptions& options, const ScanFilter& filter,
    const std::function<void(std::uint64_t done, std::uint64_t total)>& progress) try {
  pickle::validate_allow_patterns(options.allow);
  const fs::path root = formats::shard_root(dir);
  std::error_code ec;
  const fs::path top = fs::canonical(dir, ec);
  if (ec)
    throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                dir.string());
  // (path as listed, relative path) of each file; links resolved as walked.
  std::vector<std::pair<fs::path, std::string>> files;
  std::vector<std::pair<fs::path, std::string>> bad;  // links that lead out, FIFOs, ...
  std::set<fs::path> visited{top};                    // real folders, against link cycles
  std::vector<std::pair<fs::path, std::string>> todo{{dir, ""}};
  const auto too_many = [&] {
    throw Error(ErrorCode::limit_exceeded,
                "more than " + std::to_string(options.limits.max_entries) +
                    " files: exceeds Limits::max_entries; scan a smaller directory",
                {}, std::nullopt, dir.string());
  };
  while (!todo.empty()) {
    auto [folder, rel] = std::move(todo.back());
    todo.pop_back();
    fs::directory_iterator it(folder, ec), end;
    if (ec)
      throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                  folder.string());
    for (; it != end; it.increment(ec)) {
      if (ec)
        throw Error(ErrorCode::io, "cannot list the directory: " + ec.message(), {}, std::nullopt,
                    folder.string());
      const fs::path path = it->path();
      const std::string name =
          rel.empty() ? path.filename().string() : rel + "/" + path.filename().string();
      std::error_code fec;
      const fs::file_status link = it->symlink_status(fec);
      if (fs::is_symlink(link)) {
        const fs::file_status target = fs::status(path, fec);
        const bool is_dir = fs::is_directory(target);
        try {
          const fs::path real = formats::resolve_inside(root, path, is_dir);
          if (is_dir) {
            if (visited.insert(real).second) todo.emplace_back(path, name);
          } else {
            files.emplace_back(path, name);
          }
        } catch (const Error& e) {
          bad.emplace_back(path, e.message());
        }
      } else if (fs::is_directory(link)) {
        if (visited.insert(fs::canonical(path, fec)).second) todo.emplace_back(path, name);
      } else if (fs::is_regular_file(link)) {
        files.emplace_back(path, name);
      } else {
        bad.emplace_back(path, "not a regular file (a FIFO, device or socket); it is not read");
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
  for (const auto& [path, why] : bad) {
    const std::string rel = fs::relative(path, dir, ec).generic_string();
    if (selected(ec ? path.filename().string() : rel)) out.push_back(refused(path, why));
  }
  std::uint64_t total = 0, done = 0;
  auto size_of = [](const fs::path& p) {
    std::error_code sec;
    const std::uintmax_t n = fs::file_size(p, sec);
    return sec ? std::uint64_t{0} : static_cast<std::uint64_t>(n);
  };
  if (progress)
    for (const auto& [path, rel] : files)
      if (selected(rel)) total += size_of(path);
  for (const auto& [path, rel] : files) {
    if (!selected(rel)) continue;
    if (progress) {
      progress(done, total);
      done += size_of(path);
    }
    OpenOptions o = options;
    o.format.clear();
    try {
      // A distributed checkpoint is one unit: its .metadata names the
      // blobs in its .distcp files that a loader unpickles (a .distcp is
      // zips back to back, no file of its own); each is judged there.
      if (formats::is_dcp_path(path.parent_path())) {
        if (path.extension() == ".distcp") continue;
        if (path.filename() == ".metadata") {
          ScanReport r = scan(path.parent_path(), o);
          r.path = path.parent_path().string();
          out.push_back(std::move(r));
          continue;
        }
      }
      // Each file by its content: an *.index.json is JSON here, and its
      // shards files of their own.
      ScanReport r = scan(Source::map_file(path, o.map), o);
      r.path = path.string();
      out.push_back(std::move(r));
    } catch (const Error& e) {
      out.push_back(refused(path, e.what()));
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
