// Quantized tensors (tests/fixtures/quantized/make_quantized_fixtures.py,
// torch 1.13): read with their integers, scheme, scales, zero points and
// axis; dequantize() bit for bit as torch's; kept quantized through .pt,
// refused by safetensors unless dequantized or split; typed loading only
// with LoadArgs::dequantize().

#include <filesystem>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/quantize.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/load.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

template <class T>
T first(const Tensor* t) {
  const Tensor c = t->contiguous();
  return c.span<T>()[0];
}

std::vector<double> doubles(const Tensor& t) {
  const Tensor d = t.to(DType::F64);
  const auto s = d.span<double>();
  return {s.begin(), s.end()};
}

void check_tensor(const Tensor& t, const nlohmann::json& w) {
  SCOPED_TRACE(w["name"].get<std::string>());
  EXPECT_EQ(t.shape(), w["shape"].get<Shape>());
  if (!w.contains("qdtype")) {
    EXPECT_FALSE(t.is_quantized());
    EXPECT_EQ(test::tensor_sha256(t), w["sha256"].get<std::string>());
    return;
  }
  ASSERT_TRUE(t.is_quantized());
  const Quantization& q = *t.quantization();
  EXPECT_EQ(Quantization::qdtype_name(t.dtype()), w["qdtype"].get<std::string>());
  EXPECT_EQ(Quantization::scheme_name(q.scheme), w["scheme"].get<std::string>());
  EXPECT_EQ(test::tensor_sha256(t), w["int_repr_sha256"].get<std::string>());
  EXPECT_EQ(test::tensor_sha256(t.dequantize()), w["dequantize_sha256"].get<std::string>());
  if (q.scheme == Quantization::Scheme::per_tensor_affine) {
    EXPECT_EQ(q.scale, w["scale"].get<double>());
    EXPECT_EQ(q.zero_point, w["zero_point"].get<std::int64_t>());
  } else {
    EXPECT_EQ(doubles(q.scales), w["scales"].get<std::vector<double>>());
    EXPECT_EQ(doubles(q.zero_points), w["zero_points"].get<std::vector<double>>());
    EXPECT_EQ(q.axis, w["axis"].get<std::int64_t>());
  }
}

void check_catalog(const TensorCatalog& cat, const nlohmann::json& want) {
  ASSERT_EQ(cat.size(), want["tensors"].size());
  for (const auto& w : want["tensors"]) {
    const Tensor* t = cat.find(w["name"].get<std::string>());
    ASSERT_NE(t, nullptr) << w["name"];
    check_tensor(*t, w);
  }
}

class QuantizedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedFixture, MatchesTorch) {
  const auto want = test::read_json(fixture("quantized/" + GetParam() + ".expected.json"));
  const TensorCatalog cat = open(fixture("quantized/" + GetParam() + ".pt"));
  check_catalog(cat, want);
  check_catalog(materialize(cat, Residence::owned), want);
  // Written back as torch writes them, and read again.
  const fs::path dir = test::temp_dir("quantized_" + GetParam());
  save(open(fixture("quantized/" + GetParam() + ".pt")), dir / "out.pt", SaveFormat::pytorch);
  check_catalog(open(dir / "out.pt"), want);
}

INSTANTIATE_TEST_SUITE_P(All, QuantizedFixture,
                         ::testing::Values("quantized", "quantized_legacy", "quantized_linear"));

TEST(Quantized, TransposedViewSharesTheStorage) {
  const TensorCatalog cat = open(fixture("quantized/quantized.pt"));
  const Tensor* a = cat.find("pt_qint8");
  const Tensor* t = cat.find("pt_transposed");
  ASSERT_TRUE(a && t);
  EXPECT_EQ(a->storage(), t->storage());
  EXPECT_EQ(t->strides(), (Shape{1, 6}));
}

