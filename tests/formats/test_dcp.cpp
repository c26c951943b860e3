// torch.distributed.checkpoint folders saved by torch 2.6
// (tests/fixtures/dcp/make_dcp_fixtures.py) and torch 2.14
// (make_dcp214_fixtures.py, under v214/): by one process, by 2 and 4 ranks
// with DTensor shards (uneven, empty, 2-D meshes, replicas), with an
// optimizer's state, through zstd stream transforms, and in the Hugging
// Face storage (per-rank safetensors shards, and their consolidation). Each
// must list what torch's own readers give (dcp_to_torch_save,
// HuggingFaceStorageReader), bit for bit; the bad folders are refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/formats/slice.hpp"

namespace fs = std::filesystem;
using namespace torchport;

namespace {

const Value* at_path(const Value& root, const std::string& dotted) {
  // Keys may hold dots themselves ("conf.a.b" is conf -> "a.b"): try the
  // longest key first.
  if (dotted.empty()) return &root;
  for (std::size_t end = dotted.size();; end = dotted.rfind('.', end - 1)) {
    const std::string head = dotted.substr(0, end);
    const Value* child = nullptr;
    if (root.is(Value::Kind::Dict)) {
      child = root.find(head);
    } else if (root.is(Value::Kind::List) || root.is(Value::Kind::Tuple)) {
      char* stop = nullptr;
      const unsigned long i = std::strtoul(head.c_str(), &stop, 10);
      if (*stop == '\0' && i < root.size()) child = &root.items()[i];
    }
    if (child != nullptr) {
      if (end == dotted.size()) return child;
      if (const Value* v = at_path(*child, dotted.substr(end + 1))) return v;
    }
    if (end == 0 || end == std::string::npos) return nullptr;
  }
}

class Dcp : public ::testing::TestWithParam<std::string> {};

TEST_P(Dcp, ListsWhatTorchReassembles) {
  const fs::path dir = test::fixture("dcp/" + GetParam());
  const auto want = test::read_json(dir / "expected.json");
  const TensorCatalog cat = open(dir);
  EXPECT_EQ(cat.format_name(), want["format"].get<std::string>());
  for (const auto& w : want["tensors"]) {
    const std::string name = w["name"];
    SCOPED_TRACE(name);
    const Tensor* t = cat.find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(dtype_name(t->dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t->shape(), w["shape"].get<Shape>());
    EXPECT_EQ(test::tensor_sha256(*t), w["sha256"].get<std::string>());
  }
  for (const auto& [key, value] : want["values"].items()) {
    SCOPED_TRACE(key);
    const Value* v = at_path(cat.root(), key);
    ASSERT_NE(v, nullptr);
    if (value.is_null()) {
      EXPECT_TRUE(v->is_none());
    } else if (value.is_boolean()) {
      EXPECT_EQ(v->as_bool(), value.get<bool>());
    } else if (value.is_number_integer()) {
      EXPECT_EQ(v->as_int(), value.get<std::int64_t>());
    } else if (value.is_number_float()) {
      EXPECT_DOUBLE_EQ(v->as_float(), value.get<double>());
    } else if (value.is_string()) {
      EXPECT_EQ(v->as_str(), value.get<std::string>());
    } else if (value.is_array()) {
      EXPECT_EQ(v->size(), value.size());
    }
  }
  // Every tensor is read from its chunks once materialized, the same.
  const TensorCatalog owned = materialize(cat, Residence::owned);
  for (const auto& w : want["tensors"])
    EXPECT_EQ(test::tensor_sha256(*owned.find(w["name"].get<std::string>())),
              w["sha256"].get<std::string>());
  // Judged by the allow-list: the dataclasses and every blob's pickle.
  const ScanReport r = scan(dir);
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << scan_verdict_name(r.verdict);
}

INSTANTIATE_TEST_SUITE_P(Saved, Dcp, ::testing::Values("single", "tp2", "tp4", "optim"));
INSTANTIATE_TEST_SUITE_P(Saved214, Dcp,
                         ::testing::Values("v214/single", "v214/tp2", "v214/tp4", "v214/optim",
                                           "v214/zstd", "v214/zstd_tp2", "v214/zstd_two_frames",
                                           "v214/hf_rank0", "v214/hf_sharded",
                                           "v214/hf_consolidated", "v214/hf_consolidated/sharded"),
                         [](const auto& p) {
                           std::string n = p.param.substr(5);
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

// The Hugging Face storage's two layouts of one save: the per-rank shards
// (read as HuggingFaceStorageReader reads them) and torch's consolidation
// of them hold the same tensors, bit for bit.
TEST(DcpSafetensors, ShardsEqualTorchsConsolidation) {
  const TensorCatalog shards = open(test::fixture("dcp/v214/hf_consolidated/sharded"));
  const TensorCatalog whole = open(test::fixture("dcp/v214/hf_consolidated"));
  EXPECT_EQ(shards.format_name(), "dcp-safetensors");
  EXPECT_EQ(whole.format_name(), "sharded-safetensors");
  ASSERT_EQ(shards.size(), whole.size());
  for (const auto& [name, t] : shards.tensors()) {
    SCOPED_TRACE(name);
    const Tensor* w = whole.find(name);
    ASSERT_NE(w, nullptr);
    EXPECT_TRUE(t.equal(*w));
  }
}

// Each shard file is judged by itself too (a folder scan): safetensors,
// data only.
TEST(DcpSafetensors, ShardsAreScannedAsData) {
  const auto reports = scan_directory(test::fixture("dcp/v214/hf_sharded"));
  ASSERT_EQ(reports.size(), 5u);  // 4 shards and expected.json
  for (const ScanReport& r : reports)
    if (r.path.ends_with(".safetensors")) {
      EXPECT_EQ(r.verdict, ScanVerdict::clean) << r.path;
      EXPECT_EQ(r.format, "safetensors") << r.path;
    }
}

// A tensor-parallel rank's slice of a tensor sharded over the Hugging
// Face shards reads only the files it overlaps.
TEST(DcpSafetensors, SlicesReadTheShardsTheyOverlap) {
  const TensorCatalog cat = open(test::fixture("dcp/v214/hf_sharded"));
  const TensorCatalog whole = materialize(cat, Residence::owned);
  for (const auto& [start, length] : {std::pair{0, 4}, std::pair{4, 3}}) {
    SliceOptions o;
    o.counter = std::make_shared<ReadCounter>();
    o.lazy = false;
    const Tensor s = read_slice(cat, "model.emb.weight", 0, start, length, o);
    EXPECT_TRUE(s.equal(whole.find("model.emb.weight")->narrow(0, start, length).contiguous()));
    EXPECT_EQ(o.counter->reads(), 2u) << start;
  }
}

// A zstd-transformed item is judged by what it decodes to: a value whose
// zstd frame holds a pickle calling os.system is unsafe to the scan (and
// refused by open, below), not merely undecodable.
TEST(DcpSafetensors, AScanJudgesWhatAZstdItemHolds) {
  const ScanReport r = scan(test::fixture("dcp/v214/bad/zstd_unsafe"));
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe) << r.reason();
  EXPECT_NE(r.reason().find("os.system"), std::string::npos) << r.reason();
  EXPECT_EQ(scan(test::fixture("dcp/v214/zstd")).verdict, ScanVerdict::clean);
}

// A shard that links out of the folder is neither read to tell the folder's
// format nor read as a shard.
TEST(DcpSafetensors, AShardLinkingOutOfTheFolderIsNotRead) {
  const fs::path dir = test::temp_dir("dcp_link");
  const fs::path shards = test::fixture("dcp/v214/hf_sharded");
  fs::create_directories(dir / "only_link");
  fs::create_symlink(shards / "shard-00001-model-00001-of-00001.safetensors",
                     dir / "only_link" / "shard-00001-model-00001-of-00001.safetensors");
  try {
    (void)open(dir / "only_link");
    FAIL() << "a folder of one outside link was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_a_checkpoint) << e.what();  // no index, no shard of its own
  }
  fs::create_directories(dir / "mixed");
  for (int r = 1; r <= 4; ++r) {
    const std::string name = "shard-0000" + std::to_string(r) + "-model-00001-of-00001.safetensors";
    if (r == 3)
      fs::create_symlink(shards / name, dir / "mixed" / name);
    else
      fs::copy_file(shards / name, dir / "mixed" / name);
  }
  try {
    (void)open(dir / "mixed");
    FAIL() << "a shard linking out of the folder was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// A Hugging Face storage shard placed by an index: at offset zero it is the
// tensor (the writer's rank-0 layout, read above); a piece of a larger
// tensor is one thing to torch's HuggingFaceStorageReader and another to
// transformers.
TEST(DcpSafetensors, AnIndexOverAPieceOfAGlobalTensorIsAmbiguous) {
  const fs::path dir = test::temp_dir("dcp_index_piece");
  fs::create_directories(dir);
  const std::string shard = "shard-00002-model-00001-of-00001.safetensors";
  fs::copy_file(test::fixture("dcp/v214/hf_sharded") / shard, dir / shard);
  const TensorCatalog piece = open(dir / shard);  // the file alone: its own tensors
  std::string index = R"({"weight_map": {)";
  for (const auto& [name, t] : piece.tensors())
    index += (index.back() == '{' ? "\"" : ", \"") + name + "\": \"" + shard + "\"";
  std::ofstream(dir / "model.safetensors.index.json") << index << "}}";
  try {
    (void)open(dir);
    FAIL() << "an index over pieces of global tensors was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ambiguous) << e.what();
    EXPECT_NE(std::string(e.what()).find("DCP_SHARDING_INFO"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// A folder holding both a .metadata and an *.index.json is two
// checkpoints to two readers.
TEST(DcpSafetensors, AFolderWithAMetadataAndAnIndexIsAmbiguous) {
  const fs::path dir = test::temp_dir("dcp_both");
  fs::create_directories(dir);
  fs::copy(test::fixture("dcp/v214/single"), dir, fs::copy_options::recursive);
  fs::copy(test::fixture("dcp/v214/hf_rank0"), dir,
           fs::copy_options::recursive | fs::copy_options::skip_existing);
  try {
    (void)open(dir);
    FAIL() << "a folder of both layouts was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ambiguous) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.safetensors.index.json"), std::string::npos)
        << e.what();
  }
  // Each is still read when named.
  EXPECT_EQ(open(dir / ".metadata").format_name(), "dcp");
  EXPECT_EQ(open(dir / "model.safetensors.index.json").format_name(), "sharded-safetensors");
  fs::remove_all(dir);
}

// A tensor-parallel rank's slice reads the chunks it overlaps and no
// other, whatever world size saved the checkpoint: each slice of the
// 4-rank save, along every dimension, at world sizes 1 to 4, equals the
// same rows of the whole tensor.
TEST(DcpSlices, ARankReadsOnlyTheChunksItsSliceOverlaps) {
  const TensorCatalog cat = open(test::fixture("dcp/tp4"));
  const TensorCatalog whole = materialize(cat, Residence::owned);
  int checked = 0;
  for (const auto& [name, t] : cat.tensors()) {
    if (t.dim() == 0) continue;
    for (std::int64_t dim = 0; dim < t.dim(); ++dim)
      for (std::int64_t world = 1; world <= 4; ++world) {
        const std::int64_t n = t.shape()[static_cast<std::size_t>(dim)];
        const std::int64_t share = (n + world - 1) / world;
        for (std::int64_t rank = 0; rank < world; ++rank) {
          SCOPED_TRACE(name + " dim " + std::to_string(dim) + " rank " + std::to_string(rank) +
                       "/" + std::to_string(world));
          const std::int64_t start = std::min(n, rank * share);
          const std::int64_t length = std::min(n, start + share) - start;
          SliceOptions o;
          o.counter = std::make_shared<ReadCounter>();
          o.lazy = rank % 2 == 0;  // both ways
          const Tensor s = read_slice(cat, name, dim, start, length, o);
          EXPECT_TRUE(s.equal(whole.find(name)->narrow(dim, start, length).contiguous()));
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 100);
  // Rows 0..3 and 4..6 of a [7, 4] weight saved in 4 row chunks (2, 2, 2,
  // 1 rows): two chunks each, never the other two.
  for (const auto& [start, length] : {std::pair{0, 4}, std::pair{4, 3}}) {
    SliceOptions o;
    o.counter = std::make_shared<ReadCounter>();
    o.lazy = false;
    (void)read_slice(cat, "model.emb.weight", 0, start, length, o);
    EXPECT_EQ(o.counter->reads(), 2u) << start;
  }
}

// A .metadata of one [n, n] F32 tensor cut into a grid x grid of chunks,
// each in an empty data file (the chunks are checked before any is read).
void write_grid(const fs::path& dir, int n, int grid, int path_keys = 0) {
  fs::create_directories(dir);
  std::ofstream(dir / "x.distcp").close();
  std::string p = "\x80\x02";
  const auto str = [&](const std::string& x) {
    p += 'X';
    for (int b = 0; b < 4; ++b) p += static_cast<char>((x.size() >> (8 * b)) & 0xFF);
    p += x;
  };
  const auto num = [&](int v) {
    p += 'J';
    for (int b = 0; b < 4; ++b)
      p += static_cast<char>((static_cast<unsigned>(v) >> (8 * b)) & 0xFF);
  };
  const auto obj = [&](const std::string& module, const std::string& cls) {
    p += "c" + module + "\n" + cls + "\n)R";
  };
  const std::string m = "torch.distributed.checkpoint.metadata";
  const auto pair = [&](int a, int b) {
    num(a);
    num(b);
    p += '\x86';
  };
  const int step = n / grid;
  obj(m, "Metadata");
  p += "}(";
  str("state_dict_metadata");
  p += "}(";
  str("w");
  obj(m, "TensorStorageMetadata");
  p += "}(";
  str("properties");
  obj(m, "TensorProperties");
  p += "(ctorch\nfloat32\nN\x89N\x89tb";
  str("size");
  pair(n, n);
  str("chunks");
  p += "](";
  for (int i = 0; i < grid; ++i)
    for (int j = 0; j < grid; ++j) {
      obj(m, "ChunkStorageMetadata");
      p += "}(";
      str("offsets");
      pair(i * step, j * step);
      str("sizes");
      pair(step, step);
      p += "ub";
    }
  p += "eub";  // chunks, then the tensor's BUILD
  p += "u";    // state_dict_metadata
  str("storage_data");
  p += "}(";
  for (int i = 0; i < grid; ++i)
    for (int j = 0; j < grid; ++j) {
      obj(m, "MetadataIndex");
      p += "}(";
      str("fqn");
      str("w");
      str("offset");
      pair(i * step, j * step);
      p += "ub";
      obj("torch.distributed.checkpoint.filesystem", "_StorageInfo");
      p += "}(";
      str("relative_path");
      str("x.distcp");
      str("offset");
      num(0);
      str("length");
      num(0);
      p += "ub";
    }
  p += "u";             // storage_data
  if (path_keys > 0) {  // planner_data: w's key path, path_keys keys long
    str("planner_data");
    p += "}(";
    str("w");
    p += "(";
    for (int k = 0; k < path_keys; ++k) str("k");
    p += "tu";
  }
  p += "ub.";  // Metadata's dict, its BUILD
  std::ofstream(dir / ".metadata", std::ios::binary) << p;
}

// The chunk check costs a sweep, not every pair: a 64 x 64 grid (4,096
// chunks, a 2-D mesh's sharding) opens; a 200 x 200 one, whose check would
// pass the budget of comparisons, is refused as a limit, not checked for
// minutes.
TEST(DcpSlices, ChunkGeometryIsCheckedInBoundedWork) {
  const fs::path dir = test::temp_dir("dcp_grid");
  write_grid(dir / "g64", 128, 64);
  EXPECT_EQ(open(dir / "g64").size(), 1u);
  write_grid(dir / "g200", 400, 200);
  try {
    (void)open(dir / "g200");
    FAIL() << "a 200 x 200 grid was checked";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::limit_exceeded) << e.what();
    EXPECT_NE(std::string(e.what()).find("comparisons"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// planner_data's key paths rebuild the nesting: a path of 100,000 keys
// would nest that deep (and recurse as deep to build and free it).
TEST(DcpSlices, KeyPathsAreBoundedByMaxDepth) {
  const fs::path dir = test::temp_dir("dcp_path");
  write_grid(dir / "ok", 4, 2, 3);
  const TensorCatalog cat = open(dir / "ok");
  ASSERT_EQ(cat.size(), 1u);
  EXPECT_EQ(cat.tensors()[0].name, "k.k.k");
  write_grid(dir / "deep", 4, 2, 100000);
  try {
    (void)open(dir / "deep");
    FAIL() << "a key path of 100,000 keys was built";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::limit_exceeded) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_depth"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

struct BadCase {
  std::string dir, code, message;
};

class DcpBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(DcpBad, IsRefusedWithItsError) {
  const BadCase& c = GetParam();
  try {
    const TensorCatalog cat = open(test::fixture("dcp/bad/" + c.dir));
    materialize(cat, Residence::owned);  // chunks are read when used
    FAIL() << c.dir << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), c.code) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists("/tmp/torchport-dcp-pwned"));
}

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> out;
  for (const auto& c : test::read_json(test::fixture("dcp/bad/expected.json")))
    out.push_back({c["dir"], c["code"], c["message"]});
  for (const auto& c : test::read_json(test::fixture("dcp/v214/bad/expected.json")))
    out.push_back({"../v214/bad/" + c["dir"].get<std::string>(), c["code"], c["message"]});
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, DcpBad, ::testing::ValuesIn(bad_cases()), [](const auto& p) {
  const std::string& d = p.param.dir;
  return d.starts_with("../v214/bad/") ? "v214_" + d.substr(12) : d;
});

}  // namespace
