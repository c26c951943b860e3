// torchport scan PATH... [--json] [--quiet] [--allow PATTERN]... [--profile NAME]... [--include
// GLOB]...
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
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "input.hpp"
#include "progress.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/formats/scan_json.hpp"
#include "torchport/pickle/globals.hpp"

namespace torchport::cli {
namespace {

struct ScanArgs {
  std::vector<std::string> paths;
  std::vector<std::string> allow;
  std::vector<std::string> profiles;
  bool list_profiles = false;
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  bool json = false;
  bool quiet = false;
};

using json = nlohmann::ordered_json;

// The report as torchport::scan_json writes it (the one JSON writer), as
// a value to place in a listing of several files.
json report_json(const ScanReport& r) {
  return json::parse(scan_json(r, -1));
}

Style verdict_style(ScanVerdict v) {
  return v == ScanVerdict::clean              ? Style::green
         : v == ScanVerdict::not_a_model_file ? Style::dim
         : v == ScanVerdict::unsafe           ? Style::red
                                              : Style::yellow;
}

// What torch's default torch.load (weights_only=True) does with the file,
// release range by release range, newest first, and the line that would
// allow what the current release lacks.
void print_weights_only(const TorchWeightsOnly& t, bool trusted, const std::string& indent) {
  const auto answer = [](const TorchWeightsOnlyRange& x) {
    if (x.loads.value_or(false)) return std::string("loads");
    return std::string(x.loads ? "refuses" : "unknown") + (x.why.empty() ? "" : ": ") + x.why +
           (x.needs.empty() ? ""
                            : fmt::format(" ({} global(s) outside its default list: {})",
                                          x.needs.size(), fmt::join(x.needs, ", ")));
  };
  const auto range = [](const TorchWeightsOnlyRange& x) {
    return x.first == x.last ? "torch " + x.first : "torch " + x.first + " to " + x.last;
  };
  for (auto it = t.releases.rbegin(); it != t.releases.rend(); ++it)
    fmt::print("{}  {}{}: {}\n", indent, range(*it),
               it == t.releases.rbegin() ? ", torch.load(weights_only=True)" : "", answer(*it));
  // Only inside a clean file, and never naming a known-dangerous global.
  if (const std::string line = trusted ? add_safe_globals_line(t.needs) : "";
      !line.empty() && t.why.empty())
    fmt::print("{}    trusted, paste before torch.load (torch {}):\n{}    {}\n", indent, t.torch,
               indent, line);
  else if (trusted && t.why.empty())
    // A clean file can need one only as the VM reads it inert: getattr for
    // an Enum member (Python 3.11 pickles members so).
    for (const std::string& n : t.needs)
      if (const auto dot = n.rfind('.');
          dot != std::string::npos &&
          pickle::classify_global(n.substr(0, dot), n.substr(dot + 1)) ==
              pickle::GlobalClass::dangerous) {
        fmt::print(
            "{}    no add_safe_globals line: it would let every file torch loads after it use "
            "{}, a known way to run code (torch.load(weights_only=False) for this file, if you "
            "trust it)\n",
            indent, n);
        break;
      }
}

void print_report(const ScanReport& r, bool colour, const std::string& indent, bool trusted) {
  trusted = trusted && r.verdict == ScanVerdict::clean;
  fmt::print("{}{}: {}{}, {}, {}: {}\n", indent, r.path,
             r.format.empty() ? "no model format" : r.format,
             r.reading.empty() || r.reading == "ok" ? std::string() : " (" + r.reading + ")",
             counted(r.tensors, "tensor"), counted(r.pickles.size(), "pickle"),
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
  if (r.torch_weights_only) print_weights_only(*r.torch_weights_only, trusted, indent);
  // Members alike (no pickle of their own, the same format, reading,
  // verdict and findings: a truncated zip's tensor records, read one by
  // one) print once, the others named after it: a truncated ResNet-18
  // printed 73 lines, most of them one line per tensor record.
  std::vector<std::pair<std::string, std::vector<const ScanReport*>>> groups;
  for (const auto& m : r.members) {
    std::string key;
    if (m.pickles.empty() && m.members.empty() && m.code_records.empty() && !m.torch_weights_only) {
      key = m.format + '\n' + m.reading + '\n' + std::string(scan_verdict_name(m.verdict)) + '\n' +
            std::to_string(m.tensors);
      for (const auto& f : m.findings) key += '\n' + f.reason + '\n' + f.message;
    }
    auto it = key.empty() ? groups.end()
                          : std::find_if(groups.begin(), groups.end(),
                                         [&](const auto& g) { return g.first == key; });
    if (it == groups.end())
      groups.push_back({key, {&m}});
    else
      it->second.push_back(&m);
  }
  for (const auto& [key, members] : groups) {
    print_report(*members.front(), colour, indent + "  ", trusted);
    if (members.size() == 1) continue;
    std::string names;
    for (std::size_t i = 1; i < members.size() && i < 4; ++i)
      names += (i > 1 ? ", " : "") + members[i]->path;
    fmt::print("{}    and {} alike ({}{}; --json lists each)\n", indent,
               counted(members.size() - 1, "more member"), names,
               members.size() > 4 ? ", ..." : "");
  }
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

// --list-profiles: each profile, its classes, the one form each may take
// and what building it so runs, when anything does.
int list_profiles(bool as_json) {
  const auto use_name = [](pickle::ProfileUse u) {
    return u == pickle::ProfileUse::object ? "object" : "enum-member";
  };
  if (as_json) {
    json out = json::array();
    for (const pickle::Profile& p : pickle::profiles()) {
      json classes = json::array();
      for (const pickle::ProfileClass& c : p.classes) {
        json j{{"class", std::string(c.module) + "." + std::string(c.name)},
               {"use", use_name(c.use)}};
        if (!c.note.empty()) j["note"] = c.note;
        classes.push_back(std::move(j));
      }
      out.push_back(json{{"name", p.name}, {"summary", p.summary}, {"classes", classes}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const pickle::Profile& p : pickle::profiles()) {
    fmt::print("{}: {}\n", p.name, p.summary);
    for (const pickle::ProfileClass& c : p.classes) {
      fmt::print("  {:<12} {}.{}\n", use_name(c.use), c.module, c.name);
      if (!c.note.empty()) fmt::print("  {:<12}   ({})\n", "", c.note);
    }
  }
  fmt::print(
      "object: NEWOBJ with no arguments, then BUILD of a dict of attributes; enum-member:\n"
      "builtins.getattr(cls, 'NAME'). Any other use of a class leaves it unsafe "
      "(docs/security.md, \"Profiles\").\n");
  return 0;
}

int run_scan(const ScanArgs& a) {
  if (a.list_profiles) return list_profiles(a.json);
  if (a.paths.empty())
    throw UsageError(
        "path is required: a checkpoint file, *.index.json or directory (only "
        "--list-profiles takes none)");
  OpenOptions options = with_remote({});
  options.allow = a.allow;
  options.profiles = a.profiles;
  try {
    pickle::validate_allow_patterns(options.allow);
    pickle::validate_profiles(options.profiles);
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
      note_input(path);
      if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        throw Error(ErrorCode::io, "cannot open: No such file or directory", {}, std::nullopt,
                    path);
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
      s.error = error_line(e);  // "PATH: what: why", as every command says it
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
      fmt::print("{}\n", scan_json(scanned.front().reports.front(), 2));
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
        a.quiet ? print_quiet(r, colour) : print_report(r, colour, "", true);
      if (s.directory && (a.quiet || s.reports.size() > 1))
        fmt::print("{}{}: {}: {}\n", a.quiet ? "" : "\n", s.path, counted(s.reports.size(), "file"),
                   counts_line(s.reports));
    }
  }
  for (const auto& s : scanned)
    if (!s.error.empty()) std::fprintf(stderr, "torchport: %s\n", s.error.c_str());
  for (const auto* r : all)
    if (scan_exit_code(r->verdict) != 0) {
      // One "PATH: VERDICT: why" line: a reason that already begins so (an
      // error's own message) is not prefixed twice.
      const std::string verdict(scan_verdict_name(r->verdict));
      std::string why = r->reason();
      for (const std::string& name : {r->path, std::filesystem::path(r->path).filename().string()})
        if (const std::string said = name + ": " + verdict + ": "; why.starts_with(said)) {
          why.erase(0, said.size());
          break;
        }
      std::fprintf(stderr, "torchport: %s: %s: %s\n", r->path.c_str(), verdict.c_str(),
                   why.c_str());
    }
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
      "'-': standard input");
  sub->add_flag("--json", args->json, "print JSON (schema: docs/guide/8-cli.md)");
  sub->add_flag("-q,--quiet", args->quiet,
                "print only the findings, and one summary line per directory");
  sub->add_option(
         "--allow", args->allow,
         "trust globals beyond the allow-list: an exact module.name or module.* (repeatable); "
         "known-dangerous globals stay unsafe")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--profile", args->profiles,
                  "trust a profile of a library's classes (transformers-training-args), each "
                  "only in the one form in which Python builds it without running code the file "
                  "can steer (repeatable; --list-profiles lists them)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--list-profiles", args->list_profiles,
                "list the profiles, their classes and the form each may take (--json: as JSON)");
  sub->add_option("--include", args->include,
                  "in directories, scan only files whose relative path matches this glob (*, ?, "
                  "[...], ** for folders; repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--exclude", args->exclude,
                  "in directories, skip files whose relative path matches this glob (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
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
      "  torchport scan whole_model.pt --allow mynet.* --allow torch.nn.modules.*\n"
      "  torchport scan checkpoint-500/training_args.bin --profile transformers-training-args");
  return {sub, [args] { return run_scan(*args); }};
}

}  // namespace torchport::cli
