// Records of torch 2.x's zip writer and meta tensors
// (tests/fixtures/torch2/make_torch2_fixtures.py): the layout torch >= 2.1
// writes (.format_version, .storage_alignment, byteorder, .data/version,
// .data/serialization_id, records aligned to 64 or 4096 bytes) reads as
// torch reads it; a "big" byteorder swaps the storages as torch 2.x does;
// the archive version is checked as every torch reader checks it; meta
// tensors list dtype, shape and strides without data, are written back to
// .pt as torch writes them and refused by formats that hold data only.

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/compare.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/quantize.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/record/fields.hpp"
#include "torchport/record/load.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

// The catalogue holds `want["tensors"]` in order: name, dtype, shape,
// strides, the meta/conj/neg flags, and (unless meta) the SHA-256 of the
// elements (resolved, for conj/neg views).
void expect_tensors(const TensorCatalog& cat, const nlohmann::json& want) {
  ASSERT_EQ(cat.size(), want["tensors"].size());
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const auto& [tname, t] = cat.tensors()[i];
    const auto& w = want["tensors"][i];
    SCOPED_TRACE(tname);
    EXPECT_EQ(tname, w["name"].get<std::string>());
    EXPECT_EQ(t.dtype(), dtype_from_torch_name(w["dtype"].get<std::string>()));
    EXPECT_EQ(t.shape(), w["shape"].get<Shape>());
    EXPECT_EQ(t.strides(), w["strides"].get<Shape>());
    EXPECT_EQ(t.is_meta(), w.value("meta", false));
    EXPECT_EQ(t.is_conj(), w.value("conj", false));
    EXPECT_EQ(t.is_neg(), w.value("neg", false));
    EXPECT_EQ(t.is_quantized(), w.contains("qdtype"));
    if (t.is_quantized() && w.contains("qdtype")) {  // the integer values, and the real ones
      const Quantization& q = *t.quantization();
      EXPECT_EQ(Quantization::qdtype_name(t.dtype(), q.bits), w["qdtype"].get<std::string>());
      EXPECT_EQ(Quantization::scheme_name(q.scheme), w["qscheme"].get<std::string>());
      EXPECT_EQ(test::tensor_sha256(t.dequantize()), w["dequantized_sha256"].get<std::string>());
    }
    if (!t.is_meta()) {
      EXPECT_EQ(test::tensor_sha256(t), w["sha256"].get<std::string>());
    }
  }
}

void expect_fixture(const TensorCatalog& cat, const std::string& name) {
  expect_tensors(cat, test::read_json(fixture("torch2/" + name + ".expected.json")));
}

