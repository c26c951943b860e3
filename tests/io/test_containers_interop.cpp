// torchport's container readers against torch's own: make_containers.py
// writes tar and zip archives for each container rule and records what
// Python's tarfile (as torch.load opens tars) and torch._C.PyTorchFileReader
// (miniz) make of them; here torchport reads the same files. Where both
// read an archive, every name must resolve to the same member (type, data
// offset, size) or the same record bytes; where torchport refuses, the
// refusal must be one the rules allow (ambiguous, or what torch refuses too).

#include <cstdio>
#include <set>

#include <gtest/gtest.h>

#include "io/tar.hpp"
#include "io/zip.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"

namespace fs = std::filesystem;
using namespace torchport;

namespace {

std::string hex(std::span<const std::byte> b) {
  std::string out;
  char buf[3];
  for (std::byte c : b) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(c));
    out += buf;
  }
  return out;
}

class ContainersInterop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::temp_dir("containers-interop");
    const std::string script = std::string(TORCHPORT_FIXTURES_DIR) + "/../io/make_containers.py";
    std::string out;
    ASSERT_EQ(
        test::run_command(torchport::test::python() + " " + script + " " + dir_.string(), &out), 0)
        << out;
    manifest_ = test::read_json(dir_ / "manifest.json");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static inline fs::path dir_;
  static inline nlohmann::json manifest_;
};

TEST_F(ContainersInterop, TarMembersResolveAsTarfileResolvesThem) {
  int compared = 0, refused = 0;
  for (const auto& [file, py] : manifest_.items()) {
    if (py["kind"] != "tar") continue;
    SCOPED_TRACE(file);
    const Source src = Source::map_file(dir_ / file);
    const bool opens = py["opens"].get<bool>();
    EXPECT_EQ(probe_tar(src.bytes()) != TarOpen::refused, opens);
    std::optional<TarArchive> ours;
    std::optional<Error> error;
    try {
      ours = TarArchive::open(src, {});
    } catch (const Error& e) {
      error = e;
    }
    if (!opens) {
      ASSERT_TRUE(error.has_value());
      EXPECT_EQ(error->code(), ErrorCode::not_a_checkpoint) << error->what();
      continue;
    }
    if (py.contains("read_error")) {
      // tarfile raises ReadError while listing: torch falls back to the pickle.
      ASSERT_TRUE(error.has_value());
      EXPECT_TRUE(error->code() == ErrorCode::truncated || error->code() == ErrorCode::corrupt)
          << error->what();
      continue;
    }
    if (error) {
      // Our refusals where tarfile reads: only for the documented classes.
      EXPECT_TRUE(error->code() == ErrorCode::ambiguous || error->code() == ErrorCode::unsupported)
          << error->what();
      ++refused;
      continue;
    }
    std::set<std::string> names;
    for (const auto& m : ours->members()) names.insert(m.name);
    EXPECT_EQ(names.size(), py["members"].size());
    for (const auto& [name, m] : py["members"].items()) {
      const TarMember* t = ours->resolve(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(std::string(1, t->type), m["type"].get<std::string>()) << name;
      EXPECT_EQ(t->data_offset, m["offset_data"].get<std::uint64_t>()) << name;
      EXPECT_EQ(t->size, m["size"].get<std::uint64_t>()) << name;
      ++compared;
    }
  }
  EXPECT_GE(compared, 20);
  EXPECT_GE(refused, 1);  // hidden_after_zero_block
}

TEST_F(ContainersInterop, ZipRecordsResolveAsPyTorchFileReaderResolvesThem) {
  int compared = 0, refused = 0;
  for (const auto& [file, py] : manifest_.items()) {
    if (py["kind"] != "zip") continue;
    SCOPED_TRACE(file);
    std::optional<ZipArchive> ours;
    try {
      ours = ZipArchive::open(Source::map_file(dir_ / file), {});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::ambiguous) << e.what();
      ++refused;
      continue;
    }
    if (py.contains("reader_error")) continue;  // torch refuses; reading more is no disagreement
    const std::string& first = ours->entries().front().name;
    const std::string prefix = first.substr(0, first.find('/') + 1);
    for (const auto& [name, record] : py["records"].items()) {
      const ZipEntry* e = ours->find(prefix + name);
      if (record.is_null()) {
        EXPECT_EQ(e, nullptr) << name;
      } else {
        ASSERT_NE(e, nullptr) << name;
        EXPECT_EQ(hex(ours->read(*e).bytes()), record.get<std::string>()) << name;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 14);
  EXPECT_GE(refused, 2);  // case_colliding_names, two_end_records
}

}  // namespace
