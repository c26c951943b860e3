// scan(): fails closed. Flags every hostile input of hostile.cpp and every
// crafted code-running file of crafted/ (one test each), passes the clean
// fixtures, calls whole pickled modules unsafe unless their classes are
// allowed, applies Python's protocol-2 renames, walks directories by
// content, shows the payload of refused containers; and the `torchport
// scan` tool exits 0 / 1 / 2 as documented, with its --json.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>
#include <torchport/torchport.hpp>

#include "pickle/unpickler.hpp"
#include "security/hostile.hpp"
#include "security/scan_text.hpp"
#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

const std::filesystem::path kCrafted =
    std::filesystem::path(TORCHPORT_FIXTURES_DIR) / ".." / "security" / "crafted";

// Every finding of the report and of its members.
void each_finding(const ScanReport& r, const std::function<void(const ScanFinding&)>& f) {
  for (const auto& x : r.findings) f(x);
  for (const auto& m : r.members) each_finding(m, f);
}

// --- hostile.cpp's catalogue ---------------------------------------------

class ScanHostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(ScanHostile, FlagsIt) {
  const HostileCase& c = GetParam();
  const ScanReport r = scan(borrow(c.bytes, c.name));
  // The catalogue predates the fail-closed verdicts: what it calls
  // dangerous or needs_code is unsafe now; malformed stays malformed unless
  // the damaged file also names something off the allow-list.
  if (c.scan == "dangerous" || c.scan == "needs_code") {
    EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << c.name << ": " << describe(r);
  } else if (c.scan == "malformed") {
    // Broken: never clean (a damaged file that names nothing may also be no
    // model file at all).
    EXPECT_TRUE(r.verdict != ScanVerdict::clean) << c.name << ": " << describe(r);
  } else {
    EXPECT_EQ(scan_verdict_name(r.verdict), c.scan) << c.name << ": " << describe(r);
  }
  if (r.verdict != ScanVerdict::clean && r.verdict != ScanVerdict::not_a_model_file) {
    EXPECT_FALSE(r.reason().empty());
  }
  if (c.scan == "dangerous") {
    EXPECT_NE(r.reason().find(c.message), std::string::npos) << describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ScanHostile, ::testing::ValuesIn(hostile_cases()),
                         [](const auto& p) { return p.param.name; });

// --- crafted/ and benign/: one file (or folder) per technique --------------

const std::filesystem::path kBenign =
    std::filesystem::path(TORCHPORT_FIXTURES_DIR) / ".." / "security" / "benign";

struct CraftedCase {
  std::string file, verdict, global, reason, source;
  bool known_dangerous = false;
  bool reads_on = false;  // reached only by a loader that reads on (torch.load does not)
  /// "torch_weights_only" when the entry has it: null (no verdict: our
  /// reader refuses the file) or {"loads", "since"} (the current release's
  /// answer and the first release it holds from).
  std::optional<nlohmann::json> weights_only;
};

std::vector<CraftedCase> cases_of(const std::filesystem::path& dir) {
  std::vector<CraftedCase> out;
  for (const auto& c : read_json(dir / "expected.json"))
    out.push_back(
        {c["file"], c["verdict"], c.value("global", ""), c.value("reason", ""),
         c.value("source", ""), c.value("known_dangerous", false), c.value("reads_on", false),
         c.contains("torch_weights_only") ? std::optional<nlohmann::json>(c["torch_weights_only"])
                                          : std::nullopt});
  return out;
}

// The entry's torch_weights_only expectation, when it has one.
void check_weights_only(const CraftedCase& c, const ScanReport& r) {
  if (!c.weights_only) return;
  if (c.weights_only->is_null()) {
    EXPECT_FALSE(r.torch_weights_only) << c.file << ": " << r.torch_weights_only->why;
    return;
  }
  ASSERT_TRUE(r.torch_weights_only) << c.file << ": " << describe(r);
  const TorchWeightsOnly& t = *r.torch_weights_only;
  EXPECT_EQ(t.loads, std::optional<bool>((*c.weights_only)["loads"].get<bool>()))
      << c.file << ": " << t.why;
  EXPECT_EQ(t.since, (*c.weights_only)["since"].get<std::string>()) << c.file;
  EXPECT_EQ(t.torch, "2.14");
  ASSERT_FALSE(t.releases.empty());
  EXPECT_EQ(t.releases.front().first, "2.6");
  EXPECT_EQ(t.releases.back().last, "2.14");
  EXPECT_EQ(t.releases.back().first, t.since);
  EXPECT_EQ(t.releases.size(), t.since == "2.6" ? 1u : 2u) << c.file;
}
std::vector<CraftedCase> crafted_cases() {
  return cases_of(kCrafted);
}

// A file's report, or a folder's: its files' reports as members, with the
// worst of their verdicts.
ScanReport scan_any(const std::filesystem::path& path, const OpenOptions& o = {}) {
  if (!std::filesystem::is_directory(path)) return scan(path, o);
  ScanReport r;
  r.path = path.string();
  r.verdict = ScanVerdict::not_a_model_file;
  for (auto& m : scan_directory(path, o)) {
    if (m.verdict != ScanVerdict::not_a_model_file)
      r.verdict =
          r.verdict == ScanVerdict::not_a_model_file ? m.verdict : worse(r.verdict, m.verdict);
    r.members.push_back(std::move(m));
  }
  return r;
}

std::string case_name(const CraftedCase& c) {
  std::string n = c.file;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class ScanCrafted : public ::testing::TestWithParam<CraftedCase> {};

TEST_P(ScanCrafted, GetsItsVerdict) {
  const CraftedCase& c = GetParam();
  const ScanReport r = scan_any(kCrafted / c.file);
  EXPECT_EQ(scan_verdict_name(r.verdict), c.verdict)
      << c.file << " (" << c.source << "): " << describe(r);
  check_weights_only(c, r);
  if (c.verdict != "unsafe") return;
  bool found = false;
  each_finding(r, [&](const ScanFinding& f) {
    if (f.reason == c.reason && (c.global.empty() || f.global == c.global)) {
      found = true;
      EXPECT_EQ(f.known_dangerous, c.known_dangerous)
          << c.file << ": " << f.global << ": " << f.message;
      EXPECT_EQ(f.severity, ScanVerdict::unsafe);
    }
  });
  EXPECT_TRUE(found) << c.file << ": no finding '" << c.reason << "' for '" << c.global << "':\n"
                     << describe(r);
  // open() with unknown globals refused reads none of them (a TorchScript
  // archive's weights it reads: its code/ is never read; a payload only a
  // loader that reads on reaches, torch.load and open() never read).
  if (c.reason == "torchscript-code" || c.reads_on) return;
  try {
    OpenOptions strict;
    strict.allow_unknown_globals = false;
    (void)open(kCrafted / c.file, strict);
    ADD_FAILURE() << c.file << ": open() with allow_unknown_globals=false accepts it";
  } catch (const Error&) {
  }
}

INSTANTIATE_TEST_SUITE_P(All, ScanCrafted, ::testing::ValuesIn(crafted_cases()),
                         [](const auto& p) { return case_name(p.param); });

TEST(ScanCrafted, AtLeastFortyDistinctGlobalsOrTricks) {
  std::set<std::string> distinct;
  for (const auto& c : crafted_cases()) distinct.insert(c.global.empty() ? c.file : c.global);
  EXPECT_GE(distinct.size(), 40u);
}

class ScanBenign : public ::testing::TestWithParam<CraftedCase> {};

TEST_P(ScanBenign, GetsItsVerdict) {
  const CraftedCase& c = GetParam();
  const ScanReport r = scan_any(kBenign / c.file);
  EXPECT_EQ(scan_verdict_name(r.verdict), c.verdict)
      << c.file << " (" << c.source << "): " << describe(r);
  check_weights_only(c, r);
}

INSTANTIATE_TEST_SUITE_P(All, ScanBenign, ::testing::ValuesIn(cases_of(kBenign)),
                         [](const auto& p) { return case_name(p.param); });

// --- benign files: zero false positives ----------------------------------

TEST(Scan, CleanFixturesPass) {
  for (const char* name :
       {"checkpoint.pt", "dtypes.pt", "views.pt", "legacy.pt", "legacy_storage_view.pt", "tar.pt",
        "deflated.pt", "zip64.pt", "big_endian.pt", "rebuild_v3.pt", "archive_prefix.pt",
        "protocol2.pt", "protocol3.pt", "protocol4.pt", "protocol5.pt", "conversions.pt",
        "plain_protocol0.pkl", "plain_protocol1.pkl", "plain_protocol2.pkl"}) {
    const ScanReport r = scan(fixture(name));
    EXPECT_EQ(r.verdict, ScanVerdict::clean) << name << ": " << describe(r);
    EXPECT_EQ(r.reading, "ok") << name;
    EXPECT_FALSE(r.pickles.empty()) << name;
    for (const auto& p : r.pickles) {
      EXPECT_TRUE(p.error.empty()) << name << ": " << p.name << ": " << p.error;
      for (const auto& g : p.globals) {
        EXPECT_TRUE(g.allowed) << name << ": " << g.name;
        EXPECT_TRUE(g.reasons.empty()) << name << ": " << g.name;
      }
    }
  }
}

// What torch >= 2.6's default torch.load does with a file, as the scan
// judges it (checked against torch 2.6 and 2.14.1 themselves by
// check_weights_only.py, tests check_weights_only_torch2 and _torch_current).
TEST(Scan, TorchWeightsOnlyVerdicts) {
  const auto wo = [](const std::string& name) { return scan(fixture(name)).torch_weights_only; };
  const auto loads = wo("checkpoint.pt");
  ASSERT_TRUE(loads);
  EXPECT_EQ(loads->loads, std::optional<bool>(true));
  EXPECT_TRUE(loads->needs.empty());

  const auto numpy = wo("numpy/training_numpy.pt");
  ASSERT_TRUE(numpy);
  EXPECT_EQ(numpy->loads, std::optional<bool>(false));
  EXPECT_TRUE(numpy->why.empty()) << numpy->why;
  for (const char* n :
       {"numpy.core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype", "numpy.dtypes.*"})
    EXPECT_NE(std::find(numpy->needs.begin(), numpy->needs.end(), n), numpy->needs.end()) << n;
  const std::string line = add_safe_globals_line(numpy->needs);
  EXPECT_NE(line.find("torch.serialization.add_safe_globals([(getattr(importlib.import_module("),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("\"numpy.ndarray\")"), std::string::npos) << line;
  // Names come from the file: anything but dotted identifiers gives no line.
  EXPECT_EQ(add_safe_globals_line({"os\"), __import__(\"os"}), "");
  EXPECT_EQ(add_safe_globals_line({"numpy.ndarray", "a b.c"}), "");
  EXPECT_EQ(add_safe_globals_line({}), "");
  // Never a line trusting a known way to run code, however its dots split.
  EXPECT_EQ(add_safe_globals_line({"numpy.ndarray", "posix.system"}), "");
  EXPECT_EQ(add_safe_globals_line({"pathlib.os.system"}), "");
  EXPECT_EQ(add_safe_globals_line({"eval"}), "");

  const auto p4 = wo("protocol4.pt");  // its unpickler reads protocol 2's opcodes only
  ASSERT_TRUE(p4);
  EXPECT_EQ(p4->loads, std::optional<bool>(false));
  EXPECT_NE(p4->why.find("SHORT_BINUNICODE"), std::string::npos) << p4->why;
  const auto tar = wo("tar.pt");
  ASSERT_TRUE(tar);
  EXPECT_NE(tar->why.find("tar format"), std::string::npos) << tar->why;
  EXPECT_FALSE(wo("plain_protocol2.pkl"));  // torch.load reads no plain pickle: not judged

  const auto built = wo("pickle_semantics/build_data.pt");  // BUILD on a tensor: set_ there
  ASSERT_TRUE(built);
  EXPECT_FALSE(built->loads);
  EXPECT_NE(built->why.find("not judged"), std::string::npos) << built->why;
}

// Release by release (the rules of torch 2.6.0 to 2.14.1): SETITEM on a
// list loads up to 2.9; torch.int4 from 2.7; torch.float4_e2m1fn_x2 is no
// torch global before 2.8 (no add_safe_globals can name it there).
TEST(Scan, TorchWeightsOnlyAnswersReleaseByRelease) {
  const auto benign = [](const std::string& name) {
    return scan(kBenign / "weights_only" / name).torch_weights_only;
  };
  const auto list = benign("setitem_on_list.pt");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->loads, std::optional<bool>(false));
  EXPECT_EQ(list->since, "2.10");
  EXPECT_NE(list->why.find("SETITEMs a list"), std::string::npos) << list->why;
  ASSERT_EQ(list->releases.size(), 2u);
  EXPECT_EQ(list->releases[0].first, "2.6");
  EXPECT_EQ(list->releases[0].last, "2.9");
  EXPECT_EQ(list->releases[0].loads, std::optional<bool>(true));

  const auto int4 = benign("dtype_int4.pt");
  ASSERT_TRUE(int4);
  EXPECT_EQ(int4->loads, std::optional<bool>(true));
  EXPECT_EQ(int4->since, "2.7");
  ASSERT_EQ(int4->releases.size(), 2u);
  EXPECT_EQ(int4->releases[0].needs, std::vector<std::string>{"torch.int4"});
  EXPECT_TRUE(int4->releases[0].why.empty()) << int4->releases[0].why;  // a line allows it

  const auto fp4 = benign("dtype_float4_e2m1fn_x2.pt");
  ASSERT_TRUE(fp4);
  EXPECT_EQ(fp4->since, "2.8");
  ASSERT_EQ(fp4->releases.size(), 2u);
  EXPECT_EQ(fp4->releases[0].last, "2.7");
  EXPECT_NE(fp4->releases[0].why.find("which torch has only from 2.8 on"), std::string::npos)
      << fp4->releases[0].why;

  // A Python 2 name torch spells its own way: `needs` names what each
  // release's unpickler looks up (2.14 maps exceptions.* to builtins.*).
  Pk p;
  p.raw("}(").s("e").glob("exceptions", "ValueError").setitems();
  const auto py2 = scan(borrow(torch_zip(p.stop(), {}), "py2.pt")).torch_weights_only;
  ASSERT_TRUE(py2);
  EXPECT_EQ(py2->needs, std::vector<std::string>{"builtins.ValueError"});
  ASSERT_EQ(py2->releases.size(), 2u);
  EXPECT_EQ(py2->releases[0].last, "2.13");
  EXPECT_EQ(py2->releases[0].needs, std::vector<std::string>{"exceptions.ValueError"});
}

TEST(Scan, ZipPickleStatistics) {
  const ScanReport r = scan(fixture("checkpoint.pt"));
  EXPECT_EQ(r.format, "pytorch-zip");
  ASSERT_EQ(r.pickles.size(), 1u);
  const PickleScan& p = r.pickles.front();
  EXPECT_TRUE(p.name.ends_with("/data.pkl")) << p.name;
  EXPECT_EQ(p.stats.protocol, 2);
  EXPECT_GT(p.stats.opcodes['.'], 0u);  // STOP
  EXPECT_GT(p.stats.persistent_ids, 0u);
  EXPECT_GT(r.tensor_records, 0u);
  bool rebuild = false;
  for (const auto& g : p.globals)
    if (g.name == "torch._utils._rebuild_tensor_v2") {
      rebuild = true;
      EXPECT_GT(g.count, 0u);
      EXPECT_GT(g.offset, 0u);
      EXPECT_GT(g.calls, 0u);
      EXPECT_EQ(g.opcode, "GLOBAL");
      EXPECT_EQ(g.call_opcode, "REDUCE");
      EXPECT_TRUE(g.allowed);
    }
  EXPECT_TRUE(rebuild);
  EXPECT_GT(r.tensors, 0u);
}

// The classes of a whole pickled nn.Module: torch.load would import and run
// them, so scan says unsafe; allowed by pattern, the file is clean; open()
// reads them inertly either way, and with allow_unknown_globals=false only
// when the patterns cover them.
TEST(Scan, WholeModuleIsUnsafeUnlessAllowed) {
  const ScanReport whole = scan(fixture("whole_module.pt"));
  EXPECT_EQ(whole.verdict, ScanVerdict::unsafe) << describe(whole);
  EXPECT_NE(whole.reason().find("calls"), std::string::npos) << describe(whole);
  std::vector<std::string> modules;
  for (const auto& p : whole.pickles)
    for (const auto& g : p.globals)
      if (!g.allowed) {
        EXPECT_FALSE(g.known_dangerous) << g.name;
        const std::string module = g.name.substr(0, g.name.rfind('.'));
        if (std::ranges::find(modules, module + ".*") == modules.end())
          modules.push_back(module + ".*");
      }
  ASSERT_FALSE(modules.empty());
  OpenOptions o;
  o.allow = modules;
  const ScanReport allowed = scan(fixture("whole_module.pt"), o);
  EXPECT_EQ(allowed.verdict, ScanVerdict::clean) << describe(allowed);
  // Only part of the patterns: still unsafe.
  o.allow.pop_back();
  EXPECT_EQ(scan(fixture("whole_module.pt"), o).verdict, ScanVerdict::unsafe);

  EXPECT_GT(open(fixture("whole_module.pt")).size(), 0u);  // the default: inert classes
  OpenOptions strict;
  strict.allow_unknown_globals = false;
  EXPECT_THROW((void)open(fixture("whole_module.pt"), strict), Error);
  strict.allow = modules;
  EXPECT_GT(open(fixture("whole_module.pt"), strict).size(), 0u);
}

TEST(Scan, AllowPatternsNeverCoverKnownDangerous) {
  OpenOptions o;
  o.allow = {"os.*", "posix.system", "subprocess.Popen"};
  for (const char* f : {"os_system.pt", "posix_system.pkl", "subprocess_popen.pt"}) {
    const ScanReport r = scan(kCrafted / f, o);
    EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << f << ": " << describe(r);
  }
  // An unknown class is covered.
  o.allow = {"mymodel.Evil"};
  EXPECT_EQ(scan(kCrafted / "unknown_class_call.pt", o).verdict, ScanVerdict::clean);
  o.allow = {"mymodel.*"};
  EXPECT_EQ(scan(kCrafted / "unknown_class_call.pt", o).verdict, ScanVerdict::clean);
  o.allow = {"mymod.*"};
  EXPECT_EQ(scan(kCrafted / "unknown_class_call.pt", o).verdict, ScanVerdict::unsafe);
}

TEST(Scan, AllowPatterns) {
  using pickle::allow_pattern_matches;
  EXPECT_TRUE(allow_pattern_matches("mynet.Net", "mynet", "Net"));
  EXPECT_FALSE(allow_pattern_matches("mynet.Net", "mynet", "Nett"));
  EXPECT_FALSE(allow_pattern_matches("mynet.Net", "mynetx", "Net"));
  EXPECT_TRUE(allow_pattern_matches("mynet.*", "mynet", "Net"));
  EXPECT_TRUE(allow_pattern_matches("mynet.*", "mynet.layers", "Block"));
  EXPECT_FALSE(allow_pattern_matches("mynet.*", "mynetwork", "Block"));
  EXPECT_FALSE(allow_pattern_matches("mynet.*", "mynet", "os.system"));  // attribute chains never
  EXPECT_FALSE(allow_pattern_matches("torch.nn.*", "torch", "nn"));
  for (const char* bad : {"", "*", "net", ".*", "a..b", "a.*.b", "a b.c", "1a.b", "a.b*"}) {
    const std::vector<std::string> p{bad};
    EXPECT_THROW(pickle::validate_allow_patterns(p), Error) << bad;
  }
  const std::vector<std::string> good{"a.b", "a.*", "torch.nn.modules.linear.Linear", "_x.y_1"};
  EXPECT_NO_THROW(pickle::validate_allow_patterns(good));
}

// --- Python's protocol-2 renames --------------------------------------------

TEST(Scan, CompatRenamesAsPythonDoes) {
  using pickle::compat_rename;
  EXPECT_EQ(compat_rename("cStringIO", "StringIO"),
            std::make_pair(std::string("io"), std::string("StringIO")));
  EXPECT_EQ(compat_rename("__builtin__", "xrange"),
            std::make_pair(std::string("builtins"), std::string("range")));
  EXPECT_EQ(compat_rename("urllib2", "urlopen"),
            std::make_pair(std::string("urllib.request"), std::string("urlopen")));
  EXPECT_EQ(compat_rename("anydbm", "open"),
            std::make_pair(std::string("dbm"), std::string("open")));
  EXPECT_EQ(compat_rename("exceptions", "ValueError"),
            std::make_pair(std::string("builtins"), std::string("ValueError")));
  EXPECT_EQ(compat_rename("mynet", "Net"),
            std::make_pair(std::string("mynet"), std::string("Net")));
  // Below protocol 3 the VM renames; from 3 on Python does not.
  for (int proto : {0, 2, 3, 4}) {
    std::string pkl = proto >= 2 ? std::string("\x80") + static_cast<char>(proto) : std::string();
    pkl += "ccStringIO\nopen\n.";
    ByteReader reader(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(pkl.data()), pkl.size()),
        "p");
    pickle::Stats stats;
    (void)pickle::unpickle(reader, Limits{}, {}, &stats);
    ASSERT_EQ(stats.globals.size(), 1u);
    EXPECT_EQ(stats.globals[0].module, proto < 3 ? "io" : "cStringIO") << proto;
    EXPECT_EQ(stats.globals[0].written, proto < 3 ? "cStringIO.open" : "") << proto;
    EXPECT_EQ(stats.globals[0].klass, pickle::GlobalClass::dangerous) << proto;
  }
}

