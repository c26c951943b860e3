// scan(): the static analysis behind `torchport scan`. Every pickle runs
// through the VM with a persistent-id callback that only records kinds and
// a call hook that only counts, so the VM's statistics say what Python would
// import and call; then the file is opened lazily as open() would, to check
// its structure. Nothing is loaded and nothing can run.

#include "torchport/formats/scan.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "readers.hpp"
#include "strict_json.hpp"
#include "torchport/core/error.hpp"
#include "torchport/io/byte_reader.hpp"
#include "torchport/io/tar.hpp"
#include "torchport/io/zip.hpp"

namespace torchport {
namespace {

// 0x1950a86a20f9469cfc6c, as pickle's LONG1 stores it (pytorch_legacy.cpp).
constexpr unsigned char kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

bool is_legacy_magic(const Value& v) {
  if (!v.is(Value::Kind::BigInt)) return false;
  const std::string& b = v.as_bytes();
  return b.size() == sizeof kLegacyMagic &&
         std::equal(b.begin(), b.end(), std::begin(kLegacyMagic),
                    [](char c, unsigned char m) { return static_cast<unsigned char>(c) == m; });
}

std::string pid_kind(const Value& pid) {
  // The tar format's pickle names a storage by its key alone.
  if (pid.is(Value::Kind::Str)) return "key";
  const Value* first = &pid;
  if (pid.is(Value::Kind::Tuple) || pid.is(Value::Kind::List)) {
    if (pid.size() == 0) return "(empty)";
    first = &pid.items()[0];
  }
  if (first->is(Value::Kind::Str)) return first->as_str();
  if (first->is(Value::Kind::Bytes)) return first->as_bytes();
  if (first->is(Value::Kind::Global)) return "class";  // tar: (ModuleClass, file, source)
  return std::string(first->kind_name());
}

// How bad a verdict is. A dangerous global outranks a damaged file: a
// payload often breaks the pickle's grammar right after the global it
// smuggles in, and the global is what the user must hear about.
int rank(ScanVerdict v) {
  switch (v) {
    case ScanVerdict::clean: return 0;
    case ScanVerdict::needs_code: return 1;
    case ScanVerdict::malformed: return 2;
    case ScanVerdict::dangerous: return 3;
  }
  return 3;
}

class Scanner {
 public:
  Scanner(ScanReport& report, const OpenOptions& options) : r_(report), o_(options) {}

  // Runs one pickle from `reader`'s position; returns its value, or nothing
  // when it could not be read to its end (the error is then a finding).
  std::optional<Value> pickle(ByteReader& reader, std::string name) {
    PickleScan& p = r_.pickles.emplace_back();
    p.name = std::move(name);
    p.offset = reader.file_offset();
    auto persistent = [&p](const Value& pid, std::uint64_t) -> Value {
      ++p.persistent_kinds[pid_kind(pid)];
      return Value();
    };
    auto hook = [&p](const Global& g, const Value&, std::uint64_t) -> std::optional<Value> {
      ++p.calls[g.qualified()];
      return std::nullopt;
    };
    try {
      return pickle::unpickle(reader, o_.limits, persistent, &p.stats, hook);
    } catch (const Error& e) {
      p.error = e.what();
      return std::nullopt;
    }
  }

  void scan_zip(const Source& src) {
    ZipArchive zip;
    try {
      zip = ZipArchive::open(src, o_.limits);
    } catch (const Error& e) {
      return;  // open() reports it below
    }
    const auto& entries = zip.entries();
    std::string prefix;
    if (!entries.empty()) {
      const auto slash = entries.front().name.find('/');
      if (slash != std::string::npos) prefix = entries.front().name.substr(0, slash + 1);
    }
    for (const ZipEntry& e : entries) {
      const std::string_view rel = std::string_view(e.name).substr(
          e.name.starts_with(prefix) ? prefix.size() : 0);
      if (rel.starts_with("code/") || e.name.ends_with(".py")) r_.code_records.push_back(e.name);
      if (!e.name.ends_with(".pkl")) {
        // A deflated record is inflated and checked (size and CRC-32) and
        // dropped: open() is lazy and would not see a damaged one. Stored
        // records need no work to be read; their bounds open() checks.
        if (e.method != 0 && !rel.starts_with("code/") && !e.name.ends_with(".py")) {
          try {
            (void)zip.read(e);
          } catch (const Error& err) {
            add(ScanVerdict::malformed, err.what(), e.name, e.data_offset);
          }
        }
        continue;
      }
      if (e.size > o_.limits.max_pickle_bytes) {
        PickleScan& p = r_.pickles.emplace_back();
        p.name = e.name;
        p.offset = e.data_offset;
        p.error = "pickle of " + std::to_string(e.size) + " bytes exceeds Limits::max_pickle_bytes";
        continue;
      }
      try {
        const Source pkl = zip.read(e);
        ByteReader reader(pkl.bytes(), e.name, e.method == 0 ? e.data_offset : 0);
        pickle(reader, e.name);
      } catch (const Error& err) {  // inflating failed
        PickleScan& p = r_.pickles.emplace_back();
        p.name = e.name;
        p.offset = e.data_offset;
        p.error = err.what();
      }
    }
    if (!r_.code_records.empty())
      add(ScanVerdict::needs_code,
          std::to_string(r_.code_records.size()) + " code record(s) ('" + r_.code_records.front() +
              "'...): torch.jit.load runs them (and torch.load before 2.6 did too, even with "
              "weights_only: CVE-2025-32434); torchport never reads them",
          src.name(), std::nullopt);
  }

