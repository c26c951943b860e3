// Every fixture written by tests/fixtures/make_fixtures.py comes out of
// open() with the names, dtypes, shapes and bytes torch says it holds; every
// bad input is refused with its error code and message.

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

// The fixture file next to `<name>.expected.json`.
fs::path data_file(const fs::path& expected) {
  const std::string stem =
      expected.filename().string().substr(0, expected.filename().string().size() - 14);
  for (const char* ext : {".pt", ".pkl"})
    if (fs::exists(expected.parent_path() / (stem + ext)))
      return expected.parent_path() / (stem + ext);
  return {};
}

std::vector<fs::path> expectation_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fixture("")))
    if (e.path().string().ends_with(".expected.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The value at a dotted path of the root: dict keys, then list indices.
const Value* at_path(const Value& root, const std::string& dotted) {
  const Value* v = &root;
  std::size_t start = 0;
  while (v && start <= dotted.size()) {
    const auto dot = dotted.find('.', start);
    const std::string seg =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v->is(Value::Kind::Dict)) {
      const Value* next = v->find(seg);
      if (!next)
        for (const auto& [k, x] : v->pairs())
          if (k.is(Value::Kind::Int) && std::to_string(k.as_int()) == seg) next = &x;
      v = next;
    } else if (v->is(Value::Kind::List) || v->is(Value::Kind::Tuple)) {
      const auto i = std::stoul(seg);
      v = i < v->size() ? &v->items()[i] : nullptr;
    } else {
      return nullptr;
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

void check_value(const Value& v, const nlohmann::json& want, const std::string& key) {
  SCOPED_TRACE(key);
  if (want.is_null())
    EXPECT_TRUE(v.is_none());
  else if (want.is_boolean())
    EXPECT_EQ(v.as_bool(), want.get<bool>());
  else if (want.is_number_integer())
    EXPECT_EQ(v.as_int(), want.get<std::int64_t>());
  else if (want.is_number_float())
    EXPECT_DOUBLE_EQ(v.as_float(), want.get<double>());
  else if (want.is_string())
    EXPECT_EQ(v.as_str(), want.get<std::string>());
  else
    FAIL() << "unexpected expectation " << want;
}

class Fixture : public ::testing::TestWithParam<fs::path> {};

TEST_P(Fixture, MatchesTorch) {
  const fs::path expected = GetParam();
  const fs::path file = data_file(expected);
  ASSERT_FALSE(file.empty()) << expected;
  const auto want = test::read_json(expected);
  const TensorCatalog cat = open(file);
  EXPECT_EQ(cat.format_name(), want["format"].get<std::string>());
  test::expect_tensors(cat, want);
  if (want.contains("values"))
    for (const auto& [key, value] : want["values"].items()) {
      const Value* v = at_path(cat.root(), key);
      ASSERT_NE(v, nullptr) << key;
      check_value(*v, value, key);
    }
  // Materialised catalogues hold the same bytes, sharing the same storages.
  test::expect_tensors(materialize(cat, Residence::owned), want);
  test::expect_tensors(materialize(cat, Residence::mapped), want);
}

INSTANTIATE_TEST_SUITE_P(All, Fixture, ::testing::ValuesIn(expectation_files()), [](const auto& p) {
  const std::string n = p.param.filename().string();
  return test::param_name(n.substr(0, n.size() - 14));
});

using test::BadCase;

class Bad : public ::testing::TestWithParam<BadCase> {};

TEST_P(Bad, IsRefusedWithItsError) {
  const BadCase& c = GetParam();
  try {
    const TensorCatalog cat = open(fixture("bad/" + c.file));
    // Some damage only shows when the bytes are read.
    materialize(cat, Residence::owned);
    FAIL() << c.file << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), c.code) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(All, Bad,
                         ::testing::ValuesIn(test::bad_cases(fixture("bad/expected.json"))),
                         [](const auto& p) { return test::param_name(p.param.file); });

TEST(Open, TopLevelKeySelectsASubtree) {
  const TensorCatalog cat = open(fixture("checkpoint.pt"));
  const TensorCatalog sd = cat.select("model_state_dict");
  EXPECT_NE(sd.find("fc.weight"), nullptr);
  EXPECT_EQ(sd.find("model_state_dict.fc.weight"), nullptr);
  EXPECT_TRUE(sd.root().is(Value::Kind::Dict));
  try {
    cat.select("state_dict");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::missing_key);
    EXPECT_NE(std::string(e.what()).find("'model_state_dict'"), std::string::npos) << e.what();
  }
}

TEST(Open, WholeModuleSkipsNonPersistentBuffersAndNoneParameters) {
  const TensorCatalog cat = open(fixture("whole_module.pt"));
  EXPECT_EQ(cat.find("blocks.0.scratch"), nullptr);
  EXPECT_EQ(cat.find("head.bias"), nullptr);
  EXPECT_NE(cat.find("blocks.2.norm.running_var"), nullptr);
}

TEST(Open, ZeroCopyForAlignedStoredRecords) {
  const TensorCatalog cat = open(fixture("dtypes.pt"));
  MaterializeStats st;
  materialize(cat, Residence::mapped, &st);
  EXPECT_EQ(st.mapped_bytes, st.bytes);  // torch aligns records to 64 bytes
  EXPECT_TRUE(cat.find("f32")->storage()->borrowed());
}

TEST(Open, LegacyRecordsAreCopiedWhenUnaligned) {
  const TensorCatalog cat = open(fixture("legacy.pt"));
  MaterializeStats st;
  const TensorCatalog m = materialize(cat, Residence::mapped, &st);
  for (const auto& t : m.tensors()) {
    const auto addr = reinterpret_cast<std::uintptr_t>(t.tensor.storage()->bytes().data());
    EXPECT_EQ(addr % dtype_alignment(t.tensor.dtype()), 0u) << t.name;
  }
}

TEST(Open, UnalignedRecordsLoadedMappedAreReadOnceIntoOneArena) {
  // The copies go straight from the file into one writable arena; the
  // opened catalogue's deferred copies are never made (no second copy).
  const TensorCatalog cat = open(fixture("legacy.pt"));
  const TensorCatalog m = materialize(cat, Residence::mapped);
  std::size_t copied = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const auto& s = m.tensors()[i].tensor.storage();
    if (s->borrowed()) continue;
    SCOPED_TRACE(m.tensors()[i].name);
    ++copied;
    EXPECT_TRUE(s->writable());
    EXPECT_TRUE(cat.tensors()[i].tensor.storage()->pending());
  }
  EXPECT_GT(copied, 0u);
  test::expect_tensors(m, test::read_json(fixture("legacy.expected.json")));
}

TEST(Open, OpeningDoesNotTouchTensorBytes) {
  const TensorCatalog cat = open(fixture("deflated.pt"));
  for (const auto& t : cat.tensors()) EXPECT_TRUE(t.tensor.storage()->pending()) << t.name;
}

// A load's progress: bytes read so far and in all, ending with all of them.
TEST(Open, MaterializeReportsProgress) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  MaterializeStats st;
  (void)materialize(
      open(fixture("checkpoint.pt")), Residence::owned, &st,
      [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  ASSERT_FALSE(calls.empty());
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i].first, calls[i - 1].first);
  EXPECT_EQ(calls.back().first, calls.back().second);
  EXPECT_GE(calls.back().second, st.bytes);
}

TEST(Open, LimitsApply) {
  OpenOptions o;
  o.limits.max_tensors = 3;
  try {
    open(fixture("views.pt"), o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
    EXPECT_NE(std::string(e.what()).find("max_tensors"), std::string::npos);
  }
  OpenOptions inflate;
  inflate.limits.max_inflate_bytes = 8;  // data.pkl inflates to 368 bytes
  try {
    open(fixture("deflated.pt"), inflate);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::limit_exceeded);
    EXPECT_NE(std::string(e.what()).find("max_inflate_bytes"), std::string::npos);
  }
}

TEST(Open, UnknownGlobalsCanBeRefused) {
  OpenOptions o;
  o.allow_unknown_globals = false;
  try {
    open(fixture("whole_module.pt"), o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsafe_global);
    EXPECT_NE(std::string(e.what()).find("allow-list"), std::string::npos) << e.what();
  }
}

TEST(Open, VerifyCrcReadsEveryRecord) {
  OpenOptions o;
  o.verify_crc = true;
  EXPECT_EQ(open(fixture("views.pt"), o).size(), 13u);
}

TEST(Open, ErrorsNameFileKeyAndOffset) {
  try {
    open(fixture("bad/view_out_of_bounds.pt"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.key(), "w");
    EXPECT_TRUE(e.offset().has_value());
    EXPECT_NE(e.where().find("view_out_of_bounds.pt"), std::string::npos) << e.what();
  }
}

TEST(Open, MissingFileIsAnIoError) {
  try {
    open(fixture("no_such_file.pt"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
}

}  // namespace