// --- content, not names ------------------------------------------------------

TEST(Scan, DirectoryWalkSniffsContent) {
  const auto dir = temp_dir("scan_walk");
  std::filesystem::create_directories(dir / "sub");
  std::filesystem::copy_file(fixture("checkpoint.pt"), dir / "pytorch_model.bin");
  std::filesystem::copy_file(fixture("legacy.pt"), dir / "sub" / "weights.txt");
  std::ofstream(dir / "README.md") << "# A model\nLicense: MIT\n";
  std::ofstream(dir / "LICENSE") << "License text (a LONG opcode would read this line)\n";
  std::ofstream(dir / "config.json") << R"({"hidden_size": 4})";
  std::ofstream(dir / "empty");
  std::uint64_t last_done = 0, last_total = 1, calls = 0;
  std::vector<ScanReport> rs =
      scan_directory(dir, {}, {}, [&](std::uint64_t done, std::uint64_t total) {
        EXPECT_LE(done, total);
        EXPECT_GE(done, last_done);  // never goes back
        last_done = done;
        last_total = total;
        ++calls;
      });
  ASSERT_EQ(rs.size(), 6u);
  EXPECT_EQ(calls, 7u);  // before each of the 6 files, and at the end
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, std::filesystem::file_size(fixture("checkpoint.pt")) +
                            std::filesystem::file_size(fixture("legacy.pt")) + 23 + 50 + 18);
  for (const auto& r : rs) {
    const std::string name = std::filesystem::path(r.path).filename().string();
    if (name == "pytorch_model.bin" || name == "weights.txt") {
      EXPECT_EQ(r.verdict, ScanVerdict::clean) << name << ": " << describe(r);
    } else {
      EXPECT_EQ(r.verdict, ScanVerdict::not_a_model_file) << name << ": " << describe(r);
    }
  }
  std::string out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan " + dir.string(), &out), 0) << out;
  // A payload under a name no scanner looks at.
  std::filesystem::copy_file(kCrafted / "notes.txt", dir / "sub" / "vocab.txt");
  rs = scan_directory(dir);
  const auto evil =
      std::ranges::find_if(rs, [](const ScanReport& r) { return r.path.ends_with("vocab.txt"); });
  ASSERT_NE(evil, rs.end());
  EXPECT_EQ(evil->verdict, ScanVerdict::unsafe) << describe(*evil);
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan " + dir.string() + " 2>&1", &out), 1)
      << out;
  EXPECT_NE(out.find("vocab.txt"), std::string::npos) << out;
}

