// Sparse tensors (tests/fixtures/sparse/make_sparse_fixtures.py, torch
// 1.13): COO and CSR read with their parts and dense shape; to_dense() as
// torch's (duplicates summed); CSC, BSR and BSC (which 1.13 cannot save)
// built by hand against torch's to_dense(); written back to .pt as torch
// writes them; safetensors only with densify; bad parts refused.

#include <filesystem>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/densify.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

void check_catalog(const TensorCatalog& cat, const nlohmann::json& want) {
  ASSERT_EQ(cat.size(), want["tensors"].size());
  for (const auto& w : want["tensors"]) {
    const std::string name = w["name"];
    SCOPED_TRACE(name);
    const Tensor* t = cat.find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->shape(), w["shape"].get<Shape>());
    EXPECT_EQ(dtype_name(t->dtype()), w["dtype"].get<std::string>());
    if (w["layout"] == "strided") {
      EXPECT_FALSE(t->is_sparse());
    } else {
      ASSERT_TRUE(t->is_sparse());
      EXPECT_EQ(SparseParts::layout_name(t->sparse()->layout), w["layout"].get<std::string>());
      EXPECT_EQ(t->sparse()->values.size(0), w["nnz"].get<std::int64_t>());
    }
    EXPECT_EQ(test::tensor_sha256(t->to_dense()), w["dense_sha256"].get<std::string>());
  }
}

TEST(Sparse, MatchesTorch) {
  const auto want = test::read_json(fixture("sparse/sparse.expected.json"));
  const TensorCatalog cat = open(fixture("sparse/sparse.pt"));
  check_catalog(cat, want);
  check_catalog(materialize(cat, Residence::owned), want);
  const fs::path dir = test::temp_dir("sparse_pt");
  save(open(fixture("sparse/sparse.pt")), dir / "out.pt", SaveFormat::pytorch);
  check_catalog(open(dir / "out.pt"), want);
}

TEST(Sparse, ElementsOnlyThroughToDense) {
  const TensorCatalog cat = open(fixture("sparse/sparse.pt"));
  const Tensor* t = cat.find("coo");
  ASSERT_NE(t, nullptr);
  try {
    (void)t->contiguous();
    FAIL() << "a sparse tensor's elements were read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("to_dense()"), std::string::npos) << e.what();
  }
}

TEST(Sparse, HandBuiltLayoutsMatchTorch) {
  const auto want = test::read_json(fixture("sparse/sparse.expected.json"));
  for (const auto& h : want["hand"]) {
    SCOPED_TRACE(h["layout"].get<std::string>());
    auto p = std::make_shared<SparseParts>();
    const std::string layout = h["layout"];
    p->layout = layout == "sparse_csc"   ? SparseParts::Layout::csc
                : layout == "sparse_bsr" ? SparseParts::Layout::bsr
                                         : SparseParts::Layout::bsc;
    p->size = h["shape"].get<Shape>();
    const auto comp = h["compressed"].get<std::vector<std::int64_t>>();
    const auto plain = h["plain"].get<std::vector<std::int64_t>>();
    const auto vals = h["values"].get<std::vector<float>>();
    p->compressed_indices =
        Tensor::from(std::span<const std::int64_t>(comp), {static_cast<std::int64_t>(comp.size())});
    p->plain_indices = Tensor::from(std::span<const std::int64_t>(plain),
                                    {static_cast<std::int64_t>(plain.size())});
    p->values = Tensor::from(std::span<const float>(vals), h["values_shape"].get<Shape>());
    const Tensor d = Tensor::sparse_tensor(p).to_dense();
    const auto dense = h["dense"].get<std::vector<float>>();
    EXPECT_EQ(std::vector<float>(d.span<float>().begin(), d.span<float>().end()), dense);
    // Written to .pt and read back (torch 2.x's form for these layouts).
    const fs::path dir = test::temp_dir("sparse_hand");
    save(TensorCatalog::from_tensors(Format::state_dict, {{"s", Tensor::sparse_tensor(p)}}),
         dir / "s.pt", SaveFormat::pytorch);
    const TensorCatalog back = open(dir / "s.pt");
    ASSERT_TRUE(back.find("s")->is_sparse());
    EXPECT_TRUE(back.find("s")->to_dense().equal(d));
  }
}

TEST(Sparse, SafetensorsOnlyDense) {
  const fs::path dir = test::temp_dir("sparse_st");
  const TensorCatalog cat = open(fixture("sparse/sparse.pt"));
  try {
    save(cat, dir / "a.safetensors", SaveFormat::safetensors);
    FAIL() << "sparse tensors written to safetensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--densify"), std::string::npos) << e.what();
  }
  save(densify_tensors(cat), dir / "d.safetensors", SaveFormat::safetensors);
  const TensorCatalog d = open(dir / "d.safetensors");
  for (const auto& t : cat.tensors())
    EXPECT_TRUE(d.find(t.name)->equal(t.tensor.to_dense())) << t.name;
}

TEST(Sparse, BadPartsAreRefused) {
  auto p = std::make_shared<SparseParts>();
  p->layout = SparseParts::Layout::coo;
  p->size = {2, 2};
  p->indices = Tensor::from<std::int64_t>({0, 5}, {2, 1});  // row 0, column 5 of 2
  p->values = Tensor::from({1.f}, {1});
  EXPECT_THROW(Tensor::sparse_tensor(p).to_dense(), Error);
  p->indices = Tensor::from<std::int64_t>({0, 1}, {2, 1});
  p->values = Tensor::from({1.f, 2.f}, {2});  // two values, one index
  EXPECT_THROW(Tensor::sparse_tensor(p).to_dense(), Error);
  auto c = std::make_shared<SparseParts>();
  c->layout = SparseParts::Layout::csr;
  c->size = {2, 2};
  c->compressed_indices = Tensor::from<std::int64_t>({0, 2, 1}, {3});  // decreasing
  c->plain_indices = Tensor::from<std::int64_t>({0, 1}, {2});
  c->values = Tensor::from({1.f, 2.f}, {2});
  EXPECT_THROW(Tensor::sparse_tensor(c).to_dense(), Error);
}

