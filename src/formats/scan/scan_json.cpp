// A ScanReport as the JSON `torchport scan --json` prints (the schema in
// docs/guide/8-cli.md): one place that writes it, for every program that
// shows a scan (the tool prints the same keys in the same order).

#include "torchport/formats/scan_json.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "pickle/unpickler.hpp"

namespace torchport {
namespace {

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
      if (name.empty()) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(op));
        ops[hex] = p.stats.opcodes[op];
      } else {
        ops[std::string(name)] = p.stats.opcodes[op];
      }
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

// `trusted`: every report that holds this one is clean (a line of trust is
// offered only inside a clean file).
json report_json(const ScanReport& r, bool trusted) {
  trusted = trusted && r.verdict == ScanVerdict::clean;
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
    for (const auto& m : r.members) members.push_back(report_json(m, trusted));
  }
  if (r.torch_weights_only) {
    const TorchWeightsOnly& t = *r.torch_weights_only;
    json j{{"torch", t.torch},
           {"since", t.since},
           {"loads", t.loads ? json(*t.loads) : json(nullptr)},
           {"needs", t.needs}};
    if (!t.why.empty()) j["why"] = t.why;
    if (const std::string line = trusted ? add_safe_globals_line(t.needs) : ""; !line.empty())
      j["add_safe_globals"] = line;
    auto& releases = j["releases"] = json::array();
    for (const auto& x : t.releases) {
      json y{{"first", x.first},
             {"last", x.last},
             {"loads", x.loads ? json(*x.loads) : json(nullptr)},
             {"needs", x.needs}};
      if (!x.why.empty()) y["why"] = x.why;
      if (const std::string line = trusted ? add_safe_globals_line(x.needs) : ""; !line.empty())
        y["add_safe_globals"] = line;
      releases.push_back(std::move(y));
    }
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

}  // namespace

std::string scan_json(const ScanReport& report, int indent) {
  return report_json(report, true).dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace torchport