// One walk of the whole folder reads each file as scanning it alone does.
TEST(Scan, EveryCraftedFileInOneWalk) {
  const auto rs = scan_directory(kCrafted);
  std::map<std::string, ScanVerdict> walked;
  for (const auto& r : rs)
    walked[std::filesystem::relative(r.path, kCrafted).generic_string()] = r.verdict;
  std::size_t files = 0;
  for (const auto& c : crafted_cases()) {
    if (std::filesystem::is_directory(kCrafted / c.file)) continue;
    ++files;
    ASSERT_TRUE(walked.count(c.file)) << c.file;
    EXPECT_EQ(scan_verdict_name(walked[c.file]), c.verdict) << c.file;
  }
  EXPECT_GT(files, 150u);
  for (const auto& [file, verdict] : walked) {
    if (file.ends_with(".py") || file.ends_with(".json")) {
      EXPECT_EQ(verdict, ScanVerdict::not_a_model_file) << file;
    }
  }
}

TEST(Scan, NestedArchivesAreBounded) {
  // A zip in a zip in a zip ... deeper than the scan follows: what lies
  // below the bound is not read, and the scan ends.
  const auto dir = temp_dir("scan_nested");
  const auto first = read_bytes(kCrafted / "nested_archive.zip");
  std::string inner(reinterpret_cast<const char*>(first.data()), first.size());
  for (int i = 0; i < 6; ++i) {
    ZipMember m;
    m.name = "layer.zip";
    m.data = inner;
    m.method = 8;
    inner = zip_archive({m});
  }
  std::ofstream(dir / "deep.zip", std::ios::binary) << inner;
  const ScanReport r = scan(dir / "deep.zip");
  EXPECT_NE(r.verdict, ScanVerdict::clean) << describe(r);
  const ScanReport shallow = scan(kCrafted / "nested_archive.zip");
  EXPECT_EQ(shallow.verdict, ScanVerdict::unsafe) << describe(shallow);
  ASSERT_EQ(shallow.members.size(), 2u);
  EXPECT_TRUE(shallow.members[1].path.ends_with("!weights/evil.pt")) << shallow.members[1].path;
}

