// scan(): flags every hostile input of hostile.cpp, passes the clean
// fixtures, says needs_code for whole pickled modules and TorchScript, and
// the `torchport scan` tool exits 0 / 1 / 2 as documented, with its --json.

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>
#include <torchport/torchport.hpp>

#include "security/hostile.hpp"
#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

Source borrow(const std::string& bytes, const std::string& name) {
  return Source::borrow(std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
                        name);
}

std::string describe(const ScanReport& r) {
  std::string s = std::string(scan_verdict_name(r.verdict)) + " (" + r.format + ")";
  for (const auto& f : r.findings) s += "\n  " + std::string(scan_verdict_name(f.severity)) + ": " + f.where + ": " + f.reason;
  return s;
}

class ScanHostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(ScanHostile, FlagsIt) {
  const HostileCase& c = GetParam();
  const ScanReport r = scan(borrow(c.bytes, c.name));
  EXPECT_EQ(scan_verdict_name(r.verdict), c.scan) << c.name << ": " << describe(r);
  if (r.verdict != ScanVerdict::clean) {
    EXPECT_FALSE(r.reason().empty());
  }
  if (c.scan == "dangerous") {
    EXPECT_NE(r.reason().find(c.message), std::string::npos) << describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ScanHostile, ::testing::ValuesIn(hostile_cases()),
                         [](const auto& p) { return p.param.name; });

TEST(Scan, CleanFixturesPass) {
  for (const char* name : {"checkpoint.pt", "dtypes.pt", "views.pt", "legacy.pt", "legacy_storage_view.pt", "tar.pt",
                           "deflated.pt", "zip64.pt", "big_endian.pt", "rebuild_v3.pt", "archive_prefix.pt",
                           "protocol2.pt", "protocol5.pt", "plain_protocol0.pkl", "plain_protocol2.pkl"}) {
    const ScanReport r = scan(fixture(name));
    EXPECT_EQ(r.verdict, ScanVerdict::clean) << name << ": " << describe(r);
    EXPECT_FALSE(r.pickles.empty()) << name;
    for (const auto& p : r.pickles) {
      EXPECT_TRUE(p.error.empty()) << name << ": " << p.name << ": " << p.error;
      for (const auto& g : p.stats.globals)
        EXPECT_EQ(g.klass, pickle::GlobalClass::allowed) << name << ": " << g.module << "." << g.name;
    }
  }
}

TEST(Scan, ZipPickleStatistics) {
  const ScanReport r = scan(fixture("checkpoint.pt"));
  EXPECT_EQ(r.format, "pytorch-zip");
  ASSERT_EQ(r.pickles.size(), 1u);
  const PickleScan& p = r.pickles.front();
  EXPECT_TRUE(p.name.ends_with("/data.pkl")) << p.name;
  EXPECT_EQ(p.stats.protocol, 2);
  EXPECT_GT(p.stats.opcodes['.'], 0u);  // STOP
  EXPECT_GT(p.persistent_kinds.at("storage"), 0u);
  bool rebuild = false;
  for (const auto& g : p.stats.globals)
    if (g.module == "torch._utils" && g.name == "_rebuild_tensor_v2") {
      rebuild = true;
      EXPECT_GT(g.count, 0u);
      EXPECT_GT(g.first_offset, 0u);
    }
  EXPECT_TRUE(rebuild);
  EXPECT_GT(p.calls.at("torch._utils._rebuild_tensor_v2"), 0u);
  EXPECT_GT(r.tensors, 0u);
}

TEST(Scan, WholeModuleAndTorchScriptNeedCode) {
  const ScanReport whole = scan(fixture("whole_module.pt"));
  EXPECT_EQ(whole.verdict, ScanVerdict::needs_code) << describe(whole);
  EXPECT_NE(whole.reason().find("calls '"), std::string::npos) << describe(whole);
  for (const char* name : {"torchscript.pt", "torchscript_frozen.pt"}) {
    const ScanReport ts = scan(fixture(name));
    EXPECT_EQ(ts.format, "torchscript");
    EXPECT_FALSE(ts.code_records.empty()) << name;
    EXPECT_GE(ts.verdict, ScanVerdict::needs_code) << describe(ts);
    EXPECT_LT(ts.verdict, ScanVerdict::dangerous) << describe(ts);
    EXPECT_GE(ts.pickles.size(), 2u) << name;  // data.pkl and constants.pkl
  }
}

TEST(Scan, BadFixturesAreNeverClean) {
  for (const auto& c : read_json(fixture("bad/expected.json"))) {
    const std::string file = c["file"];
    const ScanReport r = scan(fixture("bad/" + file));
    EXPECT_GE(r.verdict, ScanVerdict::dangerous) << file << ": " << describe(r);
    if (c["code"] == "unsafe_global") {
      EXPECT_EQ(r.verdict, ScanVerdict::dangerous) << file << ": " << describe(r);
    }
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
  // A truncated safetensors file is malformed.
  auto bytes = read_bytes(dir / "m.safetensors");
  bytes.resize(bytes.size() - 3);
  write_bytes(dir / "cut.safetensors", bytes);
  r = scan(dir / "cut.safetensors");
  EXPECT_EQ(r.verdict, ScanVerdict::malformed) << describe(r);
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
  EXPECT_EQ(r.verdict, ScanVerdict::dangerous) << describe(r);
  EXPECT_NE(r.reason().find("os.system"), std::string::npos) << describe(r);
}

TEST(ScanCli, ExitStatusAndJson) {
  const auto dir = temp_dir("scan_cli");
  std::ofstream(dir / "evil.pt", std::ios::binary) << torch_zip(Pk().call("posix", "system").stop());
  std::string out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan " + fixture("checkpoint.pt").string(), &out), 0) << out;
  EXPECT_NE(out.find("clean"), std::string::npos) << out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan " + (dir / "evil.pt").string(), &out), 1) << out;
  EXPECT_NE(out.find("posix.system"), std::string::npos) << out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan", &out), 2) << out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan " + fixture("whole_module.pt").string(), &out), 0) << out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " scan --strict " + fixture("whole_module.pt").string(), &out), 1)
      << out;

  ASSERT_EQ(run_command("{ " + std::string(TORCHPORT_TOOL) + " scan --json " + (dir / "evil.pt").string() + " 2>/dev/null; }", &out), 1);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["verdict"], "dangerous");
  EXPECT_EQ(j["format"], "pytorch-zip");
  ASSERT_EQ(j["pickles"].size(), 1u);
  const auto& p = j["pickles"][0];
  EXPECT_EQ(p["name"], "archive/data.pkl");
  EXPECT_EQ(p["opcodes"]["REDUCE"], 1);
  ASSERT_EQ(p["globals"].size(), 1u);
  EXPECT_EQ(p["globals"][0]["name"], "posix.system");
  EXPECT_EQ(p["globals"][0]["class"], "dangerous");
  EXPECT_EQ(p["globals"][0]["count"], 1);
  EXPECT_EQ(p["globals"][0]["calls"], 1);
  EXPECT_GT(p["globals"][0]["first_offset"].get<int>(), 0);
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["severity"], "dangerous");
  EXPECT_TRUE(j["reason"].get<std::string>().find("posix.system") != std::string::npos);
}

}  // namespace
}  // namespace torchport::test