Error open_error(const std::string& name) {
  try {
    open(fixture("torch2/" + name + ".pt"));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << name << " was read";
  return Error(ErrorCode::internal, "read");
}

class Torch2Layout : public ::testing::TestWithParam<std::string> {};

TEST_P(Torch2Layout, ReadsAsTorchReadsIt) {
  const TensorCatalog cat = open(fixture("torch2/" + GetParam() + ".pt"));
  EXPECT_EQ(cat.format_name(), "pytorch-zip");
  expect_fixture(cat, GetParam());
  expect_fixture(materialize(cat, Residence::owned), GetParam());
  // The view keeps sharing its base's storage.
  EXPECT_EQ(cat.find("view")->storage(), cat.find("linear.weight")->storage());
  // The informative records are the catalogue's metadata.
  EXPECT_EQ(cat.metadata().at("pytorch.format_version"), "1");
  EXPECT_EQ(cat.metadata().at("pytorch.serialization_id").size(), 40u);
  EXPECT_EQ(cat.metadata().at("pytorch.storage_alignment"),
            GetParam() == "torch2_align4096" ? "4096" : "64");
}

INSTANTIATE_TEST_SUITE_P(All, Torch2Layout,
                         ::testing::Values("torch2_layout", "torch2_align4096",
                                           "torch2_data_version", "torch2_big"));

TEST(Torch2Layout, BigEndianGivesTheLittleEndianValues) {
  const TensorCatalog big = open(fixture("torch2/torch2_big.pt"));
  const TensorCatalog little = open(fixture("torch2/torch2_layout.pt"));
  for (const auto& [name, t] : little.tensors()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(big.find(name)->contiguous().equal(t.contiguous()));
  }
}

TEST(Torch2Layout, VersionIsCheckedAsTorchChecksIt) {
  const Error missing = open_error("bad_version_missing");
  EXPECT_EQ(missing.code(), ErrorCode::corrupt);
  EXPECT_NE(std::string(missing.what()).find("no 'bad_version_missing/version' record"),
            std::string::npos)
      << missing.what();
  const Error eleven = open_error("bad_version_11");
  EXPECT_EQ(eleven.code(), ErrorCode::unsupported);
  EXPECT_NE(std::string(eleven.what()).find("format version is 11; torch reads versions 1 to 10"),
            std::string::npos)
      << eleven.what();
  const Error text = open_error("bad_version_text");
  EXPECT_EQ(text.code(), ErrorCode::corrupt);
  EXPECT_NE(std::string(text.what()).find("'three?' is not a version number"), std::string::npos)
      << text.what();
}

TEST(Torch2Layout, ByteorderMustBeLittleOrBig) {
  const Error e = open_error("bad_byteorder");
  EXPECT_EQ(e.code(), ErrorCode::corrupt);
  EXPECT_NE(std::string(e.what()).find("byteorder record is not"), std::string::npos) << e.what();
  EXPECT_EQ(e.key(), "bad_byteorder/byteorder");
}

TEST(MetaTensors, ListedWithoutData) {
  for (const std::string name : {"meta", "meta_linear"}) {
    SCOPED_TRACE(name);
    const TensorCatalog cat = open(fixture("torch2/" + name + ".pt"));
    expect_fixture(cat, name);
    expect_fixture(materialize(cat, Residence::owned), name);
  }
  const TensorCatalog cat = open(fixture("torch2/meta.pt"));
  const Tensor* w = cat.find("meta_weight");
  ASSERT_TRUE(w && w->is_meta());
  EXPECT_EQ(w->description(), "F32[3, 4] meta");
  try {
    (void)w->bytes();
    FAIL() << "a meta tensor gave bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("no data"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)w->clone(), Error);
  EXPECT_THROW((void)cat.find("meta_strided")->contiguous(), Error);
}

TEST(MetaTensors, WrittenBackToPtAndRefusedByDataOnlyFormats) {
  const fs::path dir = test::temp_dir("torch2_meta");
  save(open(fixture("torch2/meta.pt")), dir / "out.pt", SaveFormat::pytorch);
  expect_fixture(open(dir / "out.pt"), "meta");
  try {
    save(open(fixture("torch2/meta.pt")), dir / "out.safetensors", SaveFormat::safetensors);
    FAIL() << "meta tensors written to safetensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(e.key(), "meta_weight");
    EXPECT_NE(std::string(e.what()).find("meta tensor"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  EXPECT_THROW(write_record(open(fixture("torch2/meta.pt")), dir / "out.tpb", CompactBin{}), Error);
  EXPECT_FALSE(fs::exists(dir / "out.tpb"));
}

struct Lin {
  Tensor weight, bias;
  TORCHPORT_FIELDS(weight, bias)
};

TEST(MetaTensors, TypedLoadingSaysTheFileHasNoData) {
  Lin m;
  m.weight = Tensor::zeros(DType::F32, {3, 4});
  m.bias = Tensor::zeros(DType::F32, {3});
  try {
    load(m, fixture("torch2/meta_linear.pt"));
    FAIL() << "loaded a meta tensor";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("meta tensor"), std::string::npos) << e.what();
  }
}

TEST(MetaTensors, ViewsOfAMetaTensorAreMeta) {
  const TensorCatalog cat = open(fixture("torch2/meta.pt"));
  const Tensor t = cat.find("meta_weight")->transpose(0, 1);
  EXPECT_TRUE(t.is_meta());
  EXPECT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  EXPECT_TRUE(t.narrow(0, 1, 2).is_meta());
  EXPECT_TRUE(cat.find("meta_weight")->reshape({12}).is_meta());
}

TEST(MetaTensors, TypedLoadThroughAnAdapterSaysTheFileHasNoData) {
  // nn::Linear's declared layout transposes the weight before the check.
  nn::Linear m(4, 3);
  try {
    load(m, fixture("torch2/meta_linear.pt"));
    FAIL() << "loaded a meta tensor";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("meta tensor"), std::string::npos) << e.what();
  }
}

// Files torch 2.6 itself saved (tests/fixtures/torch26, made by
// make_torch26_fixtures.py under scripts/torch.sh 2.6): read as its
// torch.load(weights_only=True) gives them, or refused naming what is not
// read; scan never calls them unsafe, and says torch 2.6 loads those it reads.
class Torch26Saved : public ::testing::TestWithParam<std::string> {};

TEST_P(Torch26Saved, ReadAsTorchLoadsThemOrRefusedByName) {
  const std::string name = GetParam();
  const fs::path file = fixture("torch26/" + name + ".pt");
  const auto want = test::read_json(fixture("torch26/" + name + ".expected.json"));
  const ScanReport r = scan(file);
  EXPECT_NE(r.verdict, ScanVerdict::unsafe) << r.reason();
  if (want.value("code", "") != "corrupt") {  // what torch reads is never malformed
    EXPECT_NE(r.verdict, ScanVerdict::malformed) << r.reason();
  }
  if (want.contains("refused")) {
    try {
      (void)open(file);
      ADD_FAILURE() << name << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(error_code_name(e.code()), want.value("code", "unsupported")) << e.what();
      EXPECT_NE(std::string(e.what()).find(want["refused"].get<std::string>()), std::string::npos)
          << e.what();
    }
    return;
  }
  expect_tensors(open(file), want);
  ASSERT_TRUE(r.torch_weights_only);
  EXPECT_EQ(r.torch_weights_only->loads, std::optional<bool>(true)) << r.torch_weights_only->why;
}

INSTANTIATE_TEST_SUITE_P(Files, Torch26Saved,
                         ::testing::Values("new_dtypes", "bits", "conj", "nested", "quint4x2",
                                           "quint4x2_legacy", "bad_nested"));

// quint4x2 and quint2x4 tensors read unpacked (a U8 per value) over the
// packed storage the file holds, which .pt gets back byte for byte; their
// formats without quantized types take the values with --keep-quantized.
TEST(Torch26Saved, PackedQuantizedWriteBackAsTorchPacksThem) {
  const TensorCatalog cat = open(fixture("torch26/quint4x2.pt"));
  const Tensor& q4 = *cat.find("q4");
  ASSERT_TRUE(q4.is_quantized());
  EXPECT_EQ(q4.quantization()->bits, 4);
  EXPECT_EQ(q4.dtype(), DType::U8);
  EXPECT_EQ(q4.file_storage()->nbytes(), 9u);  // torch's storage: 15 values, 8 bytes and one spare
  EXPECT_EQ(q4.storage()->nbytes(), 15u);
  const Tensor values = q4.contiguous();
  for (const std::uint8_t v : values.span<std::uint8_t>()) EXPECT_LT(v, 16);
  const fs::path dir = test::temp_dir("torch26_quint4x2");
  save(cat, dir / "out.pt", SaveFormat::pytorch);
  const TensorCatalog back = open(dir / "out.pt");
  expect_tensors(back, test::read_json(fixture("torch26/quint4x2.expected.json")));
  for (const auto& [name, t] : cat.tensors()) {
    SCOPED_TRACE(name);
    const auto a = t.file_storage()->bytes(), b = back.find(name)->file_storage()->bytes();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  // Materialized (owned copies of the values), the packing is made again.
  save(materialize(cat, Residence::owned), dir / "owned.pt", SaveFormat::pytorch);
  expect_tensors(open(dir / "owned.pt"),
                 test::read_json(fixture("torch26/quint4x2.expected.json")));
  save(split_quantized(cat), dir / "split.safetensors", SaveFormat::safetensors);
  const TensorCatalog split = open(dir / "split.safetensors");
  EXPECT_TRUE(split.find("q2")->equal(cat.find("q2")->with_quantization(nullptr)));
  EXPECT_EQ(split.metadata().at("torchport.quantized.q2"), "quint2x4 per_tensor_affine");
  fs::remove_all(dir);
}

TEST(Torch26Saved, PackedQuantizedValuesMustFitTheirBits) {
  auto q = std::make_shared<Quantization>();
  q->bits = 2;
  const Tensor ok = Tensor::from<std::uint8_t>({3, 0, 1, 2, 3}, {5}).with_quantization(q);
  EXPECT_EQ(ok.file_storage()->nbytes(), 2u);
  EXPECT_EQ(static_cast<unsigned>(ok.file_storage()->bytes()[0]), 0b10010011u);  // first value low
  const Tensor bad = Tensor::from<std::uint8_t>({4}, {1}).with_quantization(q);
  EXPECT_THROW((void)bad.file_storage()->bytes(), Error);
  EXPECT_THROW((void)Tensor::from<std::int8_t>({1}, {1}).with_quantization(q), Error);
  EXPECT_THROW(
      (void)Tensor::from<std::uint8_t>({1, 2, 3, 0}, {2, 2}).transpose(0, 1).with_quantization(q),
      Error);
  // A storage too small for the sizes is corrupt, also when numel x bits
  // would overflow 64 bits.
  EXPECT_THROW((void)Tensor::packed_quantized(Storage::allocate(1), {5}, q), Error);
  EXPECT_THROW((void)Tensor::packed_quantized(Storage::allocate(1), {std::int64_t{1} << 62}, q),
               Error);
  auto q4 = std::make_shared<Quantization>();
  q4->bits = 4;
  EXPECT_THROW((void)Tensor::packed_quantized(Storage::allocate(8), {std::int64_t{1} << 62}, q4),
               Error);
  EXPECT_EQ(Tensor::packed_quantized(Storage::allocate(3), {5}, q4).numel(), 5);
}

// A conj view shares its base's storage in the file; read, it resolves
// into a storage of its own, and written back it points at the base's again.
TEST(Torch26Saved, ConjViewsReadResolvedAndWriteBackWithTheBit) {
  const TensorCatalog cat = open(fixture("torch26/conj.pt"));
  const Tensor& base = *cat.find("base");
  const Tensor& conj = *cat.find("conj");
  EXPECT_TRUE(conj.is_conj());
  EXPECT_EQ(conj.file_storage(), base.storage());
  EXPECT_NE(conj.storage(), base.storage());
  const auto b = base.contiguous().to(DType::C64), c = conj.contiguous().to(DType::C64);
  const auto* x = reinterpret_cast<const float*>(b.bytes().data());
  const auto* y = reinterpret_cast<const float*>(c.bytes().data());
  for (std::int64_t i = 0; i < base.numel(); ++i) {
    EXPECT_EQ(x[2 * i], y[2 * i]);
    EXPECT_EQ(x[2 * i + 1], -y[2 * i + 1]);
  }
  const fs::path dir = test::temp_dir("torch26_conj");
  save(cat, dir / "out.pt", SaveFormat::pytorch);
  const TensorCatalog back = open(dir / "out.pt");
  for (const auto& [name, t] : cat.tensors()) {
    SCOPED_TRACE(name);
    const Tensor& u = *back.find(name);
    EXPECT_EQ(u.is_conj(), t.is_conj());
    EXPECT_EQ(u.is_neg(), t.is_neg());
    EXPECT_EQ(u.strides(), t.strides());
    EXPECT_TRUE(u.equal(t));
  }
  EXPECT_EQ(back.find("conj")->file_storage(), back.find("base")->storage());  // one record
  fs::remove_all(dir);
}

// A nested tensor lists as its components; written back to .pt it is one
// nested tensor again (the catalogue's torchport.nested.NAME metadata).
TEST(Torch26Saved, NestedTensorsWriteBackNested) {
  const TensorCatalog cat = open(fixture("torch26/nested.pt"));
  EXPECT_EQ(cat.metadata().at("torchport.nested.n"), "2");
  const fs::path dir = test::temp_dir("torch26_nested");
  save(cat, dir / "out.pt", SaveFormat::pytorch);
  const TensorCatalog back = open(dir / "out.pt");
  expect_tensors(back, test::read_json(fixture("torch26/nested.expected.json")));
  EXPECT_EQ(back.metadata().at("torchport.nested.n"), "2");
  EXPECT_EQ(back.find("n.0")->storage(), back.find("n.1")->storage());  // one buffer
  const ScanReport r = scan(dir / "out.pt");
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << r.reason();
  bool named = false;
  for (const auto& pk : r.pickles)
    for (const auto& g : pk.globals)
      named = named || g.name == "torch._utils._rebuild_nested_tensor";
  EXPECT_TRUE(named);
  // Through safetensors (the metadata kept, each component a tensor of its
  // own) and back to .pt, nested again over a buffer of the copies.
  save(cat, dir / "n.safetensors", SaveFormat::safetensors);
  save(open(dir / "n.safetensors"), dir / "again.pt", SaveFormat::pytorch);
  const TensorCatalog again = open(dir / "again.pt");
  expect_tensors(again, test::read_json(fixture("torch26/nested.expected.json")));
  EXPECT_EQ(again.find("n.0")->storage(), again.find("n.1")->storage());
  // Components renamed or split from their group stay plain tensors.
  std::vector<NamedTensor> some = {cat.tensors()[0], cat.tensors()[2]};
  save(TensorCatalog::from_tensors(Format::state_dict, some, cat.metadata()), dir / "some.pt",
       SaveFormat::pytorch);
  const TensorCatalog plain = open(dir / "some.pt");
  EXPECT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain.metadata().count("torchport.nested.n"), 0u);
  fs::remove_all(dir);
}

TEST(Torch26Saved, BitsAreNeverConverted) {
  const TensorCatalog cat = open(fixture("torch26/bits.pt"));
  const Tensor& b = *cat.find("b8");
  EXPECT_EQ(b.dtype(), DType::BITS8);
  EXPECT_EQ(dtype_name(b.dtype()), "BITS8");
  EXPECT_FALSE(convertible(DType::BITS8, DType::U8));
  EXPECT_FALSE(convertible(DType::F32, DType::BITS16));
  EXPECT_THROW((void)b.to(DType::U8), Error);
}

TEST(MetaTensors, CompareByDtypeAndShape) {
  const TensorCatalog cat = open(fixture("torch2/meta.pt"));
  const Tensor& w = *cat.find("meta_weight");
  const TensorComparison same = compare_tensors("w", w, w, {});
  EXPECT_EQ(same.check, ValueCheck::no_data);
  EXPECT_TRUE(same.equal);
  const TensorComparison data = compare_tensors("w", w, Tensor::zeros(DType::F32, {3, 4}), {});
  EXPECT_EQ(data.check, ValueCheck::no_data);
  EXPECT_FALSE(data.equal);
  EXPECT_EQ(data.a.description(), "F32[3, 4] meta");
  const TensorComparison shape =
      compare_tensors("w", w, Tensor::meta(DType::F32, {4, 3}, {3, 1}), {});
  EXPECT_EQ(shape.check, ValueCheck::shape_differs);
  EXPECT_FALSE(shape.equal);
  EXPECT_FALSE(compare_tensors("w", w, Tensor::meta(DType::F16, {3, 4}, {4, 1}), {}).equal);
}

TEST(MetaTensors, BadCallsAreRefused) {
  EXPECT_THROW(Tensor::meta(DType::F32, {2, 3}, {1}), Error);
  EXPECT_THROW(Tensor::meta(DType::F32, {2, -3}, {3, 1}), Error);
  EXPECT_THROW(Tensor::meta(DType::F32, {2, 3}, {-1, 1}), Error);
  EXPECT_THROW(Tensor::meta(DType::F32, {1 << 30, 1 << 30}, {std::int64_t{1} << 62, 1}), Error);
  const Tensor ok = Tensor::meta(DType::F32, {0, 3}, {3, 1});
  EXPECT_TRUE(ok.is_meta());
  EXPECT_EQ(ok.numel(), 0);
}

}  // namespace