TEST(Scan, RefusedContainerShowsItsPayload) {
  const ScanReport r = scan(kCrafted / "zip_encrypted_flag_payload.pt");
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  EXPECT_EQ(r.reading, "refused");
  EXPECT_NE(r.reading_error.find("encrypt"), std::string::npos) << r.reading_error;
  EXPECT_NE(r.reason().find("posix.system"), std::string::npos) << describe(r);
  // The same container with a harmless pickle is not unsafe; but an entry
  // flagged encrypted may be ciphertext a reader with the password would
  // unpickle: unscannable.
  const ScanReport bad = scan(fixture("bad/zip_encrypted.pt"));
  EXPECT_EQ(bad.verdict, ScanVerdict::unscannable) << describe(bad);
  // An encrypted zip of text holds no pickle: nothing torch could read.
  ZipMember note;
  note.name = "notes/test.txt";
  note.data = "hello\n";
  std::string text_zip = zip_archive({note});
  text_zip[6] = '\x01';                                // local header: encrypted
  text_zip[text_zip.find("PK\x01\x02") + 8] = '\x01';  // central directory too
  // Its members cannot be read without the password: what a loader with it
  // would unpickle, the scan cannot vouch for.
  const ScanReport text = scan(borrow(text_zip, "text.zip"));
  EXPECT_EQ(text.reading, "refused") << describe(text);
  EXPECT_EQ(text.verdict, ScanVerdict::unscannable) << describe(text);
}