// torch.load's validation (_validate_loaded_sparse_tensors), with torch's
// messages (checked against torch 2.6 and 2.14 by
// tests/security/crafted/weights_only/ and check_weights_only.py).
void invalid(const SparseParts& p, const std::string& message, bool coalesced = false) {
  try {
    p.validate(coalesced);
    ADD_FAILURE() << "valid; wanted: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::corrupt) << e.what();
    EXPECT_NE(e.message().find(message), std::string::npos) << e.what();
  }
}

TEST(Sparse, ValidatedAsTorchLoadValidates) {
  SparseParts p;
  p.size = {2, 2};
  p.indices = Tensor::from<std::int64_t>({0, 1, 0, 1}, {2, 2});
  p.values = Tensor::from({1.f, 2.f}, {2});
  EXPECT_NO_THROW(p.validate(true));
  p.indices = Tensor::from<std::int64_t>({0, 5, 0, 1}, {2, 2});
  invalid(p, "size is inconsistent with indices: for dim 0, size is 2 but found index 5");
  p.indices = Tensor::from<std::int64_t>({0, 1, -1, 1}, {2, 2});
  invalid(p, "found negative index -1 for dim 1");
  // Saved as coalesced: repeated or unordered entries are refused; not
  // coalesced, a repeated entry is summed by to_dense().
  p.indices = Tensor::from<std::int64_t>({1, 1, 1, 1}, {2, 2});
  EXPECT_NO_THROW(p.validate(false));
  invalid(p, "cannot set is_coalesced to true", true);
  p.indices = Tensor::from<std::int64_t>({1, 0, 0, 1}, {2, 2});
  invalid(p, "cannot set is_coalesced to true", true);

  SparseParts c;
  c.layout = SparseParts::Layout::csr;
  c.size = {2, 2};
  c.compressed_indices = Tensor::from<std::int64_t>({0, 1, 2}, {3});
  c.plain_indices = Tensor::from<std::int64_t>({0, 1}, {2});
  c.values = Tensor::from({1.f, 2.f}, {2});
  EXPECT_NO_THROW(c.validate());
  c.plain_indices = Tensor::from<std::int64_t>({0, 7}, {2});
  invalid(c, "`0 <= col_indices < ncols` is not satisfied.");
  c.compressed_indices = Tensor::from<std::int64_t>({0, 2, 2}, {3});
  c.plain_indices = Tensor::from<std::int64_t>({1, 0}, {2});
  invalid(c, "are sorted and distinct along the last dimension values` is not satisfied.");
  c.plain_indices = Tensor::from<std::int64_t>({1, 1}, {2});
  invalid(c, "are sorted and distinct");
  c.compressed_indices = Tensor::from<std::int64_t>({1, 2, 2}, {3});
  c.plain_indices = Tensor::from<std::int64_t>({0, 1}, {2});
  invalid(c, "`crow_indices[..., 0] == 0` is not satisfied.");
  c.compressed_indices = Tensor::from<std::int64_t>({0, 1, 1}, {3});
  invalid(c, "`crow_indices[..., -1] == nnz` is not satisfied.");
  c.compressed_indices = Tensor::from<std::int64_t>({0, 1}, {2});
  invalid(
      c, "crow_indices have wrong shape: crow_indices.shape[-1] = 2 is not equal to nrows + 1 = 3");
  c.layout = SparseParts::Layout::csc;
  c.compressed_indices = Tensor::from<std::int64_t>({0, 2, 2}, {3});
  c.plain_indices = Tensor::from<std::int64_t>({0, 9}, {2});
  invalid(c, "`0 <= row_indices < nrows` is not satisfied.");
}

// Read through the reader: the crafted files of
// tests/security/crafted/weights_only (invalid) and their twins in
// tests/security/benign/weights_only.
TEST(Sparse, ReadersRefuseWhatTorchLoadRefuses) {
  const fs::path security = fs::path(TORCHPORT_FIXTURES_DIR) / ".." / "security";
  for (const char* name :
       {"sparse_coo_index_out_of_range", "sparse_coo_negative_index",
        "sparse_coo_coalesced_with_duplicates", "sparse_csr_column_out_of_range",
        "sparse_csr_unsorted_columns", "sparse_legacy_constructor_out_of_range"}) {
    SCOPED_TRACE(name);
    try {
      (void)open(security / "crafted" / "weights_only" / (std::string(name) + ".pt"));
      ADD_FAILURE() << "read";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::corrupt) << e.what();
      EXPECT_NE(e.message().find("torch.load refuses it too"), std::string::npos) << e.what();
      EXPECT_EQ(e.key(), "s") << e.what();
    }
  }
  for (const char* name :
       {"sparse_coo", "sparse_coo_coalesced", "sparse_csr", "sparse_legacy_constructor"}) {
    SCOPED_TRACE(name);
    const TensorCatalog cat =
        open(security / "benign" / "weights_only" / (std::string(name) + ".pt"));
    const Tensor* t = cat.find("s");
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->is_sparse());
    EXPECT_EQ(t->shape(), (Shape{2, 2}));
    const Tensor d = t->to_dense();
    EXPECT_EQ(d.span<float>()[0], 1.f);
    EXPECT_EQ(d.span<float>()[3], 2.f);
  }
}

}  // namespace
