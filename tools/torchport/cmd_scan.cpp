// torchport scan PATH... [--json] [--quiet] [--allow PATTERN]... [--include GLOB]...
//                        [--exclude GLOB]...
//
// Prints what checkpoints would make Python import and run, without loading
// them (the analysis is torchport::scan). A directory is walked: every
// regular file is scanned by its content, whatever its name. Exit status: 1
// when any file is unsafe; else 2 when any is unscannable, truncated or
// malformed, or a path is missing (trouble); else 0 (every file clean or not
// a model file); 2 for usage errors. Reasons go to stderr.

#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "progress.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/scan.hpp"

namespace torchport::cli {
namespace {

struct ScanArgs {
  std::vector<std::string> paths;
  std::vector<std::string> allow;
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  bool json = false;
  bool quiet = false;
};

using json = nlohmann::ordered_json;

json pickle_json(const PickleScan& p) {
  json out;
  out["name"] = p.name;
  out["offset"] = p.offset;
  out["protocol"] = p.stats.protocol;
  auto& ops = out["opcodes"] = json::object();
  for (std::size_t op = 0; op < 256; ++op)
    if (p.stats.opcodes[op] != 0) {
      const std::string_view name = pickle::opcode_name(static_cast<std::uint8_t>(op));
      ops[name.empty() ? fmt::format("0x{:02x}", op) : std::string(name)] = p.stats.opcodes[op];
    }
  auto& globals = out["globals"] = json::array();
  for (const auto& g : p.globals) {
    json j{{"name", g.name}};
    if (!g.written.empty()) j["written"] = g.written;
    j["opcode"] = g.opcode;
    j["offset"] = g.offset;
    j["count"] = g.count;
    j["calls"] = g.calls;
    if (g.calls) {
      j["call_opcode"] = g.call_opcode;
      j["call_offset"] = g.call_offset ? json(*g.call_offset) : json(nullptr);
    }
    j["builds"] = g.builds;
    j["sets"] = g.sets;
    j["allowed"] = g.allowed;
    j["known_dangerous"] = g.known_dangerous;
    if (g.after_error) j["after_error"] = true;
    j["reasons"] = g.reasons;
    globals.push_back(std::move(j));
  }
  out["persistent_ids"] = p.stats.persistent_ids;
  if (p.stats.other_calls) out["calls_of_non_globals"] = p.stats.other_calls;
  if (p.stats.extensions) out["extension_codes"] = p.stats.extensions;
  if (!p.error.empty()) {
    out["error"] = p.error;
    out["python_reads_on"] = p.python_reads_on;
  }
  if (p.object_array_count) {
    out["numpy_object_arrays"] = p.object_array_count;
    out["numpy_object_array_paths"] = p.object_arrays;
  }
  return out;
}

json report_json(const ScanReport& r) {
  json out;
  out["file"] = r.path;
  out["format"] = r.format;
  out["reading"] = r.reading;
  if (!r.reading_error.empty()) out["reading_error"] = r.reading_error;
  out["verdict"] = std::string(scan_verdict_name(r.verdict));
  out["reason"] = r.reason();
  out["tensors"] = r.tensors;
  out["tensor_records"] = r.tensor_records;
  auto& pickles = out["pickles"] = json::array();
  for (const auto& p : r.pickles) pickles.push_back(pickle_json(p));
  out["code_records"] = r.code_records;
  if (!r.shards.empty()) out["shards"] = r.shards;
  if (!r.members.empty()) {
    auto& members = out["members"] = json::array();
    for (const auto& m : r.members) members.push_back(report_json(m));
  }
  if (r.torch_weights_only) {
    const TorchWeightsOnly& t = *r.torch_weights_only;
    json j{{"loads", t.loads ? json(*t.loads) : json(nullptr)}, {"needs", t.needs}};
    if (!t.why.empty()) j["why"] = t.why;
    if (!t.needs.empty()) j["add_safe_globals"] = add_safe_globals_line(t.needs);
    out["torch_weights_only"] = std::move(j);
  }
  auto& findings = out["findings"] = json::array();
  for (const auto& f : r.findings) {
    json j{{"severity", std::string(scan_verdict_name(f.severity))}, {"reason", f.reason}};
    if (!f.global.empty()) j["global"] = f.global;
    j["known_dangerous"] = f.known_dangerous;
    j["message"] = f.message;
    j["where"] = f.where;
    j["offset"] = f.offset ? json(*f.offset) : json(nullptr);
    findings.push_back(std::move(j));
  }
  return out;
}

Style verdict_style(ScanVerdict v) {
  return v == ScanVerdict::clean              ? Style::green
         : v == ScanVerdict::not_a_model_file ? Style::dim
         : v == ScanVerdict::unsafe           ? Style::red
                                              : Style::yellow;
}

// What torch >= 2.6's default torch.load (weights_only=True) does with the
// file, and the line that would allow what it lacks.
void print_weights_only(const TorchWeightsOnly& t, const std::string& indent) {
  if (t.loads.value_or(false)) {
    fmt::print("{}  torch >= 2.6, torch.load(weights_only=True): loads\n", indent);
    return;
  }
  fmt::print("{}  torch >= 2.6, torch.load(weights_only=True): {}{}{}\n", indent,
             t.loads ? "refuses" : "unknown", t.why.empty() ? "" : ": ", t.why);
  if (!t.needs.empty())
    fmt::print(
        "{}    {} global(s) outside its default list ({}); trusted, paste before torch.load:\n"
        "{}    {}\n",
        indent, t.needs.size(), fmt::join(t.needs, ", "), indent, add_safe_globals_line(t.needs));
}

void print_report(const ScanReport& r, bool colour, const std::string& indent) {
  fmt::print("{}{}: {}{}, {} tensors, {} pickle(s): {}\n", indent, r.path,
             r.format.empty() ? "no model format" : r.format,
             r.reading.empty() || r.reading == "ok" ? std::string() : " (" + r.reading + ")",
             r.tensors, r.pickles.size(),
             styled(scan_verdict_name(r.verdict), verdict_style(r.verdict), colour));
  for (const auto& p : r.pickles) {
    std::uint64_t ops = 0;
    for (auto n : p.stats.opcodes) ops += n;
    fmt::print("{}  {} (byte {}, protocol {}, {} opcodes, {} persistent ids)\n", indent, p.name,
               p.offset, p.stats.protocol, ops, p.stats.persistent_ids);
    for (const auto& g : p.globals) {
      std::string why = g.allowed ? "allowed" : fmt::format("{}", fmt::join(g.reasons, ", "));
      fmt::print("{}    {:<26}  {}{}  {} at byte {}{}{}{}\n", indent, why, g.name,
                 g.written.empty() ? std::string() : " (written " + g.written + ")", g.opcode,
                 g.offset, g.count > 1 ? fmt::format(", x{}", g.count) : std::string(),
                 g.calls ? fmt::format(", called {} ({})", g.calls, g.call_opcode) : std::string(),
                 g.builds ? fmt::format(", built {}", g.builds) : std::string());
    }
    if (p.object_array_count)
      fmt::print("{}    numpy object arrays: {} ({}{}): elements are Python objects, kept inert\n",
                 indent, p.object_array_count, fmt::join(p.object_arrays, ", "),
                 p.object_array_count > p.object_arrays.size() ? ", ..." : "");
    if (!p.error.empty())
      fmt::print("{}    stopped: {}{}\n", indent, p.error,
                 p.python_reads_on ? " (Python reads on)" : "");
  }
  for (const auto& c : r.code_records) fmt::print("{}  code record (never read): {}\n", indent, c);
  if (r.torch_weights_only) print_weights_only(*r.torch_weights_only, indent);
  for (const auto& m : r.members) print_report(m, colour, indent + "  ");
  for (const auto& f : r.findings)
    if (f.reason != "member")
      fmt::print("{}  {}: {}: {}{}: {}{}\n", indent,
                 styled(scan_verdict_name(f.severity), verdict_style(f.severity), colour), f.where,
                 f.reason,
                 f.known_dangerous && f.reason != "known-dangerous" ? ", known-dangerous" : "",
                 f.message, f.offset ? fmt::format(" (byte {})", *f.offset) : std::string());
}

// --quiet: the findings only, one line each, then the file's verdict line
// when it is not clean.
void print_quiet(const ScanReport& r, bool colour) {
  if (r.verdict == ScanVerdict::clean || r.verdict == ScanVerdict::not_a_model_file) return;
  for (const auto& f : r.findings)
    if (f.reason != "member")
      fmt::print("{}: {}: {}: {}{}\n", r.path,
                 styled(scan_verdict_name(f.severity), verdict_style(f.severity), colour), f.where,
                 f.message, f.offset ? fmt::format(" (byte {})", *f.offset) : std::string());
  for (const auto& m : r.members) print_quiet(m, colour);
}

std::string counts_line(const std::vector<ScanReport>& reports) {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& r : reports) ++counts[std::string(scan_verdict_name(r.verdict))];
  std::string line;
  for (const auto& [v, n] : counts)
    line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + v;
  return line;
}

int run_scan(const ScanArgs& a) {
  OpenOptions options;
  options.allow = a.allow;
  try {
    pickle::validate_allow_patterns(options.allow);
  } catch (const Error& e) {
    std::fprintf(stderr, "torchport: %s\n", e.message().c_str());
    return 2;
  }
  if (std::count(a.paths.begin(), a.paths.end(), std::string("-")) > 1) {
    std::fprintf(stderr,
                 "torchport: error: only one path can be '-' (standard input is read once)\n");
    return 2;
  }
  const ScanFilter filter{a.include, a.exclude};
  // Per path: its reports (a directory: one per file), or the error that
  // kept it from being scanned.
  struct Scanned {
    std::string path;
    bool directory = false;
    std::vector<ScanReport> reports;
    std::string error;
  };
  std::vector<Scanned> scanned;
  for (const auto& path : a.paths) {
    Scanned s;
    s.path = path;
    std::error_code ec;
    try {
      if (is_stdin(path)) {  // read into memory, within Limits::max_stdin_bytes
        s.reports.push_back(scan(read_stdin(options.limits), options));
        scanned.push_back(std::move(s));
        continue;
      }
      if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        throw Error(ErrorCode::io, "no such file or directory", {}, std::nullopt, path);
      // A directory holding an *.index.json is still walked file by file:
      // every file of a model repository, whatever the index names.
      if (std::filesystem::is_directory(path, ec)) {
        s.directory = true;
        ProgressBar bar("scanning");  // on a terminal, once it takes more than a second
        s.reports =
            scan_directory(path, options, filter, [&](std::uint64_t done, std::uint64_t total) {
              if (!a.quiet) bar.update(done, total);
            });
        bar.finish();
      } else {
        s.reports.push_back(scan(std::filesystem::path(path), options));
      }
    } catch (const Error& e) {
      s.error = e.what();
    }
    scanned.push_back(std::move(s));
  }
  std::vector<const ScanReport*> all;
  bool trouble = false, unsafe = false;
  for (const auto& s : scanned) {
    trouble = trouble || !s.error.empty();
    for (const auto& r : s.reports) {
      all.push_back(&r);
      unsafe = unsafe || r.verdict == ScanVerdict::unsafe;
      trouble = trouble || scan_exit_code(r.verdict) == 2;
    }
  }
  const int status = unsafe ? 1 : trouble ? 2 : 0;
  if (a.json) {
    if (scanned.size() == 1 && !scanned.front().directory && scanned.front().error.empty()) {
      fmt::print("{}\n", report_json(scanned.front().reports.front())
                             .dump(2, ' ', false, json::error_handler_t::replace));
    } else {
      json out;
      out["verdict"] = unsafe ? "unsafe" : trouble ? "trouble" : "clean";
      std::map<std::string, std::uint64_t> counts;
      for (const auto* r : all) ++counts[std::string(scan_verdict_name(r->verdict))];
      out["counts"] = counts;
      auto& files = out["files"] = json::array();
      for (const auto* r : all) files.push_back(report_json(*r));
      auto& errors = out["errors"] = json::array();
      for (const auto& s : scanned)
        if (!s.error.empty()) errors.push_back(json{{"path", s.path}, {"error", s.error}});
      fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
    }
  } else {
    const bool colour = colour_enabled(1);
    for (const auto& s : scanned) {
      for (const auto& r : s.reports)
        a.quiet ? print_quiet(r, colour) : print_report(r, colour, "");
      if (s.directory && (a.quiet || s.reports.size() > 1))
        fmt::print("{}{}: {} file(s): {}\n", a.quiet ? "" : "\n", s.path, s.reports.size(),
                   counts_line(s.reports));
    }
  }
  for (const auto& s : scanned)
    if (!s.error.empty())
      std::fprintf(stderr, "torchport: %s: %s\n", s.path.c_str(), s.error.c_str());
  for (const auto* r : all)
    if (scan_exit_code(r->verdict) != 0)
      std::fprintf(stderr, "torchport: %s: %s: %s\n", r->path.c_str(),
                   std::string(scan_verdict_name(r->verdict)).c_str(), r->reason().c_str());
  return status;
}

}  // namespace

