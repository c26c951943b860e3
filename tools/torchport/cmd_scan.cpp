// torchport scan PATH... [--json] [--allow PATTERN]...
//
// Prints what checkpoints would make Python import and run, without loading
// them (the analysis is torchport::scan). A directory is walked: every
// regular file is scanned by its content, whatever its name. Exit status: 0
// when every file is clean (or not a format anything unpickles), 1 when any
// is unsafe or malformed, with the reasons on stderr; 2 usage.

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/scan.hpp"

namespace torchport::cli {
namespace {

struct ScanArgs {
  std::vector<std::string> paths;
  std::vector<std::string> allow;
  bool json = false;
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
  out["persistent_ids"] = p.persistent_kinds;
  if (p.stats.other_calls) out["calls_of_non_globals"] = p.stats.other_calls;
  if (p.stats.extensions) out["extension_codes"] = p.stats.extensions;
  if (!p.error.empty()) out["error"] = p.error;
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
  auto& pickles = out["pickles"] = json::array();
  for (const auto& p : r.pickles) pickles.push_back(pickle_json(p));
  out["code_records"] = r.code_records;
  if (!r.shards.empty()) out["shards"] = r.shards;
  if (!r.members.empty()) {
    auto& members = out["members"] = json::array();
    for (const auto& m : r.members) members.push_back(report_json(m));
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
  return v == ScanVerdict::clean          ? Style::green
         : v == ScanVerdict::unrecognized ? Style::dim
         : v == ScanVerdict::malformed    ? Style::yellow
                                          : Style::red;
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
    if (!p.error.empty()) fmt::print("{}    stopped: {}\n", indent, p.error);
  }
  for (const auto& c : r.code_records) fmt::print("{}  code record (never read): {}\n", indent, c);
  for (const auto& m : r.members) print_report(m, colour, indent + "  ");
  for (const auto& f : r.findings)
    fmt::print("{}  {}: {}: {}{}: {}{}\n", indent,
               styled(scan_verdict_name(f.severity), verdict_style(f.severity), colour), f.where,
               f.reason,
               f.known_dangerous && f.reason != "known-dangerous" ? ", known-dangerous" : "",
               f.message, f.offset ? fmt::format(" (byte {})", *f.offset) : std::string());
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
  std::vector<ScanReport> reports;
  for (const auto& path : a.paths) {
    std::error_code ec;
    // A directory holding an *.index.json is still walked file by file:
    // every file of a model repository, whatever the index names.
    if (std::filesystem::is_directory(path, ec)) {
      auto rs = scan_directory(path, options);
      for (auto& r : rs) reports.push_back(std::move(r));
    } else {
      reports.push_back(scan(std::filesystem::path(path), options));
    }
  }
  bool fail = false;
  for (const auto& r : reports)
    fail = fail || r.verdict == ScanVerdict::unsafe || r.verdict == ScanVerdict::malformed;
  if (a.json) {
    if (reports.size() == 1 && !std::filesystem::is_directory(a.paths.front())) {
      fmt::print("{}\n",
                 report_json(reports.front()).dump(2, ' ', false, json::error_handler_t::replace));
    } else {
      json out;
      out["verdict"] = fail ? "unsafe" : "clean";
      std::map<std::string, std::uint64_t> counts;
      for (const auto& r : reports) ++counts[std::string(scan_verdict_name(r.verdict))];
      out["counts"] = counts;
      auto& files = out["files"] = json::array();
      for (const auto& r : reports) files.push_back(report_json(r));
      fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
    }
  } else {
    const bool colour = colour_enabled(1);
    for (const auto& r : reports) print_report(r, colour, "");
    if (reports.size() > 1) {
      std::map<std::string, std::uint64_t> counts;
      for (const auto& r : reports) ++counts[std::string(scan_verdict_name(r.verdict))];
      std::string line;
      for (const auto& [v, n] : counts)
        line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + v;
      fmt::print("\n{} file(s): {}\n", reports.size(), line);
    }
  }
  for (const auto& r : reports)
    if (r.verdict == ScanVerdict::unsafe || r.verdict == ScanVerdict::malformed)
      std::fprintf(stderr, "torchport: %s: %s: %s\n", r.path.c_str(),
                   std::string(scan_verdict_name(r.verdict)).c_str(), r.reason().c_str());
  return fail ? 1 : 0;
}

}  // namespace

Command add_scan(CLI::App& app) {
  auto args = std::make_shared<ScanArgs>();
  CLI::App* sub = app.add_subcommand("scan",
                                     "Say what checkpoints would make Python import and run "
                                     "(globals, calls, code), loading nothing");
  sub->add_option(
         "path", args->paths,
         "checkpoint file, *.index.json, or directory (every file in it is scanned by content)")
      ->required();
  sub->add_flag("--json", args->json, "print JSON (schema: docs/guide/8-cli.md)");
  sub->add_option(
         "--allow", args->allow,
         "trust globals beyond the allow-list: an exact module.name or module.* (repeatable); "
         "known-dangerous globals stay unsafe")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->footer(
      "Verdicts: clean (only allowed globals, read to its end), unsafe (any other global, code, or "
      "an\n"
      "ambiguous reading), malformed (unreadable, naming nothing unsafe), unrecognized (no model "
      "format).\n"
      "Exit status: 0 when every file is clean or unrecognized, 1 when any is unsafe or malformed, "
      "2 usage.\n"
      "Examples:\n  torchport scan downloaded.pt\n  torchport scan ./my-model-repo --json\n"
      "  torchport scan whole_model.pt --allow mynet.* --allow torch.nn.modules.*");
  return {sub, [args] { return run_scan(*args); }};
}

}  // namespace torchport::cli