  // A legacy file's stacked pickles, or one plain pickle.
  void scan_pickles(const Source& src) {
    ByteReader reader(src.bytes(), src.name());
    const auto magic = pickle(reader, "pickle");
    if (!magic || !is_legacy_magic(*magic)) return;
    r_.pickles.back().name = "legacy:magic_number";
    static const char* const kNames[] = {"legacy:protocol_version", "legacy:sys_info", "legacy:object",
                                         "legacy:storage_keys"};
    for (const char* name : kNames)
      if (!pickle(reader, name)) return;
  }

  void scan_tar(const Source& src) {
    TarArchive tar;
    try {
      tar = TarArchive::open(src, o_.limits);
    } catch (const Error&) {
      return;
    }
    // sys_info and pickle are one pickle each; storages and tensors
    // interleave pickled headers with raw data, which open() walks (and
    // refuses when a header references a dangerous global).
    for (const char* name : {"sys_info", "pickle"}) {
      const TarMember* m = tar.find(name);
      if (m == nullptr) continue;
      ByteReader reader(src.bytes().subspan(static_cast<std::size_t>(m->data_offset),
                                            static_cast<std::size_t>(m->size)),
                        name, m->data_offset);
      pickle(reader, std::string("tar:") + name);
    }
  }

  // The findings of the pickles' statistics.
  void judge_pickles() {
    for (const PickleScan& p : r_.pickles) {
      for (const auto& g : p.stats.globals) {
        const std::string name = g.module + "." + g.name;
        if (g.klass == pickle::GlobalClass::dangerous)
          add(ScanVerdict::dangerous,
              "references '" + name + "' (" + std::to_string(g.count) +
                  " time(s)), which runs code when Python unpickles it",
              p.name, g.first_offset);
      }
      for (const auto& [name, n] : p.calls) {
        const auto dot = name.rfind('.');
        const auto klass = pickle::classify_global(name.substr(0, dot), name.substr(dot + 1));
        if (klass == pickle::GlobalClass::unknown)
          add(ScanVerdict::needs_code,
              "calls '" + name + "' " + std::to_string(n) +
                  " time(s): Python would import and run it (torchport keeps an inert object)",
              p.name, first_offset(p, name));
      }
      for (const auto& [kind, n] : p.persistent_kinds)
        if (kind != "storage" && kind != "module" && kind != "class" && kind != "key")
          add(ScanVerdict::needs_code,
              "persistent id of kind '" + kind + "' (" + std::to_string(n) +
                  " time(s)): torch writes only storages; reading it needs a custom persistent_load",
              p.name, std::nullopt);
      if (!p.error.empty())
        add(ScanVerdict::malformed, "the pickle cannot be read to its end: " + p.error, p.name, std::nullopt);
    }
  }

  // Structure: open the file as open() would (lazily; no tensor bytes).
  void check_open(const Source& src) {
    OpenOptions o = o_;
    o.allow_unknown_globals = true;
    try {
      const TensorCatalog cat = open(src, o);
      r_.tensors = cat.size();
      r_.format = cat.format();  // more precise than the sniff: "torchscript", "pytorch-legacy", ...
    } catch (const Error& e) {
      // A dangerous global is already a finding (when the scan reached it;
      // a tar's storage headers are read only here).
      if (e.code() == ErrorCode::unsafe_global && r_.verdict == ScanVerdict::dangerous) return;
      add(e.code() == ErrorCode::unsafe_global ? ScanVerdict::dangerous : ScanVerdict::malformed,
          std::string(e.code() == ErrorCode::unsafe_global ? "" : "open() refuses it: ") + e.what(),
          e.where().empty() ? src.name() : e.where(), e.offset());
    }
  }

  void add(ScanVerdict severity, std::string reason, std::string where, std::optional<std::uint64_t> offset) {
    r_.findings.push_back({severity, std::move(reason), std::move(where), offset});
    if (rank(severity) > rank(r_.verdict)) r_.verdict = severity;
  }

