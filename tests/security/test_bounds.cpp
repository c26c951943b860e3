// Bounds of issue 15 that are not about cost: files that are not regular
// (a FIFO hangs open(2) without O_NONBLOCK), shards that lead outside the
// checkpoint, errors that must not quote a file's bytes, overflowing shapes,
// exceptions turned into Error at the API boundary, JSON records through the
// strict parser, and the seeded hash.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <new>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"
#include "torchport/detail/hash.hpp"

namespace fs = std::filesystem;

namespace torchport::test {
namespace {

class Bounds : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir(std::string("bounds-") +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  // A sharded checkpoint in `dir` whose index names one shard, `shard`.
  void index(const fs::path& dir, const std::string& shard) {
    write(dir / "model.safetensors.index.json",
          R"({"metadata": {}, "weight_map": {"w": ")" + shard + R"("}})");
  }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(error_code_name(e.code())) + ": " + e.what();
  }
  return "ok";
}

TEST_F(Bounds, FifoIsRefusedAtOnce) {
  const fs::path fifo = dir_ / "pipe.pt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Without O_NONBLOCK, open(2) would wait for a writer forever.
  const std::string e = error_of([&] { (void)open(fifo); });
  EXPECT_EQ(e.rfind("io: ", 0), 0u) << e;
  EXPECT_NE(e.find("FIFO"), std::string::npos) << e;
  const std::string s = error_of([&] { (void)scan(fifo); });
  EXPECT_NE(s, "ok");
}

TEST_F(Bounds, FifoShardIsRefusedAtOnce) {
  ASSERT_EQ(::mkfifo((dir_ / "model-00001-of-00001.safetensors").c_str(), 0600), 0);
  index(dir_, "model-00001-of-00001.safetensors");
  const std::string e = error_of([&] { (void)open(dir_); });
  EXPECT_NE(e.find("FIFO"), std::string::npos) << e;
}

TEST_F(Bounds, DeviceIsRefused) {
  const std::string e = error_of([&] { (void)open(fs::path("/dev/null")); });
  EXPECT_NE(e.find("character device"), std::string::npos) << e;
}

TEST_F(Bounds, ShardLinkOutsideTheDirectoryIsNotRead) {
  const fs::path inside = dir_ / "ckpt";
  fs::create_directories(inside);
  const fs::path secret = dir_ / "secret.txt";
  write(secret, "root:x:0:0:root:/root:/bin/bash\n");
  fs::create_symlink(secret, inside / "model-00001-of-00001.safetensors");
  index(inside, "model-00001-of-00001.safetensors");
  const std::string e = error_of([&] { (void)open(inside); });
  EXPECT_EQ(e.rfind("invalid_argument: ", 0), 0u) << e;
  EXPECT_NE(e.find("outside the checkpoint's directory"), std::string::npos) << e;
  EXPECT_EQ(e.find("72 6f"), std::string::npos) << e;
  EXPECT_EQ(e.find("root:"), std::string::npos) << e;
}

TEST_F(Bounds, ShardLinkInsideTheDirectoryIsRead) {
  const fs::path inside = dir_ / "ckpt";
  fs::create_directories(inside / "blobs");
  save(TensorCatalog::from_tensors(Format::state_dict, {{"w", Tensor::from<float>({1, 2}, {2})}}),
       inside / "blobs" / "abc", SaveFormat::safetensors);
  fs::create_symlink("blobs/abc", inside / "model-00001-of-00001.safetensors");
  index(inside, "model-00001-of-00001.safetensors");
  EXPECT_EQ(open(inside).size(), 1u);
}

TEST_F(Bounds, HubCacheSnapshotMayLinkToItsBlobs) {
  // models--org--name/snapshots/<rev>/x -> ../../blobs/<hash>, as huggingface_hub lays its cache
  // out.
  const fs::path repo = dir_ / "models--org--name";
  const fs::path snap = repo / "snapshots" / "0123abcd";
  fs::create_directories(snap);
  fs::create_directories(repo / "blobs");
  save(TensorCatalog::from_tensors(Format::state_dict, {{"w", Tensor::from<float>({1, 2}, {2})}}),
       repo / "blobs" / "f00d", SaveFormat::safetensors);
  fs::create_symlink("../../blobs/f00d", snap / "model-00001-of-00001.safetensors");
  index(snap, "model-00001-of-00001.safetensors");
  EXPECT_EQ(open(snap).size(), 1u);
}

TEST_F(Bounds, NotACheckpointQuotesNoBytes) {
  write(dir_ / "passwd", "root:x:0:0:root:/root:/bin/bash\n");
  const std::string e = error_of([&] { (void)open(dir_ / "passwd"); });
  EXPECT_EQ(e.rfind("not_a_checkpoint: ", 0), 0u) << e;
  EXPECT_EQ(e.find("72 6f"), std::string::npos) << e;
  EXPECT_EQ(e.find("first bytes"), std::string::npos) << e;
}

std::string safetensors_file(const std::string& header) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header;
}