// --- bad fixtures, other formats ----------------------------------------

// A torch zip cut short: truncated, its tensor records never judged as
// files (zeros then floats made tar archives of them, ambiguous, so
// unsafe), and the scan's work about the file's size (each entry written
// with a data descriptor read to the end of the file cost n times it).
TEST(Scan, TruncatedZipIsTruncated) {
  std::string zeros_then_floats(2048, '\0');
  zeros_then_floats += std::string(512, '\x3f');
  const std::string zip = torch_zip(good_state_pickle(), {{"0", zeros_then_floats}});
  const auto real = read_bytes(fixture("conversions.pt"));  // torch's data descriptors
  for (const std::string& whole :
       {zip, std::string(reinterpret_cast<const char*>(real.data()), real.size())})
    for (const double part : {0.5, 0.9}) {
      const std::string cut = whole.substr(0, static_cast<std::size_t>(whole.size() * part));
      OpenOptions o;
      o.limits.max_scan_bytes = 3 * cut.size();
      const ScanReport r = scan(borrow(cut, "cut.pt"), o);
      EXPECT_EQ(r.verdict, ScanVerdict::truncated) << part << ": " << describe(r);
      EXPECT_GT(r.tensor_records, 0u) << describe(r);
      each_finding(r, [&](const ScanFinding& f) {
        EXPECT_NE(f.reason, "ambiguous") << f.where << ": " << f.message;
        EXPECT_EQ(f.message.find("budget"), std::string::npos) << f.where << ": " << f.message;
      });
    }
}

