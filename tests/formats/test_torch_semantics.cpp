// Checkpoints whose reading depends on pickle semantics as torch.load
// applies them (tests/fixtures/make_pickle_semantics.py checked each with
// torch 1.13): legacy files of pickle protocols 0 to 2, bare tensors, BUILD
// on tensors, _rebuild_from_type_v2, one storage key under two dtypes,
// sparse tensors and layouts. Each reads as torch reads it, or is refused
// with its code and message.

#include <filesystem>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/scan.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

fs::path dir() {
  return fixture("pickle_semantics");
}

std::vector<std::string> expectation_names() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir())) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".expected.json")) out.push_back(n.substr(0, n.size() - 14));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_catalog(const TensorCatalog& cat, const nlohmann::json& want, bool values = true) {
  test::expect_tensors(cat, want);
  if (values && want.contains("values"))
    for (const auto& [key, value] : want["values"].items()) {
      const Value* v = cat.root().find(key);
      ASSERT_NE(v, nullptr) << key;
      if (value.is_string()) {
        EXPECT_EQ(v->as_str(), value.get<std::string>()) << key;
      } else if (value.is_number_integer()) {
        EXPECT_EQ(v->as_int(), value.get<std::int64_t>()) << key;
      } else if (value.is_number_float()) {
        EXPECT_DOUBLE_EQ(v->as_float(), value.get<double>()) << key;
      }
    }
}

class TorchReads : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchReads, AsTorchDoes) {
  const auto want = test::read_json(dir() / (GetParam() + ".expected.json"));
  const TensorCatalog cat = open(dir() / (GetParam() + ".pt"));
  EXPECT_EQ(cat.format_name(), want["format"].get<std::string>());
  check_catalog(cat, want);
  check_catalog(materialize(cat, Residence::owned), want, false);
}

INSTANTIATE_TEST_SUITE_P(All, TorchReads, ::testing::ValuesIn(expectation_names()),
                         [](const auto& p) { return p.param; });

class Refused : public ::testing::TestWithParam<nlohmann::json> {};

TEST_P(Refused, WithItsCodeAndMessage) {
  const auto& c = GetParam();
  try {
    open(dir() / c["file"].get<std::string>());
    FAIL() << "read, but must be refused with " << c["code"] << " (torch: " << c["torch"] << ")";
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), c["code"].get<std::string>()) << e.what();
    EXPECT_NE(std::string(e.what()).find(c["message"].get<std::string>()), std::string::npos)
        << e.what();
  }
}

std::vector<nlohmann::json> bad_cases() {
  std::vector<nlohmann::json> out;
  for (const auto& c : test::read_json(fixture("pickle_semantics/bad.json"))) out.push_back(c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, Refused, ::testing::ValuesIn(bad_cases()), [](const auto& p) {
  const std::string n = p.param["file"].template get<std::string>();
  return test::param_name(n.substr(0, n.size() - 3));
});

TEST(TorchSemantics, BareTensorIsNamedTensorAndIsTheRoot) {
  for (const char* f : {"bare_zip.pt", "bare_legacy.pt", "legacy_protocol1_bare.pt"}) {
    SCOPED_TRACE(f);
    const TensorCatalog cat = open(dir() / f);
    ASSERT_EQ(cat.size(), 1u);
    EXPECT_EQ(cat.tensors()[0].name, kRootTensorName);
    EXPECT_TRUE(cat.root().is(Value::Kind::Tensor));
    EXPECT_NE(cat.find("tensor"), nullptr);
  }
  // select() of a key that names a tensor itself gives it the same name.
  const TensorCatalog two = open(dir() / "two_dtypes_zip.pt");
  const TensorCatalog one = two.select("f");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.tensors()[0].name, "tensor");
}

TEST(TorchSemantics, SparseAndLayoutsAreNotDangerous) {
  // Sparse tensors are refused as unsupported by open(), and scan does not
  // call their globals unsafe: torch's weights_only loader allows them.
  for (const char* f : {"sparse_coo.pt", "sparse_csr.pt", "layout.pt"}) {
    SCOPED_TRACE(f);
    const ScanReport r = scan(dir() / f);
    EXPECT_NE(r.verdict, ScanVerdict::unsafe) << r.reason();
    for (const auto& p : r.pickles)
      for (const auto& g : p.stats.globals)
        EXPECT_NE(g.klass, pickle::GlobalClass::dangerous) << g.module << "." << g.name;
  }
  EXPECT_EQ(scan(dir() / "layout.pt").verdict, ScanVerdict::clean);
}

TEST(TorchSemantics, StorageSharedAcrossDtypesKeepsTheFirst) {
  const TensorCatalog cat = open(dir() / "two_dtypes_zip.pt");
  for (const auto& t : cat.tensors()) EXPECT_EQ(t.tensor.dtype(), DType::F32) << t.name;
  const TensorCatalog legacy = open(dir() / "two_dtypes_legacy.pt");
  for (const auto& t : legacy.tensors()) EXPECT_EQ(t.tensor.dtype(), DType::F32) << t.name;
}

}  // namespace