TEST(Quantized, SafetensorsRefusesUnlessDequantizedOrSplit) {
  const fs::path dir = test::temp_dir("quantized_st");
  const TensorCatalog cat = open(fixture("quantized/quantized.pt"));
  try {
    save(cat, dir / "a.safetensors", SaveFormat::safetensors);
    FAIL() << "quantized tensors written to safetensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--dequantize"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--keep-quantized"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "a.safetensors"));

  save(dequantize_tensors(cat), dir / "d.safetensors", SaveFormat::safetensors);
  const TensorCatalog d = open(dir / "d.safetensors");
  ASSERT_EQ(d.size(), cat.size());
  for (const auto& t : cat.tensors()) {
    const Tensor* x = d.find(t.name);
    ASSERT_NE(x, nullptr) << t.name;
    EXPECT_TRUE(x->equal(t.tensor.is_quantized() ? t.tensor.dequantize() : t.tensor.contiguous()))
        << t.name;
  }

  save(split_quantized(cat), dir / "k.safetensors", SaveFormat::safetensors);
  const TensorCatalog k = open(dir / "k.safetensors");
  const Tensor* ir = k.find("pt_qint8");
  ASSERT_NE(ir, nullptr);
  EXPECT_FALSE(ir->is_quantized());
  EXPECT_EQ(ir->dtype(), DType::I8);
  EXPECT_TRUE(ir->equal(*cat.find("pt_qint8")));
  EXPECT_EQ(first<double>(k.find("pt_qint8.q_scale")), cat.find("pt_qint8")->quantization()->scale);
  EXPECT_EQ(first<std::int64_t>(k.find("pt_qint8.q_zero_point")), 3);
  EXPECT_TRUE(
      k.find("pc_qint8.q_per_channel_scales")->equal(cat.find("pc_qint8")->quantization()->scales));
  EXPECT_EQ(first<std::int64_t>(k.find("pc_quint8_axis1.q_per_channel_axis")), 1);
  EXPECT_EQ(k.metadata().at("torchport.quantized.pc_qint8"), "qint8 per_channel_affine");
}

struct Net {
  Tensor pt_qint8;
  Tensor pc_quint8_axis1;
  TORCHPORT_FIELDS(pt_qint8, pc_quint8_axis1)
};

TEST(Quantized, TypedLoadDequantizesOnlyWhenAsked) {
  const fs::path file = fixture("quantized/quantized.pt");
  const auto args = LoadArgs{}.include("^(pt_qint8|pc_quint8_axis1)$");
  Net net;
  try {
    load(net, file, args);
    FAIL() << "a quantized tensor filled a field without dequantize()";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::dtype_mismatch);
    EXPECT_NE(std::string(e.what()).find("LoadArgs::dequantize()"), std::string::npos) << e.what();
  }
  Net ok;
  load(ok, file, LoadArgs{args}.dequantize());
  const TensorCatalog cat = open(file);
  EXPECT_EQ(ok.pt_qint8.dtype(), DType::F32);
  EXPECT_TRUE(ok.pt_qint8.equal(cat.find("pt_qint8")->dequantize()));
  EXPECT_TRUE(ok.pc_quint8_axis1.equal(cat.find("pc_quint8_axis1")->dequantize()));
}

TEST(Quantized, QuantizerMustFitTheTensor) {
  auto q = std::make_shared<Quantization>();
  q->scheme = Quantization::Scheme::per_channel_affine;
  q->scales = Tensor::from({0.5, 0.25}, {2});
  q->zero_points = Tensor::from<std::int64_t>({0, 1}, {2});
  q->axis = 1;
  const Tensor ints = Tensor::from<std::int8_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor t = ints.with_quantization(q);
  const Tensor d = t.dequantize();
  EXPECT_EQ(std::vector<float>(d.span<float>().begin(), d.span<float>().end()),
            (std::vector<float>{0.5f, 0.25f, 1.5f, 0.75f, 2.5f, 1.25f}));
  q->axis = 0;  // 3 channels, 2 scales
  EXPECT_THROW(ints.with_quantization(q), Error);
  EXPECT_THROW(Tensor::from({1.f}, {1}).with_quantization(std::make_shared<Quantization>()), Error);
  EXPECT_THROW(ints.dequantize(), Error);
}

}  // namespace