Command add_scan(CLI::App& app) {
  auto args = std::make_shared<ScanArgs>();
  CLI::App* sub = app.add_subcommand("scan",
                                     "Say what checkpoints would make Python import and run "
                                     "(globals, calls, code), loading nothing");
  sub->add_option(
         "path", args->paths,
         "checkpoint file, *.index.json, or directory (every file in it is scanned by content); "
         "'-': standard input")
      ->required();
  sub->add_flag("--json", args->json, "print JSON (schema: docs/guide/8-cli.md)");
  sub->add_flag("-q,--quiet", args->quiet,
                "print only the findings, and one summary line per directory");
  sub->add_option(
         "--allow", args->allow,
         "trust globals beyond the allow-list: an exact module.name or module.* (repeatable); "
         "known-dangerous globals stay unsafe")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--include", args->include,
                  "in directories, scan only files whose relative path matches this glob (*, ?, "
                  "[...], ** for folders; repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--exclude", args->exclude,
                  "in directories, skip files whose relative path matches this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->footer(
      "Verdicts: clean (every place a loader could unpickle was read to its end and names only\n"
      "allowed globals), not-a-model-file (text, code, JSON: nothing unpickles it), unsafe (a\n"
      "global outside the allow-list, code, or an ambiguous reading), unscannable (something a\n"
      "loader could unpickle that the scan cannot read to its end), truncated, malformed.\n"
      "Exit status: 0 when every file is clean or not a model file; 1 when any is unsafe; 2 when\n"
      "any is unscannable, truncated or malformed, a path is missing, or for usage errors.\n"
      "Examples:\n  torchport scan downloaded.pt\n  torchport scan ./my-model-repo --json\n"
      "  torchport scan ./hub-cache --quiet --include '**/*.bin' --include '**/*.pt'\n"
      "  torchport scan whole_model.pt --allow mynet.* --allow torch.nn.modules.*");
  return {sub, [args] { return run_scan(*args); }};
}

}  // namespace torchport::cli