 private:
  static std::optional<std::uint64_t> first_offset(const PickleScan& p, const std::string& name) {
    for (const auto& g : p.stats.globals)
      if (g.module + "." + g.name == name) return g.first_offset;
    return std::nullopt;
  }

  ScanReport& r_;
  const OpenOptions& o_;
};

void finish(ScanReport& r) {
  std::stable_sort(r.findings.begin(), r.findings.end(),
                   [](const ScanFinding& a, const ScanFinding& b) { return rank(a.severity) > rank(b.severity); });
}

}  // namespace

std::string_view scan_verdict_name(ScanVerdict v) noexcept {
  switch (v) {
    case ScanVerdict::clean: return "clean";
    case ScanVerdict::needs_code: return "needs_code";
    case ScanVerdict::dangerous: return "dangerous";
    case ScanVerdict::malformed: return "malformed";
  }
  return "?";
}

std::string ScanReport::reason() const {
  for (const auto& f : findings)
    if (f.severity == verdict) return f.where + ": " + f.reason;
  return {};
}

ScanReport scan(const Source& source, const OpenOptions& options) try {
  ScanReport r;
  r.path = source.name();
  Scanner s(r, options);
  r.format = options.format.empty() ? sniff_format(source) : options.format;
  if (r.format == "pytorch-zip" || r.format == "torchscript") {
    s.scan_zip(source);
  } else if (r.format == "pytorch-tar") {
    s.scan_tar(source);
  } else if (r.format == "pytorch-legacy" || r.format == "pickle") {
    s.scan_pickles(source);
  }
  // safetensors and our records hold no pickle: their structure is all.
  s.judge_pickles();
  s.check_open(source);
  finish(r);
  return r;
} catch (...) {
  rethrow_as_error("scan", source.name());  // no bare std:: exception leaves the library
}

ScanReport scan(const std::filesystem::path& path, const OpenOptions& options) try {
  const bool sharded = (options.format.empty() && formats::is_sharded_path(path)) ||
                       options.format.starts_with("sharded");
  if (!sharded) return scan(Source::map_file(path, options.map), options);

  ScanReport r;
  r.path = path.string();
  r.format = "sharded";
  Scanner s(r, options);
  // The shards the index names, each scanned as a file of its own; then the
  // whole checkpoint opened as open() would.
  std::filesystem::path index = path;
  try {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() > 11 && name.ends_with(".index.json")) index = it->path();
      }
    }
    const Source src = Source::map_file(index, options.map);
    if (src.size() <= options.limits.max_header_bytes) {
      const std::string_view text(reinterpret_cast<const char*>(src.bytes().data()), src.size());
      const auto root = formats::parse_strict_json(text, "index", 0, src.name(), 8, options.limits.max_nodes);
      std::set<std::string> seen;
      if (const auto wm = root.find("weight_map"); root.is_object() && wm != root.end() && wm->is_object())
        for (const auto& [name, v] : wm->items())
          if (v.is_string() && seen.insert(v.get<std::string>()).second) r.shards.push_back(v.get<std::string>());
    }
  } catch (const Error&) {
    // read_sharded below says what is wrong with the index.
  }
  for (const std::string& shard : r.shards) {
    const std::filesystem::path file = index.parent_path() / shard;
    if (shard.find('/') != std::string::npos || shard == ".." || !std::filesystem::is_regular_file(file))
      continue;  // read_sharded refuses it
    ScanReport sub;
    try {
      sub = scan(Source::map_file(file, options.map), options);
    } catch (const Error& e) {
      s.add(ScanVerdict::malformed, e.what(), shard, std::nullopt);
      continue;
    }
    for (auto& p : sub.pickles) {
      p.name = shard + ":" + p.name;
      r.pickles.push_back(std::move(p));
    }
    for (auto& c : sub.code_records) r.code_records.push_back(shard + ":" + c);
    for (auto& f : sub.findings) s.add(f.severity, std::move(f.reason), shard + ":" + f.where, f.offset);
  }
  try {
    OpenOptions o = options;
    o.allow_unknown_globals = true;
    const TensorCatalog cat = formats::read_sharded(path, o);
    r.tensors = cat.size();
    r.format = cat.format();
  } catch (const Error& e) {
    if (!(e.code() == ErrorCode::unsafe_global && r.verdict == ScanVerdict::dangerous))
      s.add(e.code() == ErrorCode::unsafe_global ? ScanVerdict::dangerous : ScanVerdict::malformed,
            std::string("open() refuses it: ") + e.what(), e.where(), e.offset());
  }
  finish(r);
  return r;
} catch (...) {
  rethrow_as_error("scan", path.string());  // no bare std:: exception leaves the library
}

}  // namespace torchport
