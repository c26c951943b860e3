// The torchport tool's inspect and load commands, run as a user runs them.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "io/zip.hpp"
#include "support/fixtures.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/io/source.hpp"

using torchport::test::fixture;
using torchport::test::run_command;

namespace {

std::string tool() {
  return TORCHPORT_TOOL;
}

TEST(Cli, InspectListsTensorsAndValues) {
  std::string out;
  ASSERT_EQ(run_command(tool() + " inspect " + fixture("checkpoint.pt").string(), &out), 0) << out;
  EXPECT_NE(out.find("pytorch-zip"), std::string::npos) << out;
  EXPECT_NE(out.find("model_state_dict.fc.weight"), std::string::npos) << out;
  EXPECT_NE(out.find("'epoch': 3"), std::string::npos) << out;
}

TEST(Cli, InspectJsonHasTheDocumentedShape) {
  std::string out;
  ASSERT_EQ(run_command(tool() + " inspect --json --top-level-key model_state_dict " +
                            fixture("checkpoint.pt").string() + " 2>/dev/null",
                        &out),
            0);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["format"], "pytorch-zip");
  ASSERT_FALSE(j["tensors"].empty());
  const auto& first = j["tensors"][0];
  EXPECT_EQ(first["name"], "blocks.0.gain");
  EXPECT_EQ(first["dtype"], "F32");
  EXPECT_EQ(first["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(first["bytes"], 8);
  EXPECT_TRUE(j["values"].is_object());
}

// The values are spliced in as to_json's text: valid JSON, nested under
// "values", in the file's order, whole.
TEST(Cli, InspectJsonKeepsTheValuesInOrder) {
  std::string out;
  ASSERT_EQ(
      run_command(tool() + " inspect --json " + fixture("checkpoint.pt").string() + " 2>/dev/null",
                  &out),
      0);
  const auto j = nlohmann::ordered_json::parse(out);
  std::vector<std::string> top;
  for (const auto& [k, v] : j.items()) top.push_back(k);
  EXPECT_EQ(top, (std::vector<std::string>{"format", "tensors", "values"}));
  EXPECT_EQ(j["values"]["epoch"], 3);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j["values"].items()) keys.push_back(k);
  ASSERT_FALSE(keys.empty());
  EXPECT_EQ(keys.front(), "epoch") << out;
  EXPECT_TRUE(j["values"]["optimizer_state_dict"]["param_groups"].is_array()) << out;
}

// The values line stays a line: a whole pickled module is named (its
// attributes printed 26,637 characters for a 20-block net made by torch
// 1.13), anything longer than 1000 characters is cut, saying --json shows
// it all; a training checkpoint's values print whole.
TEST(Cli, InspectBoundsTheValuesLine) {
  const auto line_of = [](const std::string& out) {
    const auto at = out.find("\nvalues: ");
    return at == std::string::npos ? std::string()
                                   : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  std::string out;
  ASSERT_EQ(run_command(tool() + " inspect " + fixture("whole_module.pt").string(), &out), 0)
      << out;
  EXPECT_EQ(line_of(out),
            "values: a pickled torch.nn module, __main__.Net (its tensors are listed above; --json "
            "shows its attributes)");
  ASSERT_EQ(run_command(tool() + " inspect " + fixture("checkpoint.pt").string(), &out), 0) << out;
  EXPECT_EQ(line_of(out).find("shortened"), std::string::npos) << out;
  EXPECT_NE(line_of(out).find("'epoch': 3"), std::string::npos) << out;

  const auto dir = torchport::test::temp_dir("cli_values_line");
  torchport::Value big = torchport::Value::dict();
  for (int i = 0; i < 2000; ++i)
    big.insert(torchport::Value::str("setting_" + std::to_string(i)),
               torchport::Value::real(0.5 * i));
  torchport::SaveOptions whole;
  whole.keep_tree = true;
  torchport::save(torchport::TensorCatalog::from_value(torchport::Format::state_dict, big),
                  dir / "big.pt", torchport::SaveFormat::pytorch, whole);
  ASSERT_EQ(run_command(tool() + " inspect " + (dir / "big.pt").string(), &out), 0) << out;
  const std::string line = line_of(out);
  EXPECT_LT(line.size(), 1100u) << line;
  EXPECT_NE(line.find("(shortened; --json shows every value)"), std::string::npos) << line;
  ASSERT_EQ(run_command(tool() + " inspect --json " + (dir / "big.pt").string(), &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["values"].size(), 2000u);
  std::filesystem::remove_all(dir);
}

// A truncated zip is scanned record by record; the records alike print
// once, the rest named after it, instead of a line or two each (a
// truncated ResNet-18 printed 56 to 73 lines); its tensors' raw records
// are counted, not judged (tensor_records). --json keeps every one.
TEST(Cli, ScanOfATruncatedFileStaysShort) {
  const auto dir = torchport::test::temp_dir("cli_scan_truncated");
  std::vector<torchport::NamedTensor> ts;
  for (int i = 0; i < 80; ++i) {
    std::vector<float> v(256);
    for (std::size_t k = 0; k < v.size(); ++k)
      v[k] = 0.001f * static_cast<float>(k + 1) + static_cast<float>(i);
    ts.push_back({"layer" + std::to_string(i) + ".weight",
                  torchport::Tensor::from(std::span<const float>(v), {16, 16})});
  }
  torchport::save(torchport::TensorCatalog::from_tensors(torchport::Format::state_dict, ts),
                  dir / "whole.pt", torchport::SaveFormat::pytorch);
  const auto size = std::filesystem::file_size(dir / "whole.pt");
  std::filesystem::copy_file(dir / "whole.pt", dir / "cut.pt");
  std::filesystem::resize_file(dir / "cut.pt", size * 6 / 10);
  std::string out;
  EXPECT_EQ(
      run_command("(" + tool() + " scan " + (dir / "cut.pt").string() + " 2>/dev/null)", &out), 2)
      << out;
  EXPECT_LE(std::count(out.begin(), out.end(), '\n'), 15) << out;
  EXPECT_NE(out.find("more members alike"), std::string::npos) << out;
  EXPECT_NE(out.find("truncated"), std::string::npos) << out;
  ASSERT_EQ(run_command(
                "(" + tool() + " scan --json " + (dir / "cut.pt").string() + " 2>/dev/null)", &out),
            2);
  const auto j = nlohmann::json::parse(out);
  EXPECT_GT(j["members"].size() + j["tensor_records"].get<std::size_t>(), 40u) << out;
  std::filesystem::remove_all(dir);
}

TEST(Cli, InspectTreeCountsEachSubtree) {
  std::string out;
  ASSERT_EQ(run_command(tool() + " inspect --tree " + fixture("checkpoint.pt").string(), &out), 0)
      << out;
  // 183 elements in all: 152 in the model (138 in its two blocks), 31 in the optimiser's state.
  EXPECT_NE(out.find("(all)"), std::string::npos) << out;
  const auto line_of = [&](const std::string& label) {
    const auto at = out.find(label);
    if (at == std::string::npos) return std::string();
    return out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_NE(line_of("model_state_dict").find(" 152 "), std::string::npos) << out;
  EXPECT_NE(line_of("blocks").find(" 138 "), std::string::npos) << out;
  EXPECT_NE(line_of("optimizer_state_dict").find(" 31 "), std::string::npos) << out;
  EXPECT_NE(out.find("F32 [3, 2, 3, 3]"), std::string::npos) << out;
  // Not a terminal: no colour escapes.
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;

  // A checkpoint without tensors: only the total.
  std::string none;
  ASSERT_EQ(
      run_command(tool() + " inspect --tree " + fixture("plain_protocol2.pkl").string(), &none), 0)
      << none;
  EXPECT_NE(none.find("(all)"), std::string::npos) << none;

  std::string shallow;
  ASSERT_EQ(run_command(tool() + " inspect --tree --depth 1 " + fixture("checkpoint.pt").string(),
                        &shallow),
            0);
  EXPECT_NE(shallow.find("optimizer_state_dict"), std::string::npos) << shallow;
  EXPECT_EQ(shallow.find("blocks"), std::string::npos) << shallow;
}

TEST(Cli, InspectJsonOfAllDtypesSpellsThemLikeSafetensors) {
  std::string out;
  ASSERT_EQ(run_command(tool() + " inspect --json " + fixture("dtypes.pt").string(), &out), 0);
  const auto j = nlohmann::json::parse(out);
  std::vector<std::string> dtypes;
  for (const auto& t : j["tensors"]) dtypes.push_back(t["dtype"]);
  EXPECT_EQ(dtypes, (std::vector<std::string>{"F16", "BF16", "F32", "F64", "U8", "I8", "I16", "I32",
                                              "I64", "BOOL", "C64", "C128"}));
}

TEST(Cli, LoadReportsSpeed) {
  std::string out;
  ASSERT_EQ(run_command(tool() + " load " + fixture("views.pt").string(), &out), 0) << out;
  EXPECT_NE(out.find("13 tensors"), std::string::npos) << out;
  EXPECT_NE(out.find("GB/s"), std::string::npos) << out;
  ASSERT_EQ(run_command(tool() + " load --mmap " + fixture("views.pt").string(), &out), 0) << out;
  EXPECT_NE(out.find("mapped"), std::string::npos) << out;
}

TEST(Cli, BadInputExitsOneWithOneLine) {
  std::string out;
  const std::string bad = fixture("bad/posix_system.pt").string();
  EXPECT_EQ(run_command(tool() + " inspect " + bad, &out), 1);
  // "torchport: PATH: what: why", PATH as typed (the record inside it after a colon).
  EXPECT_EQ(
      out.rfind("torchport: " + bad + ":bad/data.pkl: the pickle references 'posix.system'", 0), 0u)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(Cli, UsageErrorsExitTwo) {
  std::string out;
  EXPECT_EQ(run_command(tool() + " inspect /no/such/file.pt", &out), 2) << out;
  EXPECT_EQ(run_command(tool() + " inspect --frobnicate " + fixture("views.pt").string(), &out), 2)
      << out;
  EXPECT_EQ(run_command(tool(), &out), 2) << out;
  EXPECT_EQ(run_command(tool() + " --version", &out), 0);
  EXPECT_NE(out.find("torchport "), std::string::npos);
}

// One exit-status convention for every command (docs/guide/8-cli.md):
// 0 success, 1 the answer is no or the input was refused, 2 trouble
// (usage; missing, unreadable or non-checkpoint inputs; for scan and diff,
// inputs they cannot read). Every message starts with "torchport:".
TEST(CliRead, ExitStatusConvention) {
  const std::string ck = fixture("checkpoint.pt").string();
  const std::string text = fixture("checkpoint.expected.json").string();
  std::string out;
  // A missing path: a usage error, with our prefix (not CLI11's bare line).
  EXPECT_EQ(run_command(tool() + " inspect /nonexistent/nope.pt", &out), 2) << out;
  EXPECT_EQ(out.rfind("torchport: ", 0), 0u) << out;
  EXPECT_NE(out.find("nope.pt"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool() + " load /nonexistent/nope.pt", &out), 2) << out;
  EXPECT_EQ(run_command(tool() + " inspect --no-such-option " + ck, &out), 2) << out;
  EXPECT_EQ(out.rfind("torchport: ", 0), 0u) << out;
  // --shard out of range: a usage error, found before the file is read.
  EXPECT_EQ(run_command(tool() + " inspect --shard 5/4 --plan " + ck + " " + ck, &out), 2) << out;
  EXPECT_NE(out.find("0 <= RANK < WORLD"), std::string::npos) << out;
  // An input that is no checkpoint at all is trouble: 2.
  EXPECT_EQ(run_command(tool() + " inspect " + text, &out), 2) << out;
  EXPECT_EQ(out.rfind("torchport: ", 0), 0u) << out;
  // diff: equal 0; a second file that is no checkpoint is trouble, 2.
  EXPECT_EQ(run_command(tool() + " diff " + ck + " " + ck, &out), 0) << out;
  EXPECT_EQ(run_command(tool() + " diff " + ck + " " + text, &out), 2) << out;
  EXPECT_EQ(out.rfind("torchport: ", 0), 0u) << out;
  // --help and --version succeed.
  EXPECT_EQ(run_command(tool() + " diff --help", &out), 0) << out;
}

// A missing, unreadable or wrong input reads alike on every command:
// "torchport: PATH: what: why", PATH as the user typed it (here relative,
// in a folder), exit status 2. (inspect and load printed CLI11's "error:
// file: Path does not exist" with a --help hint, scan "[io] nosuch: ...",
// and a file in a folder was named without its folder.)
TEST(CliRead, EveryCommandNamesAWrongInputAlike) {
  namespace fs = std::filesystem;
  const fs::path dir = torchport::test::temp_dir("cli_wrong_inputs");
  fs::create_directories(dir / "in");
  { std::ofstream(dir / "in" / "notes.txt") << "not a checkpoint\n"; }
  ASSERT_EQ(::mkfifo((dir / "in" / "fifo.pt").c_str(), 0600), 0);
  const std::string good = fixture("views.pt").string();
  struct Input {
    std::string path, why;
  };
  const std::vector<Input> inputs = {
      {"in/nosuch.pt", "cannot open: No such file or directory"},
      {"in/fifo.pt", "not a regular file: a FIFO"},
      {"in/notes.txt", "not a checkpoint torchport reads"},
  };
  for (const auto& in : inputs) {
    std::vector<std::string> commands = {"inspect " + in.path,
                                         "load " + in.path,
                                         "convert " + in.path + " out.safetensors",
                                         "diff " + in.path + " " + good,
                                         "diff " + good + " " + in.path,
                                         "inspect --json " + in.path};
    if (in.path != "in/notes.txt")
      commands.push_back("scan " + in.path);  // a text file is no model file
    for (const auto& c : commands) {
      SCOPED_TRACE(c);
      std::string out;
      EXPECT_EQ(run_command("cd " + dir.string() + " && " + tool() + " " + c, &out), 2) << out;
      EXPECT_EQ(out.rfind("torchport: " + in.path + ": " + in.why, 0), 0u) << out;
      EXPECT_EQ(out.find("--help"), std::string::npos) << out;
    }
  }
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  fs::remove_all(dir);
}

// `-` reads standard input (into memory): inspect, scan, diff and convert
// see the same checkpoint as from its path; two `-` are a usage error.
TEST(CliRead, DashReadsStandardInput) {
  const std::string ck = fixture("checkpoint.pt").string();
  std::string out, from_path;
  ASSERT_EQ(run_command(tool() + " inspect " + ck, &from_path), 0) << from_path;
  ASSERT_EQ(run_command(tool() + " inspect - < " + ck, &out), 0) << out;
  EXPECT_EQ(out.rfind("<stdin>: pytorch-zip", 0), 0u) << out;
  // The listing after the first line is the same.
  EXPECT_EQ(out.substr(out.find('\n')), from_path.substr(from_path.find('\n')));
  // From a pipe (read into memory) as from a redirected file (mapped).
  std::string piped;
  ASSERT_EQ(run_command("cat " + ck + " | " + tool() + " inspect -", &piped), 0) << piped;
  EXPECT_EQ(piped, out);
  EXPECT_EQ(run_command(tool() + " scan - < " + ck, &out), 0) << out;
  EXPECT_NE(out.find("<stdin>: pytorch-zip"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool() + " diff - " + ck + " < " + ck, &out), 0) << out;
  EXPECT_EQ(run_command(tool() + " diff - - < " + ck, &out), 2) << out;
  EXPECT_NE(out.find("only one input can be '-'"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool() + " scan - - < " + ck, &out), 2) << out;
  // Not a checkpoint on standard input: trouble, named as <stdin>.
  EXPECT_EQ(run_command(tool() + " inspect - < /dev/null", &out), 2) << out;
  EXPECT_NE(out.find("<stdin>"), std::string::npos) << out;
}

// --verify recomputes every zip entry's CRC-32: two damaged storages are
// named with their tensors, and the file is refused (exit 1); without it the damage goes
// unseen, as in torch (whose reader checks no CRC of a stored entry).
TEST(CliRead, VerifyNamesEveryDamagedEntry) {
  const auto dir = torchport::test::temp_dir("cli_verify");
  const auto copy = dir / "damaged.pt";
  std::filesystem::copy_file(fixture("checkpoint.pt"), copy);
  std::vector<std::string> damaged;
  {
    const torchport::Source src = torchport::Source::map_file(copy);
    const auto zip = torchport::ZipArchive::open(src, torchport::Limits{});
    std::vector<std::uint64_t> offsets;
    for (const auto& e : zip.entries())
      if (e.name.find("/data/") != std::string::npos && e.size > 0 && damaged.size() < 2) {
        damaged.push_back(e.name);
        offsets.push_back(e.data_offset);
      }
    ASSERT_EQ(damaged.size(), 2u);
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    for (const auto at : offsets) {
      f.seekg(static_cast<std::streamoff>(at));
      const char c = static_cast<char>(f.get());
      f.seekp(static_cast<std::streamoff>(at));
      f.put(static_cast<char>(c ^ 0x40));
    }
  }
  std::string out;
  EXPECT_EQ(run_command(tool() + " inspect -q " + copy.string(), &out), 0) << out;
  EXPECT_EQ(run_command(tool() + " inspect --verify " + copy.string(), &out), 1) << out;
  EXPECT_NE(out.find("CRC-32 mismatch in 2 of"), std::string::npos) << out;
  // Each entry with the tensor over it: "'.../data/0' (model_state_dict....)".
  for (const auto& name : damaged)
    EXPECT_NE(out.find("'" + name + "' (model_state_dict."), std::string::npos) << name << out;
  EXPECT_EQ(run_command(tool() + " load --verify " + copy.string(), &out), 1) << out;
  EXPECT_EQ(run_command(tool() + " load --verify " + fixture("checkpoint.pt").string(), &out), 0)
      << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