TEST(Scan, BadFixturesAreNeverClean) {
  for (const auto& c : read_json(fixture("bad/expected.json"))) {
    const std::string file = c["file"];
    const ScanReport r = scan(fixture("bad/" + file));
    // No checkpoint: a cut zip is truncated; the rest hold nothing a loader
    // unpickles (a zip of other files is as clean as its members).
    if (c["code"] == "not_a_checkpoint") {
      if (file == "zip_truncated.pt")
        EXPECT_EQ(r.verdict, ScanVerdict::truncated) << file << ": " << describe(r);
      else
        EXPECT_EQ(scan_exit_code(r.verdict), 0) << file << ": " << describe(r);
      continue;
    }
    EXPECT_NE(r.verdict, ScanVerdict::clean) << file << ": " << describe(r);
    if (c["code"] == "unsafe_global") {
      EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << file << ": " << describe(r);
    }
    if (c["code"] != "not_a_checkpoint") {
      EXPECT_NE(r.verdict, ScanVerdict::not_a_model_file) << file << ": " << describe(r);
    }
  }
}

TEST(Scan, TorchScriptCodeIsUnsafe) {
  for (const char* name : {"torchscript.pt", "torchscript_frozen.pt"}) {
    const ScanReport ts = scan(fixture(name));
    EXPECT_EQ(ts.format, "torchscript");
    EXPECT_FALSE(ts.code_records.empty()) << name;
    EXPECT_EQ(ts.verdict, ScanVerdict::unsafe) << describe(ts);
    EXPECT_EQ(ts.findings.front().reason, "torchscript-code") << describe(ts);
    EXPECT_GE(ts.pickles.size(), 2u) << name;  // data.pkl and constants.pkl
  }
}