TEST_F(Bounds, EmptyShapeWhoseStridesOverflowIsRefused) {
  // 0 bytes of data, but the strides of [0, 2^40, 2^40] do not fit int64.
  write(
      dir_ / "x.safetensors",
      safetensors_file(
          R"({"w": {"dtype": "F32", "shape": [0, 1099511627776, 1099511627776], "data_offsets": [0, 0]}})"));
  const std::string e = error_of([&] { (void)open(dir_ / "x.safetensors"); });
  EXPECT_EQ(e.rfind("corrupt: ", 0), 0u) << e;
  EXPECT_NE(e.find("64 bits"), std::string::npos) << e;
}

TEST(Shape, StridesAreChecked) {
  const Shape big = {0, 1ll << 40, 1ll << 40};
  EXPECT_THROW((void)contiguous_strides(big), Error);
  EXPECT_THROW((void)shape_numel(big), Error);
  EXPECT_THROW((void)Tensor::empty(DType::F32, big), Error);
  EXPECT_THROW((void)contiguous_strides(Shape{1ll << 62, 4}), Error);
  EXPECT_EQ(contiguous_strides(Shape{2, 0, 3}), (Shape{3, 3, 1}));
  EXPECT_EQ(shape_numel(Shape{2, 0, 3}), 0);
}

TEST(Boundary, StdExceptionsBecomeErrors) {
  const auto convert = [](const std::function<void()>& f) -> Error {
    try {
      try {
        f();
      } catch (...) {
        rethrow_as_error("testing", "file.pt");
      }
    } catch (const Error& e) {
      return e;
    }
    return Error(ErrorCode::io, "nothing thrown");
  };
  const Error oom = convert([] { throw std::bad_alloc(); });
  EXPECT_EQ(oom.code(), ErrorCode::limit_exceeded);
  EXPECT_NE(std::string(oom.what()).find("out of memory while testing"), std::string::npos)
      << oom.what();
  EXPECT_EQ(oom.where(), "file.pt");
  const Error other = convert([] { throw std::length_error("vector::reserve"); });
  EXPECT_EQ(other.code(), ErrorCode::internal);
  EXPECT_NE(std::string(other.what()).find("vector::reserve"), std::string::npos);
  const Error same = convert([] { throw Error(ErrorCode::corrupt, "x"); });
  EXPECT_EQ(same.code(), ErrorCode::corrupt);
  EXPECT_EQ(error_code_name(ErrorCode::internal), "internal");
}

TEST(JsonRecord, DuplicateKeysAreRefusedAndOrderKept) {
  Value tree = Value::dict();
  tree.insert(Value::str("zeta"), Value::integer(1));
  tree.insert(Value::str("alpha"), Value::integer(2));
  const auto bytes = record_to_bytes(tree, PrettyJson{}, {});
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const ParsedRecord r = read_record(Source::from_buffer(bytes, "r.json"));
  const Value* z = r.tree.find("zeta");
  ASSERT_NE(z, nullptr);
  // The order of the file, not sorted.
  std::vector<std::string> keys;
  for (const auto& [k, v] : r.tree.pairs()) keys.push_back(k.as_str());
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha"}));

  const auto at = text.find("\"alpha\"");
  ASSERT_NE(at, std::string::npos);
  std::string dup = text;
  dup.replace(at, 7, "\"zeta\"");
  std::vector<std::byte> dup_bytes(reinterpret_cast<const std::byte*>(dup.data()),
                                   reinterpret_cast<const std::byte*>(dup.data()) + dup.size());
  const std::string e =
      error_of([&] { (void)read_record(Source::from_buffer(dup_bytes, "dup.json")); });
  EXPECT_EQ(e.rfind("corrupt: ", 0), 0u) << e;
  EXPECT_NE(e.find("twice"), std::string::npos) << e;

  Limits l;
  l.max_nodes = 3;
  const std::string lim =
      error_of([&] { (void)read_record(Source::from_buffer(bytes, "r.json"), l); });
  EXPECT_EQ(lim.rfind("limit_exceeded: ", 0), 0u) << lim;
}

