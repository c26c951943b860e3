// torchport scan FILE [--json] [--strict]
//
// Prints what a checkpoint would make Python run, without loading it (the
// analysis is torchport::scan). Exit status: 0 clean (or needs_code without
// --strict), 1 dangerous or malformed (or needs_code with --strict), with
// the reason on stderr; 2 usage.

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "torchport/formats/scan.hpp"

namespace torchport::cli {
namespace {

struct ScanArgs {
  std::string file;
  bool json = false;
  bool strict = false;
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
  for (const auto& g : p.stats.globals) {
    const std::string name = g.module + "." + g.name;
    const auto calls = p.calls.find(name);
    globals.push_back({{"name", name},
                       {"class", std::string(pickle::global_class_name(g.klass))},
                       {"first_offset", g.first_offset},
                       {"count", g.count},
                       {"calls", calls == p.calls.end() ? 0 : calls->second}});
  }
  out["persistent_ids"] = p.persistent_kinds;
  if (!p.error.empty()) out["error"] = p.error;
  return out;
}

int run_scan(const ScanArgs& a) {
  const ScanReport r = scan(std::filesystem::path(a.file));
  const bool fail = r.verdict == ScanVerdict::dangerous || r.verdict == ScanVerdict::malformed ||
                    (a.strict && r.verdict == ScanVerdict::needs_code);
  if (a.json) {
    json out;
    out["file"] = r.path;
    out["format"] = r.format;
    out["verdict"] = std::string(scan_verdict_name(r.verdict));
    out["reason"] = r.reason();
    out["tensors"] = r.tensors;
    auto& pickles = out["pickles"] = json::array();
    for (const auto& p : r.pickles) pickles.push_back(pickle_json(p));
    out["code_records"] = r.code_records;
    if (!r.shards.empty()) out["shards"] = r.shards;
    auto& findings = out["findings"] = json::array();
    for (const auto& f : r.findings) {
      json j{{"severity", std::string(scan_verdict_name(f.severity))}, {"reason", f.reason}, {"where", f.where}};
      j["offset"] = f.offset ? json(*f.offset) : json(nullptr);
      findings.push_back(std::move(j));
    }
    fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
  } else {
    const bool colour = colour_enabled(1);
    const auto verdict_style = [](ScanVerdict v) {
      return v == ScanVerdict::clean ? Style::green : v == ScanVerdict::needs_code ? Style::yellow : Style::red;
    };
    fmt::print("{}: {}, {} tensors, {} pickle(s): {}\n", r.path, r.format.empty() ? "unknown format" : r.format,
               r.tensors, r.pickles.size(),
               styled(scan_verdict_name(r.verdict), verdict_style(r.verdict), colour));
    for (const auto& p : r.pickles) {
      std::uint64_t ops = 0;
      for (auto n : p.stats.opcodes) ops += n;
      fmt::print("\n{} (byte {}, protocol {}, {} opcodes, {} persistent ids)\n", p.name, p.offset,
                 p.stats.protocol, ops, p.stats.persistent_ids);
      for (const auto& g : p.stats.globals) {
        const auto calls = p.calls.find(g.module + "." + g.name);
        fmt::print("  {:<9}  {}.{}  x{}{}  (first at byte {})\n", pickle::global_class_name(g.klass), g.module,
                   g.name, g.count,
                   calls == p.calls.end() ? std::string() : fmt::format(", called {}", calls->second),
                   g.first_offset);
      }
      if (!p.error.empty()) fmt::print("  stopped: {}\n", p.error);
    }
    for (const auto& c : r.code_records) fmt::print("code record (never read): {}\n", c);
    if (!r.findings.empty()) fmt::print("\n");
    for (const auto& f : r.findings)
      fmt::print("{}: {}: {}{}\n", styled(scan_verdict_name(f.severity), verdict_style(f.severity), colour), f.where,
                 f.reason,
                 f.offset ? fmt::format(" (byte {})", *f.offset) : std::string());
  }
  if (fail)
    std::fprintf(stderr, "torchport: %s: %s\n", std::string(scan_verdict_name(r.verdict)).c_str(),
                 r.reason().c_str());
  return fail ? 1 : 0;
}

}  // namespace

Command add_scan(CLI::App& app) {
  auto args = std::make_shared<ScanArgs>();
  CLI::App* sub = app.add_subcommand(
      "scan", "List what a checkpoint would make Python run (globals, calls, code), loading nothing");
  sub->add_option("file", args->file, "checkpoint file, *.index.json or sharded directory")->required();
  sub->add_flag("--json", args->json, "print one JSON object (schema: docs/guide/8-cli.md)");
  sub->add_flag("--strict", args->strict, "exit 1 for needs_code too (classes Python would run, TorchScript code)");
  sub->footer(
      "Exit status: 0 clean or needs_code, 1 dangerous or malformed (or needs_code with --strict), 2 usage.\n"
      "Examples:\n  torchport scan downloaded.pt\n  torchport scan ./llama-7b --json --strict");
  return {sub, [args] { return run_scan(*args); }};
}

}  // namespace torchport::cli