TEST(Scan, SafetensorsAndRecords) {
  const auto dir = temp_dir("scan_formats");
  const TensorCatalog cat = open(fixture("dtypes.pt"));
  TransformOptions keep_real;
  keep_real.keep = [](std::string_view n) { return n != "c64" && n != "c128"; };
  const TensorCatalog f32 = transform(cat, keep_real);
  save(f32, dir / "m.safetensors", SaveFormat::safetensors);
  ScanReport r = scan(dir / "m.safetensors");
  EXPECT_EQ(r.format, "safetensors");
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << describe(r);
  EXPECT_TRUE(r.pickles.empty());
  EXPECT_EQ(r.tensors, f32.size());
  // A truncated safetensors file is truncated.
  auto bytes = read_bytes(dir / "m.safetensors");
  bytes.resize(bytes.size() - 3);
  write_bytes(dir / "cut.safetensors", bytes);
  r = scan(dir / "cut.safetensors");
  EXPECT_EQ(r.verdict, ScanVerdict::truncated) << describe(r);
  for (const char* ext : {"mpk", "json", "tpb", "tpb.gz"}) {
    const auto path = dir / (std::string("m.") + ext);
    write_record(cat, path, *recorder_for_path(path));
    r = scan(path);
    EXPECT_EQ(r.verdict, ScanVerdict::clean) << ext << ": " << describe(r);
    EXPECT_TRUE(r.format.starts_with("torchport")) << r.format;
  }
}

TEST(Scan, ShardedScansEveryShard) {
  const auto dir = temp_dir("scan_sharded");
  SaveOptions shards;
  shards.max_shard_size = 256;  // checkpoint.pt holds 740 bytes: several shards
  save(open(fixture("checkpoint.pt")), dir / "model.safetensors", SaveFormat::safetensors, shards);
  ScanReport r = scan(dir);
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << describe(r);
  EXPECT_GE(r.shards.size(), 2u);
  EXPECT_EQ(r.format, "sharded-safetensors");
  // One shard replaced by a pickle that runs code.
  const std::string evil = torch_zip(Pk().call("os", "system").stop());
  std::ofstream(dir / r.shards.back(), std::ios::binary | std::ios::trunc) << evil;
  r = scan(dir);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << describe(r);
  EXPECT_NE(r.reason().find("os.system"), std::string::npos) << describe(r);
}

// --- the tool ------------------------------------------------------------

TEST(ScanCli, ExitStatusAndJson) {
  const auto dir = temp_dir("scan_cli");
  std::ofstream(dir / "evil.pt", std::ios::binary)
      << torch_zip(Pk().call("posix", "system").stop());
  const std::string tool = TORCHPORT_TOOL;
  std::string out;
  EXPECT_EQ(run_command(tool + " scan " + fixture("checkpoint.pt").string(), &out), 0) << out;
  EXPECT_NE(out.find("clean"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool + " scan " + (dir / "evil.pt").string(), &out), 1) << out;
  EXPECT_NE(out.find("posix.system"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool + " scan", &out), 2) << out;
  EXPECT_EQ(run_command(tool + " scan --allow 'not a pattern' " + fixture("checkpoint.pt").string(),
                        &out),
            2)
      << out;
  EXPECT_EQ(run_command(tool + " scan " + fixture("whole_module.pt").string(), &out), 1) << out;
  EXPECT_EQ(run_command(tool + " scan " + fixture("torchscript.pt").string(), &out), 1) << out;
  EXPECT_NE(out.find("torchscript-code"), std::string::npos) << out;

  // --allow: every class of the whole module, by module pattern.
  const ScanReport whole = scan(fixture("whole_module.pt"));
  std::set<std::string> patterns;
  for (const auto& p : whole.pickles)
    for (const auto& g : p.globals)
      if (!g.allowed) patterns.insert(g.name.substr(0, g.name.rfind('.')) + ".*");
  std::string allow;
  for (const auto& p : patterns) allow += " --allow " + p;
  EXPECT_EQ(run_command(tool + " scan" + allow + " " + fixture("whole_module.pt").string(), &out),
            0)
      << out;

  ASSERT_EQ(
      run_command("{ " + tool + " scan --json " + (dir / "evil.pt").string() + " 2>/dev/null; }",
                  &out),
      1);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["verdict"], "unsafe");
  EXPECT_EQ(j["format"], "pytorch-zip");
  EXPECT_EQ(j["reading"], "ok");  // the reader reads it; open() refuses what it names
  ASSERT_EQ(j["pickles"].size(), 1u);
  const auto& p = j["pickles"][0];
  EXPECT_EQ(p["name"], "archive/data.pkl");
  EXPECT_EQ(p["opcodes"]["REDUCE"], 1);
  ASSERT_EQ(p["globals"].size(), 1u);
  const auto& g = p["globals"][0];
  EXPECT_EQ(g["name"], "posix.system");
  EXPECT_EQ(g["opcode"], "GLOBAL");
  EXPECT_EQ(g["count"], 1);
  EXPECT_EQ(g["calls"], 1);
  EXPECT_EQ(g["call_opcode"], "REDUCE");
  EXPECT_EQ(g["allowed"], false);
  EXPECT_EQ(g["known_dangerous"], true);
  EXPECT_EQ(g["reasons"], nlohmann::json::array({"calls", "known-dangerous"}));
  EXPECT_GT(g["offset"].get<int>(), 0);
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["severity"], "unsafe");
  EXPECT_EQ(j["findings"][0]["reason"], "calls");
  EXPECT_EQ(j["findings"][0]["global"], "posix.system");
  EXPECT_TRUE(j["reason"].get<std::string>().find("posix.system") != std::string::npos);

  // A directory as JSON: one object per file, and the counts.
  ASSERT_EQ(run_command("{ " + tool + " scan --json " + dir.string() + " 2>/dev/null; }", &out), 1);
  const auto d = nlohmann::json::parse(out);
  EXPECT_EQ(d["verdict"], "unsafe");
  EXPECT_EQ(d["counts"]["unsafe"], 1);
  ASSERT_EQ(d["files"].size(), 1u);
}

