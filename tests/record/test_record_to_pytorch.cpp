// A record of a module holds torchport's layout (Linear weights [in, out],
// norms' gamma and beta, attention's projections and the LSTM's gates
// split); `torchport convert model.tpb model.pt` wrote that layout as it
// was (bn.gamma, fc.weight [in, out]) and torch's load_state_dict refused
// the file. The record now keeps where each module's PyTorch layout
// differs, and convert writes PyTorch's: torch's own module takes the .pt
// and the .safetensors with load_state_dict(strict=True), bit for bit
// (pytorch_layout_check.py, under each torch).

#include <filesystem>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/files.hpp"
#include "torchport/record/load.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using test::run_command;

namespace {

// pytorch_layout_check.py's Net, default-constructed: shapes from the file.
struct Net {
  nn::Linear fc, head;
  nn::BatchNorm2d bn;
  nn::LayerNorm ln;
  nn::GroupNorm gn;
  nn::PReLU prelu;
  nn::Conv2d conv;
  nn::Embedding emb;
  nn::MultiheadAttention attn, cross;
  nn::LSTM lstm;
  nn::GRU gru;
  TORCHPORT_FIELDS(fc, head, bn, ln, gn, prelu, conv, emb, attn, cross, lstm, gru)
};

TEST(RecordToPyTorch, TorchsModuleLoadsWhatConvertWritesFromARecord) {
  const fs::path dir = test::temp_dir("record_to_pytorch");
  const std::string script = "cd '" + std::string(TORCHPORT_RECORD_TESTS_DIR) + "' && " +
                             test::python() + " -W ignore pytorch_layout_check.py ";
  std::string out;
  ASSERT_EQ(run_command(script + "make '" + dir.string() + "'", &out), 0) << out;
  Net net;
  const LoadReport r = load(net, dir / "ref.pt", LoadArgs{}.precision(Precision::Keep));
  ASSERT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(net.fc.weight.shape(), (Shape{4, 3}));  // ours: [in, out]

  const std::string tool = TORCHPORT_TOOL;
  std::string files;
  for (const char* ext : {"tpb", "mpk", "json.gz"}) {
    const fs::path rec = dir / (std::string("net.") + ext);
    save_record(net, rec, Recorder(*recorder_for_path(rec)), Precision::Keep);
    // The record itself is ours: bn.gamma, fc.weight [4, 3]; diff compares
    // it in PyTorch's layout, so it equals the checkpoint it came from.
    const TensorCatalog mine = open(rec);
    ASSERT_NE(mine.find("bn.gamma"), nullptr);
    EXPECT_EQ(mine.find("fc.weight")->shape(), (Shape{4, 3}));
    EXPECT_EQ(run_command(tool + " diff " + (dir / "ref.pt").string() + " " + rec.string(), &out),
              0)
        << out;
    for (const char* to : {"pt", "safetensors"}) {
      const fs::path dst = dir / (std::string("from-") + ext + "." + to);
      ASSERT_EQ(run_command(tool + " convert " + rec.string() + " " + dst.string(), &out), 0)
          << out;
      files += " '" + dst.string() + "'";
      // torchport itself sees PyTorch's layout there, and diff agrees with the original.
      const TensorCatalog theirs = open(dst);
      EXPECT_NE(theirs.find("bn.weight"), nullptr) << dst;
      EXPECT_EQ(theirs.find("fc.weight")->shape(), (Shape{3, 4})) << dst;
      EXPECT_NE(theirs.find("attn.in_proj_weight"), nullptr) << dst;
      EXPECT_NE(theirs.find("lstm.weight_ih_l1"), nullptr) << dst;
      EXPECT_EQ(run_command(tool + " diff " + (dir / "ref.pt").string() + " " + dst.string(), &out),
                0)
          << dst << ": " << out;
    }
  }
  // A record of a record keeps the layouts: convert still writes PyTorch's.
  ASSERT_EQ(run_command(tool + " convert " + (dir / "net.tpb").string() + " " +
                            (dir / "again.mpk").string(),
                        &out),
            0)
      << out;
  ASSERT_EQ(run_command(tool + " convert " + (dir / "again.mpk").string() + " " +
                            (dir / "again.pt").string(),
                        &out),
            0)
      << out;
  files += " '" + (dir / "again.pt").string() + "'";
  const int rc = run_command(script + "check '" + dir.string() + "'" + files, &out);
  EXPECT_EQ(rc, 0) << out;
  std::cout << out;

  // Renamed since it was saved, the record's layouts no longer find their
  // modules: refused, never written half in our layout.
  ASSERT_EQ(run_command(tool + " convert --remap '^fc\\.' 'dense.' " + (dir / "net.tpb").string() +
                            " " + (dir / "renamed.tpb").string(),
                        &out),
            0)
      << out;
  EXPECT_EQ(run_command(tool + " convert " + (dir / "renamed.tpb").string() + " " +
                            (dir / "renamed.pt").string(),
                        &out),
            1)
      << out;
  EXPECT_NE(out.find("renamed or filtered since it was saved"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "renamed.pt"));
  fs::remove_all(dir);
}

// A record of a module written without its layouts (by an earlier
// torchport) is refused for .pt, saying what to do; a record of no module
// type (a catalogue's tensors) is written as it is.
TEST(RecordToPyTorch, ARecordWithoutItsLayoutsIsRefused) {
  const fs::path dir = test::temp_dir("record_without_layouts");
  nn::Linear fc(2, 3);
  Value tree = to_value(fc);
  write_record(tree, dir / "old.mpk", NamedMpk{}, {"0.1.0", "full", "torchport::nn::Linear", {}});
  EXPECT_THROW((void)to_pytorch_layout(open(dir / "old.mpk")), Error);
  std::string out;
  EXPECT_EQ(run_command(std::string(TORCHPORT_TOOL) + " convert " + (dir / "old.mpk").string() +
                            " " + (dir / "old.pt").string(),
                        &out),
            1)
      << out;
  EXPECT_NE(out.find("to_pytorch_state_dict"), std::string::npos) << out;
  write_record(tree, dir / "plain.mpk", NamedMpk{}, {});
  EXPECT_EQ(to_pytorch_layout(open(dir / "plain.mpk")).find("weight")->shape(), (Shape{2, 3}));
  fs::remove_all(dir);
}

}  // namespace