// {"v": [s] * n, "w": [s] * n} with one 64 KiB string s behind the memo: a
// 200 KB pickle whose values, expanded, hold 512 MiB of text. Before issue
// 15, `inspect` and `inspect --json` printed all of it (and ran out of memory
// on larger ones).
TEST_F(Bounds, InspectOfSharedValuesPrintsLittle) {
  using namespace std::string_literals;
  std::string p = "\x80\x02}q\x00(X\x01\x00\x00\x00v]q\x01(X\x00\x00\x01\x00"s +
                  std::string(65536, 'x') + "q\x02";
  for (int i = 1; i < 4096; ++i) p += "h\x02";
  p += "eX\x01\x00\x00\x00w]q\x03("s;
  for (int i = 0; i < 4096; ++i) p += "h\x02";
  p += "eu.";
  write(dir_ / "shared.pkl", p);
  std::string out;
  ASSERT_EQ(run_command(std::string(TORCHPORT_TOOL) + " inspect --json " +
                            (dir_ / "shared.pkl").string() + " 2>/dev/null",
                        &out),
            0)
      << out.substr(0, 2000);
  EXPECT_LT(out.size(), 1000000u);  // expanded: 512 MiB
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["values"]["v"].size(), 4096u);
  EXPECT_TRUE(j["values"]["w"][0].contains("shared")) << j["values"]["w"][0];
  std::string text;
  ASSERT_EQ(run_command(std::string(TORCHPORT_TOOL) + " inspect " + (dir_ / "shared.pkl").string(),
                        &text),
            0);
  EXPECT_LT(text.size(), 100000u);
  EXPECT_EQ(text.find("std::"), std::string::npos);
}

// 32 views of one 64 KiB storage: a .pt keeps one storage, safetensors
// would write 2 MiB; past the allowance, convert refuses and names the flag.
TEST_F(Bounds, ConvertOfViewsNamesTheLimit) {
  const Tensor base = Tensor::zeros(DType::F32, {16384});
  std::vector<NamedTensor> ts;
  for (int i = 0; i < 32; ++i) ts.push_back({"t" + std::to_string(i), base});
  save(TensorCatalog::from_tensors(Format::state_dict, ts), dir_ / "views.pt", SaveFormat::pytorch);
  EXPECT_LT(fs::file_size(dir_ / "views.pt"), 100000u);
  const std::string tool = TORCHPORT_TOOL;
  std::string out;
  EXPECT_NE(
      run_command(tool + " convert " + (dir_ / "views.pt").string() + " " +
                      (dir_ / "v.safetensors").string() + " --max-materialized-bytes 1MiB 2>&1",
                  &out),
      0);
  EXPECT_NE(out.find("--max-materialized-bytes"), std::string::npos) << out;
  EXPECT_NE(out.find("Limits::max_materialized_ratio"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "v.safetensors"));
  EXPECT_EQ(
      run_command(tool + " convert " + (dir_ / "views.pt").string() + " " +
                      (dir_ / "v.safetensors").string() + " --max-materialized-bytes 8MiB 2>&1",
                  &out),
      0)
      << out;
  EXPECT_EQ(fs::file_size(dir_ / "v.safetensors") / 65536, 32u);
}

TEST(SeededHash, DiffersBetweenProcesses) {
  const std::uint64_t here = detail::seeded_hash(std::string_view("model.layers.0.weight"));
  EXPECT_EQ(here, detail::seeded_hash(std::string_view("model.layers.0.weight")));
  EXPECT_NE(here, detail::seeded_hash(std::string_view("model.layers.1.weight")));
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A fork would share the key: exec a fresh copy of this test binary.
    ::close(fds[0]);
    ::dup2(fds[1], 1);
    ::execl("/proc/self/exe", "self", "--gtest_filter=SeededHash.PrintOne",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto at = out.find("seeded_hash=");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(std::stoull(out.substr(at + 12)), here) << "the key must be drawn per process";
}

TEST(SeededHash, PrintOne) {
  std::printf("seeded_hash=%llu\n", static_cast<unsigned long long>(detail::seeded_hash(
                                        std::string_view("model.layers.0.weight"))));
}

}  // namespace
}  // namespace torchport::test