// No line of trust for a flagged file: the report's JSON never carries
// add_safe_globals unless it (and every report holding it) is clean, on
// every crafted file and every hostile input; the tool's text and JSON, on
// the whole crafted folder and on a torch zip calling os.system, neither.
bool offers_trust(const nlohmann::json& j, bool trusted) {
  if (j.is_object()) {
    if (j.contains("verdict")) trusted = trusted && j["verdict"] == "clean";
    if (j.contains("add_safe_globals") && !trusted) return true;
    for (const auto& [k, v] : j.items())
      if (offers_trust(v, trusted)) return true;
  } else if (j.is_array()) {
    for (const auto& v : j)
      if (offers_trust(v, trusted)) return true;
  }
  return false;
}

TEST(Scan, NeverOffersTrustForAFlaggedFile) {
  std::size_t unsafe = 0;
  for (const auto& c : crafted_cases()) {
    const ScanReport r = scan_any(kCrafted / c.file);
    if (r.verdict == ScanVerdict::clean) continue;
    unsafe += r.verdict == ScanVerdict::unsafe;
    for (const ScanReport& one :
         r.members.empty() || !std::filesystem::is_directory(kCrafted / c.file)
             ? std::vector<ScanReport>{r}
             : r.members) {
      EXPECT_FALSE(offers_trust(nlohmann::json::parse(scan_json(one)), true))
          << c.file << ": " << scan_json(one);
    }
    if (r.torch_weights_only) {
      EXPECT_EQ(add_safe_globals_line(r, r.torch_weights_only->needs), "") << c.file;
    }
  }
  EXPECT_GT(unsafe, 100u);
  for (const auto& c : hostile_cases()) {
    const ScanReport r = scan(borrow(c.bytes, c.name));
    if (r.verdict != ScanVerdict::clean) {
      EXPECT_FALSE(offers_trust(nlohmann::json::parse(scan_json(r)), true)) << c.name;
    }
  }
}

TEST(ScanCli, NeverOffersTrustForAFlaggedFile) {
  const auto dir = temp_dir("scan_cli_trust");
  // os.system beside numpy's arrays (which alone would need a line): the
  // line was printed, naming posix.system, under the verdict `unsafe`.
  std::ofstream(dir / "evil.pt", std::ios::binary)
      << torch_zip(Pk().op('(').call("posix", "system").glob("numpy", "ndarray").op('t').stop());
  const std::string tool = TORCHPORT_TOOL;
  std::string out;
  EXPECT_EQ(
      run_command("{ " + tool + " scan " + (dir / "evil.pt").string() + " 2>/dev/null; }", &out),
      1);
  EXPECT_EQ(out.find("add_safe_globals"), std::string::npos) << out;
  EXPECT_EQ(
      run_command("{ " + tool + " scan --json " + (dir / "evil.pt").string() + " 2>/dev/null; }",
                  &out),
      1);
  EXPECT_FALSE(offers_trust(nlohmann::json::parse(out), true)) << out;
  EXPECT_EQ(run_command("{ " + tool + " scan " + kCrafted.string() + " 2>/dev/null; }", &out), 1);
  EXPECT_EQ(out.find("add_safe_globals"), std::string::npos);
  EXPECT_EQ(
      run_command("{ " + tool + " scan --json " + kCrafted.string() + " 2>/dev/null; }", &out), 1);
  const auto all = nlohmann::json::parse(out);
  EXPECT_GT(all["files"].size(), 200u);
  EXPECT_FALSE(offers_trust(all, true));
  // A clean file that needs globals still gets its line.
  EXPECT_EQ(run_command(tool + " scan " + fixture("numpy/training_numpy.pt").string(), &out), 0)
      << out;
  EXPECT_NE(out.find("add_safe_globals"), std::string::npos) << out;
}

}  // namespace
}  // namespace torchport::test
